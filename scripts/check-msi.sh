#!/usr/bin/env bash
# The Linux proof of the Windows installer: builds an MSI with wixl (Debian msitools) from the
# same WiX product source the CPack WIX build uses (installer/neural.wxs, with the file list
# installer/wixl-files.py writes from the staging folder in place of the one CPack generates),
# from the mingw-w64 cross build, then checks it:
#   1. every DLL each executable and DLL imports is a Windows system DLL or shipped in the MSI;
#   2. its tables (msiinfo export): Property (ProductVersion = the project version, ProductCode
#      = the per-version UUID, UpgradeCode, ALLUSERS), File (every staged file, sizes),
#      Component (64-bit), Directory (ProgramFiles64Folder), Shortcut (Start menu, desktop: to
#      neural-desktop.exe in a build with the desktop app), Feature/FeatureComponents (the
#      optional desktop shortcut), Upgrade (MajorUpgrade rows), the summary's x64 platform;
#   3. the files extracted from it (msiextract) are byte-identical to the staged ones;
#   4. under Wine (when present), in a prefix of its own: install, run the installed neural.exe,
#      with the desktop app: start the installed neural-desktop.exe on the demo model under Xvfb
#      (a message sent, the streamed reply screenshotted), the installed neural-server.exe
#      answering a chat completion and a streamed one on loopback; upgrade to a newer version
#      (the older one is replaced), install without the desktop shortcut, uninstall (program
#      files gone, the user's data kept).
# A build with the desktop app (gui/neural-desktop.exe present) needs the Qt it was built with:
# NEURAL_QT_MINGW (scripts/test-windows.sh sets it); the MSI then carries the app, the server,
# the Qt DLLs they import, the MinGW runtime DLLs Qt needs, the Qt plugins the app loads
# (platforms, sqldrivers, styles, imageformats) and the demo tokenizer.
# Called at the end of scripts/test-windows.sh; skipped with the reason when wixl is missing.
#   check-msi.sh [CROSS_BUILD_DIR]   (default build-windows/neural)
#   NEURAL_MSI_WINE=0                skip step 4
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-$ROOT/build-windows/neural}
OUT=$BUILD/msi
TRIPLE=x86_64-w64-mingw32

for tool in wixl msiinfo msiextract; do
  if ! command -v $tool >/dev/null; then
    echo "check-msi: skipped: $tool not installed (Debian packages wixl and msitools; scripts/setup.sh installs them)"
    exit 0
  fi
done
[ -f "$BUILD/CMakeCache.txt" ] || { echo "check-msi: $BUILD is not a build folder (run scripts/test-windows.sh)" >&2; exit 1; }
EXE=$BUILD/engine/cli/neural.exe
DLL=$BUILD/engine/cpu/persistent/neural_cpu_persistent.dll
for f in "$EXE" "$DLL"; do [ -f "$f" ] || { echo "check-msi: $f missing (run scripts/test-windows.sh)" >&2; exit 1; }; done
VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
[ -n "$VERSION" ] || { echo "check-msi: no CMAKE_PROJECT_VERSION in $BUILD/CMakeCache.txt" >&2; exit 1; }
DESKTOP=$BUILD/gui/neural-desktop.exe
SERVER=$BUILD/server/neural-server.exe
GUI=0
if [ -f "$DESKTOP" ]; then
  GUI=1
  [ -f "$SERVER" ] || { echo "check-msi: $SERVER missing beside the desktop app" >&2; exit 1; }
  QT=${NEURAL_QT_MINGW:-}
  [ -n "$QT" ] && [ -d "$QT/bin" ] && [ -d "$QT/plugins" ] ||
    { echo "check-msi: NEURAL_QT_MINGW must name the Qt the desktop app was built with" >&2; exit 1; }
  TOKENIZER=$(sed -n 's/^NEURAL_DEMO_TOKENIZER_SOURCE:FILEPATH=//p' "$BUILD/CMakeCache.txt")
  [ -s "$TOKENIZER" ] || { echo "check-msi: the demo tokenizer ($TOKENIZER) is missing" >&2; exit 1; }
fi

fails=0
check() {  # check DESCRIPTION COMMAND...: runs COMMAND, prints ok/FAIL
  local what=$1; shift
  if "$@"; then echo "  ok    $what"; else echo "  FAIL  $what"; fails=$((fails + 1)); fi
}

# Windows system DLLs (never shipped): the OS's own, and the API sets.
SYSTEM_DLLS=" kernel32.dll msvcrt.dll ucrtbase.dll ntdll.dll advapi32.dll shell32.dll ole32.dll "
SYSTEM_DLLS+="user32.dll ws2_32.dll bcrypt.dll psapi.dll shlwapi.dll synchronization.dll "
SYSTEM_DLLS+="gdi32.dll comdlg32.dll imm32.dll oleaut32.dll winmm.dll uxtheme.dll dwmapi.dll "
SYSTEM_DLLS+="version.dll netapi32.dll userenv.dll iphlpapi.dll dnsapi.dll mpr.dll wtsapi32.dll "
SYSTEM_DLLS+="setupapi.dll shcore.dll d3d9.dll d3d11.dll dxgi.dll dwrite.dll d2d1.dll crypt32.dll "
SYSTEM_DLLS+="secur32.dll authz.dll comctl32.dll winspool.drv opengl32.dll winhttp.dll wininet.dll "
SYSTEM_DLLS+="ncrypt.dll rpcrt4.dll mswsock.dll usp10.dll d3d12.dll dcomp.dll "
imports() { $TRIPLE-objdump -p "$1" | sed -n 's/^\s*DLL Name: //p' | tr 'A-Z' 'a-z'; }
is_system() { case "$SYSTEM_DLLS" in *" $1 "*) return 0 ;; esac; [[ $1 == api-ms-win-* || $1 == ext-ms-* ]]; }
# Where the DLLs that are not Windows' come from: Qt's bin/, the MinGW runtime of the compiler.
DLL_DIRS=()
if [ "$GUI" = 1 ]; then
  DLL_DIRS=("$QT/bin" "$(dirname "$($TRIPLE-g++-posix -print-file-name=libstdc++-6.dll)")"
            "/usr/$TRIPLE/lib")
fi
find_dll() {  # name (lower case) -> path, from DLL_DIRS (case-insensitive)
  local d f
  for d in "${DLL_DIRS[@]}"; do
    f=$(find "$d" -maxdepth 1 -iname "$1" -print -quit 2>/dev/null)
    [ -n "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}

# --- build ------------------------------------------------------------------------------------
# Staging folder laid out as CPack stages the install() rules (wixl finds sources relative to
# the current folder); the include files CPack would write come from installer/product.cmake.
# With the desktop app: the Qt DLLs its executables import (and theirs, transitively), and the
# Qt plugins beside them in the folders windeployqt uses, found by Qt in the app's folder.
QT_PLUGINS="platforms/qwindows.dll sqldrivers/qsqlite.dll styles/qwindowsvistastyle.dll imageformats/qico.dll"
stage_files() {  # stage_files DIR
  local stage=$1 queue=() bin dll src p
  mkdir -p "$stage/bin"
  cp "$EXE" "$DLL" "$stage/bin/"
  cp "$ROOT/LICENSE" "$stage/LICENSE.txt"
  [ "$GUI" = 1 ] || return 0
  cp "$DESKTOP" "$SERVER" "$stage/bin/"
  for p in $QT_PLUGINS; do
    [ -f "$QT/plugins/$p" ] || { echo "check-msi: Qt plugin $p missing in $QT/plugins" >&2; exit 1; }
    mkdir -p "$stage/bin/$(dirname "$p")"
    cp "$QT/plugins/$p" "$stage/bin/$p"
  done
  mkdir -p "$stage/share/neural/demo"
  cp "$TOKENIZER" "$stage/share/neural/demo/tokenizer.json"
  queue=("$stage"/bin/*.exe "$stage"/bin/*.dll "$stage"/bin/*/*.dll)
  while [ ${#queue[@]} -gt 0 ]; do
    bin=${queue[0]}; queue=("${queue[@]:1}")
    for dll in $(imports "$bin"); do
      is_system "$dll" && continue
      [ -n "$(find "$stage/bin" -maxdepth 1 -iname "$dll" -print -quit)" ] && continue
      src=$(find_dll "$dll") || continue  # reported by check 1
      cp "$src" "$stage/bin/"
      queue+=("$stage/bin/$(basename "$src")")
    done
  done
}
build_msi() {  # build_msi VERSION MSI
  local version=$1 msi=$2 stage vars defs=()
  stage=$OUT/stage-$version
  vars=$OUT/vars-$version
  rm -rf "$stage" "$vars"
  mkdir -p "$vars"
  stage_files "$stage"
  python3 "$ROOT/installer/wixl-files.py" "$stage" > "$vars/files.wxs"
  cp "$ROOT/installer/neural.ico" "$vars/"
  cmake -DVERSION="$version" -DICON=neural.ico -DOUT_DIR="$vars" -P "$ROOT/installer/product.cmake" 2>/dev/null
  [ "$GUI" = 1 ] && defs=(-D NEURAL_DESKTOP_EXE=neural-desktop.exe)
  (cd "$stage" && wixl -a x64 -I "$vars" "${defs[@]}" -o "$msi" "$ROOT/installer/neural.wxs" "$vars/files.wxs")
}
mkdir -p "$OUT"
MSI=$OUT/Neural-$VERSION-win64.msi
rm -f "$MSI"
build_msi "$VERSION" "$MSI"
STAGE=$OUT/stage-$VERSION
staged=$(cd "$STAGE" && find . -type f | sed 's|^\./||' | sort)
echo "check-msi: built $MSI ($(stat -c %s "$MSI") bytes, $(wc -l <<<"$staged") files) with wixl $(wixl --version)"

# --- 1. runtime DLLs --------------------------------------------------------------------------
# The engine's executables link the MinGW runtime statically (cmake/mingw-w64.cmake); Qt's DLLs
# need the shared one (libstdc++-6.dll, libgcc_s_seh-1.dll, libwinpthread-1.dll), staged above.
files=$(msiinfo export "$MSI" File | tail -n +4 | tr -d '\r' | cut -f3 | tr 'A-Z' 'a-z')
imports_ok=1
while IFS= read -r rel; do
  case "$rel" in *.exe|*.dll) ;; *) continue ;; esac
  for dll in $(imports "$STAGE/$rel"); do
    is_system "$dll" && continue
    grep -qx "$dll" <<<"$files" && continue
    echo "  $rel imports $dll, which is neither a Windows system DLL nor in the MSI"
    imports_ok=0
  done
done <<<"$staged"
check "every imported DLL is a Windows system DLL or in the MSI" test $imports_ok = 1
# The GPU engine (docs/CUDA.md "Driver API and fatbin"): no CUDA DLL is imported (the NVIDIA
# driver's nvcuda.dll is loaded at run time, cudart is not used at all) and the build's fatbin
# is inside every program that runs the engine.
CUDA=$(sed -n 's/^cuda=//p' "$BUILD/neural-configuration.txt" 2>/dev/null)
if [ "$CUDA" = ON ]; then
  cuda_imports=$(while IFS= read -r rel; do
      case "$rel" in *.exe|*.dll) imports "$STAGE/$rel" | grep -iE '^(nvcuda|cudart|cublas|nvrtc|cuda)' | sed "s|^|$rel: |" ;; esac
    done <<<"$staged")
  check "no CUDA DLL imported (nvcuda.dll is loaded at run time)${cuda_imports:+: $cuda_imports}" test -z "$cuda_imports"
  FATBIN=$BUILD/engine/cuda/neural_kernels.fatbin
  holds_fatbin() { python3 -c 'import sys; sys.exit(0 if open(sys.argv[2],"rb").read() in open(sys.argv[1],"rb").read() else 1)' "$1" "$FATBIN"; }
  gpu_programs=(bin/neural.exe)
  [ "$GUI" = 1 ] && gpu_programs+=(bin/neural-server.exe bin/neural-desktop.exe)
  for rel in "${gpu_programs[@]}"; do
    check "$rel holds the GPU kernels' fatbin ($(stat -c %s "$FATBIN") bytes, byte for byte)" holds_fatbin "$STAGE/$rel"
  done
else
  echo "  note  CPU-only build (cuda=${CUDA:-?} in $BUILD/neural-configuration.txt): no GPU engine in this MSI"
fi
# --- 2. tables --------------------------------------------------------------------------------
table() { msiinfo export "$MSI" "$1" | tail -n +4 | tr -d '\r'; }  # rows, no header, no CR
prop() { table Property | awk -F'\t' -v k="$1" '$1 == k { print $2 }'; }
has_row() { grep -qxF -- "$2" <(table "$1"); }  # exact, tab-separated row
PRODUCT_CODE="{$(python3 -c "import uuid,sys; print(str(uuid.uuid5(uuid.UUID(sys.argv[1]), sys.argv[2])).upper())" \
  8E4C1B52-6B1F-4C2A-9D57-3F0A2E71C4B9 "$VERSION")}"
UPGRADE_CODE="{8E4C1B52-6B1F-4C2A-9D57-3F0A2E71C4B9}"
tables=$(msiinfo tables "$MSI")
for t in File Component Directory Shortcut Upgrade Property Feature FeatureComponents Registry; do
  check "table $t present" grep -qx "$t" <<<"$tables"
done
check "ProductVersion = $VERSION (project version)" test "$(prop ProductVersion)" = "$VERSION"
check "ProductCode = $PRODUCT_CODE (UUIDv5 of the version)" test "$(prop ProductCode)" = "$PRODUCT_CODE"
check "UpgradeCode = $UPGRADE_CODE" test "$(prop UpgradeCode)" = "$UPGRADE_CODE"
check "ProductName = Neural, Manufacturer = Neural" test "$(prop ProductName)/$(prop Manufacturer)" = "Neural/Neural"
check "per machine (ALLUSERS = 1)" test "$(prop ALLUSERS)" = 1
check "Add/Remove Programs icon" test "$(prop ARPPRODUCTICON)" = NeuralIcon.ico
check "x64 package (summary Template x64;1033)" grep -q '^Template: x64;1033$' <(msiinfo suminfo "$MSI")
# Every staged file once in the File table, with its size, in a 64-bit component of the folder
# it was staged in; nothing else.
file_rows=$(table File)
comp_rows=$(table Component)
dir_rows=$(table Directory)
files_ok=1
while IFS= read -r rel; do
  name=$(basename "$rel"); size=$(stat -c %s "$STAGE/$rel")
  row=$(awk -F'\t' -v n="$name" -v z="$size" '($3 == n || $3 ~ ("\\|" n "$")) && $4 == z' <<<"$file_rows" | head -1)
  [ -n "$row" ] || { echo "  $rel ($size bytes) is not in the File table"; files_ok=0; continue; }
  comp=$(cut -f2 <<<"$row")
  IFS=$'\t' read -r _ cdir attr <<<"$(awk -F'\t' -v c="$comp" '$1 == c { print $1 "\t" $3 "\t" $4 }' <<<"$comp_rows")"
  [ $(( ${attr:-0} / 256 % 2 )) = 1 ] || { echo "  $rel: component $comp is not 64-bit"; files_ok=0; }
  # The component's folder, spelled out from the Directory table up to INSTALL_ROOT.
  path=""; d=$cdir
  while [ -n "$d" ] && [ "$d" != INSTALL_ROOT ]; do
    IFS=$'\t' read -r _ parent dname <<<"$(awk -F'\t' -v i="$d" '$1 == i' <<<"$dir_rows")"
    path="${dname##*|}${path:+/$path}"; d=$parent
  done
  want=$(dirname "$rel"); [ "$want" = . ] && want=""
  [ "$path" = "$want" ] || { echo "  $rel: installed into '$path', staged in '$want'"; files_ok=0; }
done <<<"$staged"
check "every staged file ($(wc -l <<<"$staged")) is in the File table with its size, 64-bit, in its folder" test $files_ok = 1
check "no other files" test "$(wc -l <<<"$file_rows")" = "$(wc -l <<<"$staged")"
check "neural.exe and the persistent DLL in bin/, LICENSE.txt in the root (known component ids)" \
  test "$(awk -F'\t' '$1 ~ /^Neural(Exe|PersistentDll|License)$/ { print $1 ":" $3 }' <<<"$comp_rows" | sort | tr '\n' ' ')" \
       = "NeuralExe:NEURAL_BIN NeuralLicense:INSTALL_ROOT NeuralPersistentDll:NEURAL_BIN "
if [ "$GUI" = 1 ]; then
  for f in bin/neural-desktop.exe bin/neural-server.exe bin/Qt6Core.dll bin/Qt6Widgets.dll \
           bin/Qt6Charts.dll bin/Qt6HttpServer.dll bin/Qt6Sql.dll bin/platforms/qwindows.dll \
           bin/sqldrivers/qsqlite.dll share/neural/demo/tokenizer.json; do
    check "the desktop app's $f is in the MSI" grep -qx "$f" <<<"$staged"
  done
fi
check "INSTALL_ROOT = ProgramFiles64Folder\\Neural" has_row Directory "$(printf 'INSTALL_ROOT\tProgramFiles64Folder\tNeural')"
check "bin below INSTALL_ROOT" has_row Directory "$(printf 'NEURAL_BIN\tINSTALL_ROOT\tbin')"
check "Start-menu folder ProgramMenuFolder\\Neural" has_row Directory "$(printf 'NEURAL_MENU_FOLDER\tProgramMenuFolder\tNeural')"
if [ "$GUI" = 1 ]; then
  check "Start-menu shortcut to bin\\neural-desktop.exe (in INSTALL_ROOT, icon)" \
    grep -qP '^NeuralStartMenu\tNEURAL_MENU_FOLDER\tNeural\tNeuralStartMenuShortcut\t\[INSTALL_ROOT\]bin\\neural-desktop\.exe\t.*NeuralIcon\.ico\t.*INSTALL_ROOT' <(table Shortcut)
  check "desktop shortcut to bin\\neural-desktop.exe" \
    grep -qP '^NeuralDesktop\tDesktopFolder\tNeural\t.*\t\[INSTALL_ROOT\]bin\\neural-desktop\.exe\t' <(table Shortcut)
else
  check "Start-menu shortcut (cmd /k bin\\neural.exe --help in INSTALL_ROOT, icon)" \
    grep -qP '^NeuralStartMenu\tNEURAL_MENU_FOLDER\tNeural command prompt\tNeuralStartMenuShortcut\t\[SystemFolder\]cmd\.exe\t/k bin\\neural\.exe --help\t.*NeuralIcon\.ico\t.*INSTALL_ROOT' <(table Shortcut)
fi
check "desktop shortcut" grep -qP '^NeuralDesktop\tDesktopFolder\t' <(table Shortcut)
check "uninstall removes the Start-menu folder (RemoveFile)" \
  grep -qP '^NeuralRemoveMenuFolder\tNeuralStartMenuShortcut\t\tNEURAL_MENU_FOLDER\t2$' <(table RemoveFile)
check "features: ProductFeature (required, level 1) and DesktopShortcut (level 1)" \
  test "$(table Feature | awk -F'\t' '{ print $1 ":" $6 }' | sort | tr '\n' ' ')" = "DesktopShortcut:1 ProductFeature:1 "
# FeatureComponents: the desktop shortcut alone in DesktopShortcut; every file component and the
# Start-menu shortcut in ProductFeature.
fc=$(table FeatureComponents)
check "the desktop shortcut is the DesktopShortcut feature's only component, and not in ProductFeature" \
  test "$(awk -F'\t' '$1 == "DesktopShortcut" || $2 == "NeuralDesktopShortcut"' <<<"$fc" | tr '\t\n' ': ')" = "DesktopShortcut:NeuralDesktopShortcut "
check "ProductFeature holds every file's component and the Start-menu shortcut" \
  test "$(awk -F'\t' '$1 == "ProductFeature" { print $2 }' <<<"$fc" | sort | tr '\n' ' ')" \
     = "$( { cut -f2 <<<"$file_rows"; echo NeuralStartMenuShortcut; } | sort | tr '\n' ' ')"
check "MajorUpgrade: older versions detected for removal (Upgrade row, max $VERSION exclusive)" \
  has_row Upgrade "$(printf '%s\t\t%s\t\t1\t\tWIX_UPGRADE_DETECTED' "$UPGRADE_CODE" "$VERSION")"
check "MajorUpgrade: newer versions refuse a downgrade (Upgrade row, min $VERSION exclusive)" \
  has_row Upgrade "$(printf '%s\t%s\t\t\t2\t\tWIX_DOWNGRADE_DETECTED' "$UPGRADE_CODE" "$VERSION")"
check "RemoveExistingProducts is scheduled" grep -qP '^RemoveExistingProducts\t' <(table InstallExecuteSequence)

# --- 3. contents ------------------------------------------------------------------------------
X=$OUT/extract
rm -rf "$X" && mkdir -p "$X"
(cd "$X" && msiextract "$MSI" >/dev/null)
for f in "bin/neural.exe:$EXE" "bin/neural_cpu_persistent.dll:$DLL" "LICENSE.txt:$ROOT/LICENSE"; do
  rel=${f%%:*}; src=${f#*:}
  got=$(find "$X" -path "*/Neural/$rel" | head -1)
  check "extracted Neural/$rel is byte-identical to the build" cmp -s "$src" "${got:-/nonexistent}"
done
same=1
while IFS= read -r rel; do
  got=$(find "$X" -path "*/Neural/$rel" | head -1)
  cmp -s "$STAGE/$rel" "${got:-/nonexistent}" || { echo "  extracted $rel differs from the staged file"; same=0; }
done <<<"$staged"
check "every extracted file ($(wc -l <<<"$staged")) is byte-identical to the staged one" test $same = 1

# --- 4. install / upgrade / uninstall under Wine ----------------------------------------------
WINE=$(command -v wine64 || true)
[ -z "$WINE" ] && [ -x /usr/lib/wine/wine64 ] && WINE=/usr/lib/wine/wine64
if [ "${NEURAL_MSI_WINE:-1}" = 0 ]; then
  echo "check-msi: install test under Wine skipped (NEURAL_MSI_WINE=0)"
elif [ -z "$WINE" ]; then
  echo "check-msi: install test under Wine skipped: wine64 not installed"
else
  # A prefix of its own, with HOME inside it: Wine links the Windows desktop to $HOME, and
  # winemenubuilder (disabled) would add menu entries to the Linux desktop.
  W=$OUT/wine
  mkdir -p "$W/home"
  run_wine() { HOME=$W/home WINEPREFIX=$W/prefix WINEDEBUG=-all \
               WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d" timeout 300 "$WINE" "$@"; }
  [ -d "$W/prefix" ] || run_wine wineboot -i >/dev/null 2>&1 || true
  # A program that crashes gets its backtrace written to its log by winedbg, and no crash
  # dialog: on the virtual display the dialog would wait for a click that never comes.
  run_wine reg add 'HKCU\Software\Wine\WineDbg' /v ShowCrashDialog /t REG_DWORD /d 0 /f >/dev/null 2>&1 || true
  WINESERVER=$(command -v wineserver || echo /usr/lib/wine/wineserver64)
  # Waits for the prefix's programs to end, at most a minute, then ends them.
  stop_server() {
    HOME=$W/home WINEPREFIX=$W/prefix timeout 60 "$WINESERVER" -w >/dev/null 2>&1 ||
      HOME=$W/home WINEPREFIX=$W/prefix "$WINESERVER" -k >/dev/null 2>&1 || true
  }
  PF=$W/prefix/drive_c/Program\ Files/Neural
  LNK="Neural command prompt.lnk"
  [ "$GUI" = 1 ] && LNK="Neural.lnk"
  menu_lnk() { find "$W/prefix/drive_c" -path "*Start Menu/Programs/Neural/$LNK" | head -1; }
  desk_lnk() { find "$W/home" "$W/prefix/drive_c/users" -name "$LNK" \
                 -not -path '*Start Menu*' 2>/dev/null | head -1; }
  registered() { run_wine reg query "HKLM\\Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\$1" >/dev/null 2>&1; }
  # msiexec returns when its own process ends; a MajorUpgrade removes the older product in a
  # child msiexec, and the registry the checks query is the wineserver's. Each step therefore
  # waits until every process of the prefix has ended (the server exits after the last one), so
  # a check never reads the state of an install still in progress. (A CI run once saw the
  # upgrade check fail while every other check passed; it has not been reproduced since.)
  msi() { run_wine msiexec "$@" >/dev/null 2>&1 || true; stop_server; }
  # eventually CHECK...: the check, polled for up to 20 s, for state that lags the processes.
  eventually() { local i; for i in $(seq 20); do "$@" && return 0; sleep 1; done; "$@"; }
  # A clean start (a previous run that failed halfway may have left the product installed).
  msi /x "$MSI" /qn
  msi /i "$MSI" /qn /l*v "$OUT/install.log"
  check "Wine: msiexec /i installs bin\\neural.exe, bin\\neural_cpu_persistent.dll, LICENSE.txt" \
    test -f "$PF/bin/neural.exe" -a -f "$PF/bin/neural_cpu_persistent.dll" -a -f "$PF/LICENSE.txt"
  check "Wine: Start-menu and desktop shortcuts created" test -n "$(menu_lnk)" -a -n "$(desk_lnk)"
  check "Wine: registered as $PRODUCT_CODE" registered "$PRODUCT_CODE"
  ver=$(cd "$PF/bin" 2>/dev/null && run_wine ./neural.exe --version 2>/dev/null | tr -d '\r' || true)
  check "Wine: the installed neural.exe runs (--version: '$ver')" grep -q "$VERSION" <<<"$ver"
  if [ "$GUI" = 1 ]; then
    # The installed desktop app on a virtual display: it makes the demo model from the tokenizer
    # it carries, loads it, sends a message and saves the window with the streamed reply
    # (--screenshots; exit status 0 only when the model answered).
    LAD=$(find "$W/prefix/drive_c/users" -maxdepth 3 -type d -path '*/AppData/Local' -not -path '*/Public/*' | head -1)
    SHOTS=$OUT/screenshots
    rm -rf "$SHOTS"
    disp=$(( 90 + RANDOM % 400 ))
    Xvfb ":$disp" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
    xvfb_pid=$!
    sleep 1
    app_rc=0
    (cd "$PF/bin" && DISPLAY=":$disp" run_wine ./neural-desktop.exe --demo --screenshots "Z:${SHOTS//\//\\}" \
       >"$OUT/desktop-wine.log" 2>&1) || app_rc=$?
    stop_server
    check "Wine: the installed neural-desktop.exe made the demo model, answered a message and saved $SHOTS/main.png (exit $app_rc)" \
      test "$app_rc" = 0 -a -s "$SHOTS/main.png"
    APPDATA_DIR=$(find "${LAD:-/nonexistent}" -maxdepth 3 -type d -name neural-desktop 2>/dev/null | head -1)
    check "Wine: its data under %LOCALAPPDATA% (conversations, demo model): ${APPDATA_DIR#$W/prefix/drive_c/}" \
      test -n "$APPDATA_DIR" -a -f "$APPDATA_DIR/conversations.sqlite" -a -f "$APPDATA_DIR/demo/config.json"
    # The installed server on that demo model: a chat completion and a streamed one (loopback).
    sport=$(( 20000 + RANDOM % 20000 ))
    demo_win="Z:${APPDATA_DIR//\//\\}\\demo"
    (cd "$PF/bin" && run_wine ./neural-server.exe --model "$demo_win" --port "$sport" \
       >"$OUT/server-wine.log" 2>&1) &
    server_pid=$!
    up=0
    for i in $(seq 60); do curl -sf "http://127.0.0.1:$sport/health" >/dev/null && { up=1; break; }; sleep 1; done
    check "Wine: the installed neural-server.exe answers /health on 127.0.0.1:$sport" test $up = 1
    body='{"model":"demo","messages":[{"role":"user","content":"Hello"}],"max_tokens":8}'
    reply=$(curl -sf -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$sport/v1/chat/completions" || true)
    check "Wine: a chat completion from the installed server" \
      python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["object"]=="chat.completion" and r["usage"]["completion_tokens"]>0' "$reply"
    sbody='{"model":"demo","messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"stream":true}'
    stream=$(curl -sfN -H 'Content-Type: application/json' -d "$sbody" "http://127.0.0.1:$sport/v1/chat/completions" || true)
    check "Wine: a streamed chat completion (chunks, then data: [DONE])" \
      test "$(grep -c '"chat.completion.chunk"' <<<"$stream")" -gt 1 -a "$(grep -c '^data: \[DONE\]' <<<"$stream")" = 1
    if [ "$CUDA" = ON ]; then
      # No NVIDIA driver under Wine: the GPU engine says so in one line and the CPU answers
      # (above); `neural fit`, the desktop app's log and its status bar say why.
      fit=$(cd "$PF/bin" && run_wine ./neural.exe fit --model "$demo_win" 2>&1 | tr -d '\r' || true)
      check "Wine: the installed neural fit says why the GPU is not used: $(grep -m1 -o 'no NVIDIA driver found[^)]*)' <<<"$fit")" \
        grep -q "backend cpu: no NVIDIA driver found" <<<"$fit"
      check "Wine: the desktop app's log says it too (backend: cpu (no NVIDIA driver found ...))" \
        grep -q "backend: cpu (no NVIDIA driver found" "$APPDATA_DIR/logs/neural-desktop.log"
      check "Wine: and its status bar (main.png's engine state, logged by --screenshots)" \
        grep -q "status bar: .*on the CPU: no NVIDIA driver found" "$APPDATA_DIR/logs/neural-desktop.log"
    fi
    HOME=$W/home WINEPREFIX=$W/prefix "$WINESERVER" -k >/dev/null 2>&1 || true
    wait "$server_pid" 2>/dev/null || true
    kill "$xvfb_pid" 2>/dev/null || true
    wait "$xvfb_pid" 2>/dev/null || true
  fi
  # Upgrade: the same files as a newer version replace the installed one.
  NEXT=$(awk -F. '{ printf "%d.%d.%d", $1, $2, $3 + 1 }' <<<"$VERSION")
  NEXT_MSI=$OUT/upgrade-test/Neural-$NEXT-win64.msi
  mkdir -p "$(dirname "$NEXT_MSI")" && rm -f "$NEXT_MSI"
  build_msi "$NEXT" "$NEXT_MSI"
  NEXT_CODE=$(sed -n 's/.*CPACK_WIX_PRODUCT_GUID="\([^"]*\)".*/{\1}/p' "$OUT/vars-$NEXT/cpack_variables.wxi")
  msi /i "$NEXT_MSI" /qn /l*v "$OUT/upgrade.log"
  replaced() { ! registered "$PRODUCT_CODE" && registered "$NEXT_CODE"; }
  if ! eventually replaced; then
    # What to look at, then one more attempt from a clean state: a CI run once saw this check
    # fail (every other check passing) and it has not been reproduced since. A MajorUpgrade
    # that is really broken fails both attempts; the line below says when the second was needed.
    echo "  note  first upgrade attempt: $VERSION registered: $(registered "$PRODUCT_CODE" && echo yes || echo no)," \
         "$NEXT registered: $(registered "$NEXT_CODE" && echo yes || echo no); $OUT/upgrade.log says:"
    tr -d '\r' <"$OUT/upgrade.log" 2>/dev/null | grep -E 'FindRelatedProducts|RemoveExistingProducts|WIX_UPGRADE_DETECTED|Return value 3|completed' \
      | sed 's/^/          /' || true
    echo "  note  uninstalling both, installing $VERSION and upgrading to $NEXT once more"
    msi /x "$NEXT_MSI" /qn
    msi /x "$MSI" /qn
    msi /i "$MSI" /qn /l*v "$OUT/install-again.log"
    msi /i "$NEXT_MSI" /qn /l*v "$OUT/upgrade-again.log"
  fi
  check "Wine: installing $NEXT replaces $VERSION (MajorUpgrade: old product gone, new one registered)" eventually replaced
  check "Wine: files still installed after the upgrade" test -f "$PF/bin/neural.exe"
  msi /x "$NEXT_MSI" /qn /l*v "$OUT/uninstall-next.log"
  # Without the optional desktop shortcut.
  msi /i "$MSI" /qn ADDLOCAL=ProductFeature /l*v "$OUT/install-nodesktop.log"
  check "Wine: ADDLOCAL=ProductFeature installs without the desktop shortcut" \
    test -f "$PF/bin/neural.exe" -a -n "$(menu_lnk)" -a -z "$(desk_lnk)"
  msi /x "$MSI" /qn /l*v "$OUT/uninstall.log"
  check "Wine: msiexec /x removes every file, folder and shortcut it installed" \
    test ! -e "$PF" -a -z "$(menu_lnk)" -a -z "$(desk_lnk)"
  if [ "$GUI" = 1 ]; then
    check "Wine: the user's data (conversations, demo model, settings) is kept after the uninstall" \
      test -f "$APPDATA_DIR/conversations.sqlite" -a -f "$APPDATA_DIR/demo/config.json"
  fi
  none_left() { ! registered "$PRODUCT_CODE" && ! registered "$NEXT_CODE"; }
  check "Wine: no product left registered" eventually none_left
  stop_server
fi

if [ "$fails" != 0 ]; then
  echo "check-msi: $fails check(s) failed ($MSI)"
  exit 1
fi
echo "check-msi: all checks passed ($MSI)"
