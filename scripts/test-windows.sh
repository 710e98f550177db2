#!/usr/bin/env bash
# Proof that the product builds and runs on Windows, from Linux: cross-compiles the engine, the
# `neural` CLI, the persistent-team DLL and the engine's unit tests for Windows x64 with
# mingw-w64 (cmake/mingw-w64.cmake) and, when a Qt built for mingw-w64 exists (the Windows GUI
# stage: scripts/build-qt-mingw.sh; looked for in NEURAL_QT_MINGW, ../shared/qt-mingw, the
# script's cache), the desktop app, neural-server and their tests too; then runs every test
# executable under Wine against the shared fixture (the CLI tests included: they start
# neural.exe; the GUI tests on Qt's offscreen platform) and prints a summary; last,
# scripts/check-msi.sh builds the MSI with wixl, checks it and installs and runs it under Wine
# (skipped without wixl). Without that Qt a framed line says the GUI stage was skipped and why.
# Idempotent: the third-party dependencies are built once into build-windows/deps (from Debian
# packages only: PCRE2 from its Debian source package, GoogleTest from /usr/src/googletest,
# xxHash/fmt/spdlog/nlohmann-json from their headers).
#   NEURAL_WINDOWS_JOBS       build jobs (default: number of cores)
#   NEURAL_WINDOWS_TIMEOUT    seconds per test executable under Wine (default 300)
#   NEURAL_SHARED_DIR         reference data (default ../shared)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TRIPLE=x86_64-w64-mingw32
OUT=$ROOT/build-windows
DEPS=$OUT/deps
SRC=$OUT/src
JOBS=${NEURAL_WINDOWS_JOBS:-$(nproc)}
TIMEOUT=${NEURAL_WINDOWS_TIMEOUT:-300}
WINE=$(command -v wine64 || true)
[ -z "$WINE" ] && [ -x /usr/lib/wine/wine64 ] && WINE=/usr/lib/wine/wine64
command -v $TRIPLE-g++-posix >/dev/null || { echo "test-windows: $TRIPLE-g++-posix missing (scripts/setup.sh)" >&2; exit 1; }
[ -n "$WINE" ] || { echo "test-windows: wine64 missing (scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$DEPS/include" "$DEPS/lib" "$SRC"
# A cache of its own beside the native one (scripts/build.sh), kept across clones of the tree
# (CCACHE_BASEDIR: paths below the checkout hash as relative ones).
export CCACHE_DIR=${NEURAL_MINGW_CCACHE_DIR:-$HOME/.cache/neural-ccache-mingw}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
xcmake=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/mingw-w64.cmake"
        -DNEURAL_MINGW_PREFIX="$DEPS" -DCMAKE_INSTALL_PREFIX="$DEPS" "${launcher[@]}")
start=$(date +%s)

# --- third-party dependencies (once) ------------------------------------------------------------
if [ ! -f "$DEPS/.headers-done" ]; then
  echo "test-windows: header-only dependencies (fmt, spdlog, nlohmann-json, xxHash)"
  for d in fmt spdlog nlohmann; do rm -rf "$DEPS/include/$d"; cp -r "/usr/include/$d" "$DEPS/include/"; done
  cp /usr/include/xxhash.h "$DEPS/include/"
  [ -f /usr/include/xxh3.h ] && cp /usr/include/xxh3.h "$DEPS/include/"
  # xxHash as a one-object static library, so cmake/FindXXHash.cmake finds it as on Linux.
  printf '#define XXH_IMPLEMENTATION\n#define XXH_STATIC_LINKING_ONLY\n#include "xxhash.h"\n' > "$SRC/xxhash.c"
  $TRIPLE-gcc-posix -O2 -I"$DEPS/include" -c "$SRC/xxhash.c" -o "$SRC/xxhash.o"
  $TRIPLE-ar rcs "$DEPS/lib/libxxhash.a" "$SRC/xxhash.o"
  # CMake package configs: fmt and spdlog header-only (Debian's spdlog uses the external fmt).
  mkdir -p "$DEPS/lib/cmake/fmt" "$DEPS/lib/cmake/spdlog" "$DEPS/lib/cmake/nlohmann_json"
  cat > "$DEPS/lib/cmake/fmt/fmt-config.cmake" <<CFG
if(NOT TARGET fmt::fmt)
  add_library(fmt::fmt INTERFACE IMPORTED)
  set_target_properties(fmt::fmt PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$DEPS/include"
    INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
endif()
CFG
  cat > "$DEPS/lib/cmake/spdlog/spdlog-config.cmake" <<CFG
if(NOT TARGET spdlog::spdlog)
  add_library(spdlog::spdlog INTERFACE IMPORTED)
  set_target_properties(spdlog::spdlog PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$DEPS/include"
    INTERFACE_COMPILE_DEFINITIONS "SPDLOG_HEADER_ONLY;SPDLOG_FMT_EXTERNAL;FMT_HEADER_ONLY=1")
endif()
CFG
  cat > "$DEPS/lib/cmake/nlohmann_json/nlohmann_json-config.cmake" <<CFG
set(nlohmann_json_VERSION 3.11.2)
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$DEPS/include")
endif()
CFG
  printf 'set(PACKAGE_VERSION 3.11.2)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' \
    > "$DEPS/lib/cmake/nlohmann_json/nlohmann_json-config-version.cmake"
  touch "$DEPS/.headers-done"
fi

if [ ! -f "$DEPS/.gtest-done" ]; then
  echo "test-windows: GoogleTest (/usr/src/googletest)"
  rm -rf "$SRC/gtest-build"
  cmake -S /usr/src/googletest -B "$SRC/gtest-build" "${xcmake[@]}" -Dgtest_disable_pthreads=OFF >/dev/null
  cmake --build "$SRC/gtest-build" -j "$JOBS" >/dev/null
  cmake --install "$SRC/gtest-build" >/dev/null
  touch "$DEPS/.gtest-done"
fi

if [ ! -f "$DEPS/.pcre2-done" ]; then
  echo "test-windows: PCRE2 (Debian source package)"
  if ! ls "$SRC"/pcre2-*/CMakeLists.txt >/dev/null 2>&1; then
    (cd "$SRC" && apt-get source -qq pcre2 >/dev/null 2>&1) || {
      echo "test-windows: 'apt-get source pcre2' failed (deb-src missing? scripts/setup.sh adds it)" >&2; exit 1; }
  fi
  pcre=$(ls -d "$SRC"/pcre2-*/ | head -1)
  rm -rf "$SRC/pcre2-build"
  cmake -S "$pcre" -B "$SRC/pcre2-build" "${xcmake[@]}" -DBUILD_SHARED_LIBS=OFF \
    -DPCRE2_BUILD_PCRE2GREP=OFF -DPCRE2_BUILD_TESTS=OFF -DPCRE2_SUPPORT_UNICODE=ON >/dev/null
  cmake --build "$SRC/pcre2-build" -j "$JOBS" >/dev/null
  cmake --install "$SRC/pcre2-build" >/dev/null
  touch "$DEPS/.pcre2-done"
fi

# --- Qt for mingw-w64: the desktop app and the server --------------------------------------------
# Built once by scripts/build-qt-mingw.sh. Looked for in NEURAL_QT_MINGW, ../shared/qt-mingw (a
# copy the steering side places there for every machine), then the script's own cache.
QT_MINGW=""
for d in "${NEURAL_QT_MINGW:-}" "$ROOT/../shared/qt-mingw" "$HOME/.cache/neural/qt-mingw-6.4.2"; do
  if [ -n "$d" ] && [ -f "$d/lib/cmake/Qt6Charts/Qt6ChartsConfig.cmake" ] &&
     [ -f "$d/lib/cmake/Qt6HttpServer/Qt6HttpServerConfig.cmake" ] && [ -f "$d/bin/Qt6Core.dll" ]; then
    QT_MINGW=$(cd "$d" && pwd); break
  fi
done
gui_args=(-DNEURAL_GUI=OFF)
if [ -n "$QT_MINGW" ]; then
  echo "test-windows: Windows GUI stage ON: the desktop app, the server and their tests with the Qt in $QT_MINGW"
  gui_args=(-DNEURAL_GUI=ON -DNEURAL_MINGW_QT="$QT_MINGW" -DNEURAL_PDF=OFF)
  echo "test-windows: ################################################################################"
  echo "test-windows: PDF ATTACHMENTS LEFT OUT: the Qt for mingw-w64 has no Qt PDF, so the Windows app is" \
       "built with -DNEURAL_PDF=OFF and says that it cannot read PDF text when a PDF is attached."
  echo "test-windows: ################################################################################"
else
  echo "test-windows: ################################################################################"
  echo "test-windows: WINDOWS GUI STAGE SKIPPED: no Qt for mingw-w64 (looked in \$NEURAL_QT_MINGW," \
       "../shared/qt-mingw, ~/.cache/neural/qt-mingw-6.4.2); neural-desktop.exe and neural-server.exe" \
       "were not built, tested or packed. scripts/build-qt-mingw.sh builds that Qt (once, about an hour)."
  echo "test-windows: ################################################################################"
fi

# The GPU engine (docs/CUDA.md "Driver API and fatbin"): nvcc, on this machine, compiles the
# kernels into the fatbin that is embedded in the Windows binaries; mingw-w64 compiles the host
# code on the CUDA driver API, which they load at run time (nvcuda.dll). Without nvcc the build
# is CPU-only, and a framed line says so.
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -n "$NVCC" ]; then
  CUDA=ON
  echo "test-windows: GPU engine ON: kernels by $NVCC into the embedded fatbin, host code by mingw-w64"
else
  CUDA=OFF
  echo "test-windows: ################################################################################"
  echo "test-windows: GPU ENGINE LEFT OUT: no nvcc (looked on PATH and in /usr/local/cuda/bin); the Windows" \
       "binaries and the MSI are CPU-only. Install the CUDA toolkit's nvcc to build the GPU engine."
  echo "test-windows: ################################################################################"
fi

# --- Neural (libgomp linked statically, as the rest of the runtime) ---------------------------------------------------------------------------------------
cmake_args=()
[ "$CUDA" = ON ] && cmake_args+=(-DNEURAL_NVCC="$NVCC")
[ -n "${NEURAL_SHARED_DIR:-}" ] && cmake_args+=(-DNEURAL_SHARED_DIR="$NEURAL_SHARED_DIR")
cmake -S "$ROOT" -B "$OUT/neural" "${xcmake[@]}" "${gui_args[@]}" -DNEURAL_CUDA=$CUDA -DNEURAL_WERROR=ON \
  -DNEURAL_BENCHMARKS=OFF "${cmake_args[@]}" \
  -DOpenMP_gomp_LIBRARY="$($TRIPLE-gcc-posix -print-file-name=libgomp.a)" >/dev/null
cmake --build "$OUT/neural" -j "$JOBS"
built=$(date +%s)

# --- run under Wine -------------------------------------------------------------------------------
export WINEPREFIX=$OUT/wineprefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
if [ -n "$QT_MINGW" ]; then
  # The Qt DLLs and plugins of the build tree's executables (the MSI puts them beside the app);
  # the GUI tests draw offscreen, as on Linux.
  winpath() { echo "Z:${1//\//\\}"; }
  export WINEPATH="$(winpath "$QT_MINGW/bin")" QT_PLUGIN_PATH="$(winpath "$QT_MINGW/plugins")"
  export QT_QPA_PLATFORM=offscreen NEURAL_QT_MINGW=$QT_MINGW
fi
[ -d "$WINEPREFIX" ] || timeout 300 "$WINE" wineboot -i >/dev/null 2>&1 || true
# A crash writes winedbg's backtrace into the program's log instead of opening a dialog.
timeout 60 "$WINE" reg add 'HKCU\Software\Wine\WineDbg' /v ShowCrashDialog /t REG_DWORD /d 0 /f >/dev/null 2>&1 || true

# Tests left out under Wine, each with its reason: "Suite.Test|reason" (gtest filter syntax).
# None at the moment. Fixed and back in: ExpertKernel.CallerFlushToZeroIsReproducedInWorkers
# (a lost wake-up in libstdc++ 12's std::atomic::wait without futexes hung the persistent
# team's shutdown under load; persistent_team.cpp parks on its own condition variable now) and
# FixtureStore.DamagedEscapeIsAnErrorNotAWildRead (patched its store while still mapping it,
# which Windows refuses). docs/WINDOWS.md.
EXCLUDED=()
# Known failures of the Windows build, not yet diagnosed: left out so CI stays green, listed in
# every run. Remove an entry once fixed.
KNOWN_FAILURES=()
filter="-"
for e in "${EXCLUDED[@]}" "${KNOWN_FAILURES[@]}"; do filter+="${e%%|*}:"; done
[ "$filter" = "-" ] && filter="*"

# One persistent wineserver for the whole run: by default it exits a few seconds after the last
# Wine process, and a test program starting just then loses its connection ("wine client
# error ... recvmsg"). Stopped again when the script exits.
WINESERVER=$(command -v wineserver || echo /usr/lib/wine/wineserver64)
"$WINESERVER" -p >/dev/null 2>&1 || true
trap '"$WINESERVER" -k >/dev/null 2>&1 || true' EXIT

pass=0; fail=0; skip=0; failed_exes=()
# Every test program the cross build registers with ctest runs, wherever it lies under tests/
# (a program that was built but not run here, or registered but not built, cannot pass as green).
mapfile -t programs < <(ctest --test-dir "$OUT/neural" -N |
                        sed -nE 's/^ *Test +#[0-9]+: ((neural|gui)_[a-z0-9_]+_tests)$/\1/p')
[ ${#programs[@]} -gt 0 ] || { echo "test-windows: ctest lists no test programs" >&2; exit 1; }
for name in "${programs[@]}"; do
  exe=$(find "$OUT/neural/tests" -name "$name.exe" -print -quit)
  if [ -z "$exe" ]; then
    fail=$((fail + 1)); failed_exes+=("$name"); echo "  $name: registered with ctest but not built"
    continue
  fi
  log=$OUT/neural/tests/$name.wine.log
  rc=0
  (cd "$(dirname "$exe")" && timeout "$TIMEOUT" "$WINE" "$exe" --gtest_filter="$filter" >"$log" 2>&1) || rc=$?
  # Wine's own plumbing occasionally drops a client ("wine client error: ... recvmsg") or fails
  # to start a child process (CreateProcessW error 1359, ERROR_INTERNAL_ERROR, seen once in
  # 22 ms under load), which says nothing about our code: run that program once more, and say so.
  for retry in 1 2; do
    [ "$rc" != 0 ] && grep -q -e "^wine client error" -e "CreateProcessW failed (error 1359)" "$log" || break
    echo "  $name: Wine client error (not a test result), running it again"
    rc=0
    (cd "$(dirname "$exe")" && timeout "$TIMEOUT" "$WINE" "$exe" --gtest_filter="$filter" >"$log" 2>&1) || rc=$?
  done
  p=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$log" | tail -1 || true)
  f=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1 || true)
  s=$(grep -oP '^\[  SKIPPED \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1 || true)
  p=${p:-0}; f=${f:-0}; s=${s:-0}
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; echo "  $name: exit $rc (timeout or crash), see $log"; fi
  # A program that died before gtest's summary (a crash can still end with exit status 0 under
  # Wine) is a failure, not "0 passed".
  if [ "$f" = 0 ] && ! grep -q '^\[==========\] [0-9]* tests\? from .* ran\.' "$log"; then
    f=1; echo "  $name: ended without gtest's summary (crash?), see $log"
  fi
  printf '  %-28s %4d passed %4d failed %4d skipped\n' "$name" "$p" "$f" "$s"
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  [ "$f" != 0 ] && { failed_exes+=("$name"); grep '^\[  FAILED  \]' "$log" | sed 's/^/    /' || true; }
done
# The GPU engine's start-up decision on Windows without a usable NVIDIA driver: Wine has no
# nvcuda.dll (a PC without the NVIDIA driver), and a stub nvcuda built with mingw-w64
# (tests/cuda/stub_driver.cpp) reports an old driver, or no GPU. Each time the engine says why in
# one line and `--backend cuda` fails with that reason (tests/cuda/CMakeLists.txt: the same cases
# natively).
if [ "$CUDA" = ON ]; then
  probe=$OUT/neural/tests/cuda/neural_cuda_driver_probe.exe
  stub=$(ls "$OUT"/neural/tests/cuda/*neural_stub_cuda.dll 2>/dev/null | head -1)
  wstub="Z:${stub//\//\\}"
  for case in "no_driver||no NVIDIA driver found" \
              "missing|NEURAL_CUDA_DRIVER=Z:\\no\\such\\nvcuda.dll|no NVIDIA driver found" \
              "old|NEURAL_CUDA_DRIVER=$wstub NEURAL_STUB_CUDA_VERSION=12040|NVIDIA driver too old: it supports CUDA 12.4" \
              "no_device|NEURAL_CUDA_DRIVER=$wstub NEURAL_STUB_CUDA_MODE=no_device|no NVIDIA GPU found" \
              "zero_devices|NEURAL_CUDA_DRIVER=$wstub NEURAL_STUB_CUDA_MODE=zero|no NVIDIA GPU found"; do
    IFS='|' read -r cname cenv cexpect <<<"$case"
    clog=$OUT/neural/tests/cuda_driver_$cname.wine.log
    # shellcheck disable=SC2086
    (cd "$(dirname "$probe")" && env $cenv timeout 60 "$WINE" "$probe" >"$clog" 2>&1) || true
    out=$(tr -d '\r' <"$clog")
    if grep -q "^cuda: unavailable: $cexpect" <<<"$out" &&
       grep -q "^--backend cuda: backend \"cuda\" is not available: $cexpect" <<<"$out"; then
      pass=$((pass + 1)); echo "  cuda driver: $cname: $(grep '^cuda:' <<<"$out")"
    else
      fail=$((fail + 1)); failed_exes+=("cuda_driver_$cname")
      echo "  cuda driver: $cname FAILED (expected '$cexpect'), see $clog:"; sed 's/^/    /' "$clog" | head -5
    fi
  done
fi
echo "Left out under Wine for a Wine reason (counted as skipped):"
[ ${#EXCLUDED[@]} = 0 ] && echo "  (none)"
for e in "${EXCLUDED[@]}"; do echo "  ${e%%|*}: ${e#*|}"; skip=$((skip + 1)); done
echo "Known Windows failures, left out until fixed (counted as skipped):"
[ ${#KNOWN_FAILURES[@]} = 0 ] && echo "  (none)"
for e in "${KNOWN_FAILURES[@]}"; do echo "  ${e%%|*}: ${e#*|}"; skip=$((skip + 1)); done
end=$(date +%s)
total=$((pass + fail))
echo "test-windows: $pass passed, $fail failed, $skip skipped ($total run) under Wine;" \
     "build $((built - start)) s, tests $((end - built)) s"

# The MSI from the cross-built CLI and DLL (wixl), its tables and an install under Wine.
msi_rc=0
"$ROOT/scripts/check-msi.sh" "$OUT/neural" || msi_rc=$?
[ "$fail" = 0 ] && [ "$msi_rc" = 0 ]
