#!/usr/bin/env bash
# Builds Qt 6.4.2 for Windows x64 (x86_64-w64-mingw32, shared DLLs) once, for the Windows GUI stage
# of scripts/test-windows.sh: Core, Gui, Widgets, Network, Sql with the SQLite driver, Test, the
# windows platform plugin and the styles plugin (qtbase), Charts and HttpServer. docs/WINDOWS.md.
#
# The host tools (moc, rcc, uic, syncqt) are Debian's own Qt 6.4.2 (qt6-base-dev-tools, installed
# by scripts/setup.sh); the cross-built Qt must be the same version, so:
#   qtbase       from Debian's source package: `apt-get source qt6-base` (6.4.2+dfsg, the deb-src
#                entry scripts/setup.sh adds)
#   qtcharts     Debian's pool no longer serves these three sources, so they come from the public
#   qtwebsockets Qt repositories at the tag v6.4.2 (https://code.qt.io/qt/<module>.git or its
#   qthttpserver GitHub mirror qt/<module>): NEURAL_QT_MODULES=<folder> holding one checkout or
#                extracted source tree per module, named qtcharts/, qtwebsockets/, qthttpserver/.
#                A folder that is a bare git repository (<module>.git or <module>/repo) is
#                exported at v6.4.2 with `git archive`.
#
# Result: $NEURAL_QT_MINGW (default ~/.cache/neural/qt-mingw-6.4.2), a Qt prefix with
# lib/cmake/Qt6*, bin/*.dll, plugins/. The build reads ../shared/qt-mingw first when it exists
# (scripts/test-windows.sh), so this long build runs once per machine at most.
#   NEURAL_QT_JOBS      parallel jobs (default: number of cores)
#   NEURAL_QT_WORK      source and build folder (default ~/.cache/neural/qt-mingw-work)
# Prints the time each module took and the size of the result.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSION=6.4.2
TRIPLE=x86_64-w64-mingw32
PREFIX=${NEURAL_QT_MINGW:-$HOME/.cache/neural/qt-mingw-$VERSION}
WORK=${NEURAL_QT_WORK:-$HOME/.cache/neural/qt-mingw-work}
JOBS=${NEURAL_QT_JOBS:-$(nproc)}
MODULES=${NEURAL_QT_MODULES:-}
HOST_CMAKE=/usr/lib/$(gcc -dumpmachine)/cmake

die() { echo "build-qt-mingw: $*" >&2; exit 1; }
command -v $TRIPLE-g++-posix >/dev/null || die "$TRIPLE-g++-posix missing (scripts/setup.sh installs it)"
[ -f "$HOST_CMAKE/Qt6HostInfo/Qt6HostInfoConfig.cmake" ] || die "Debian's host Qt tools missing (qt6-base-dev)"
host_version=$(sed -n 's/.*PACKAGE_VERSION "\([0-9.]*\)".*/\1/p' "$HOST_CMAKE/Qt6Core/Qt6CoreConfigVersionImpl.cmake" | head -1)
[ "$host_version" = "$VERSION" ] || die "host Qt is $host_version, this script builds $VERSION (host tools must match)"
if [ -f "$PREFIX/.neural-qt-done" ] && [ -f "$PREFIX/bin/libwinpthread-1.dll" ]; then
  echo "build-qt-mingw: $PREFIX is complete"; exit 0
fi
mkdir -p "$WORK" "$PREFIX"
t_all=$(date +%s)

# --- sources -----------------------------------------------------------------------------------
if ! ls -d "$WORK"/qt6-base-$VERSION*/ >/dev/null 2>&1; then
  echo "build-qt-mingw: apt-get source qt6-base"
  (cd "$WORK" && apt-get source -qq qt6-base >/dev/null 2>&1) ||
    die "'apt-get source qt6-base' failed (deb-src missing? scripts/setup.sh adds it)"
fi
QTBASE=$(ls -d "$WORK"/qt6-base-$VERSION*/ | head -1)

module_src() {  # module name -> source folder (exported from git when given a repository)
  local m=$1 d
  [ -n "$MODULES" ] || die "NEURAL_QT_MODULES is not set: it names the folder with the $m v$VERSION source (see the header of this script)"
  for d in "$MODULES/$m" "$MODULES/$m.git" "$MODULES/$m/repo"; do
    if [ -f "$d/CMakeLists.txt" ]; then echo "$d"; return; fi
    if git -C "$d" rev-parse --git-dir >/dev/null 2>&1 && git -C "$d" rev-parse -q --verify "v$VERSION^{commit}" >/dev/null; then
      rm -rf "$WORK/$m-$VERSION"; mkdir -p "$WORK/$m-$VERSION"
      git -C "$d" archive "v$VERSION" | tar -x -C "$WORK/$m-$VERSION"
      echo "$WORK/$m-$VERSION"; return
    fi
  done
  die "no $m source at v$VERSION under $MODULES"
}

common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX"
        -DCMAKE_SYSTEM_NAME=Windows -DCMAKE_SYSTEM_PROCESSOR=x86_64
        -DCMAKE_C_COMPILER=$TRIPLE-gcc-posix -DCMAKE_CXX_COMPILER=$TRIPLE-g++-posix
        -DCMAKE_RC_COMPILER=$TRIPLE-windres
        -DCMAKE_FIND_ROOT_PATH="/usr/$TRIPLE;$PREFIX"
        -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY
        -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=BOTH
        -DQT_HOST_PATH=/usr -DQT_HOST_PATH_CMAKE_DIR="$HOST_CMAKE"
        -DQT_BUILD_EXAMPLES=OFF -DQT_BUILD_TESTS=OFF)
command -v ccache >/dev/null && common+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

build_module() {  # name source-folder extra-cmake-args...
  local name=$1 src=$2; shift 2
  if [ -f "$WORK/.done-$name" ]; then echo "build-qt-mingw: $name already built"; return; fi
  local t0; t0=$(date +%s)
  echo "build-qt-mingw: $name (configure)"
  # An interrupted earlier attempt's build folder is configured again and continued, not removed.
  cmake -S "$src" -B "$WORK/build-$name" "${common[@]}" "$@" > "$WORK/$name-configure.log" 2>&1 ||
    { tail -40 "$WORK/$name-configure.log" >&2; die "$name: configure failed ($WORK/$name-configure.log)"; }
  echo "build-qt-mingw: $name (build, $JOBS jobs)"
  cmake --build "$WORK/build-$name" -j "$JOBS" > "$WORK/$name-build.log" 2>&1 ||
    { grep -m20 -B2 -A8 "error" "$WORK/$name-build.log" >&2 || tail -40 "$WORK/$name-build.log" >&2
      die "$name: build failed ($WORK/$name-build.log)"; }
  cmake --install "$WORK/build-$name" > "$WORK/$name-install.log" 2>&1 || die "$name: install failed"
  touch "$WORK/.done-$name"
  echo "build-qt-mingw: $name took $(( $(date +%s) - t0 )) s"
}

# SQLite for the Qt SQL driver: Debian's qtbase source leaves out the bundled copy (+dfsg), so
# the amalgamation is made from Debian's sqlite3 source (its own tool, which needs tclsh) and
# linked statically into qsqlite.dll (FEATURE_system_sqlite against this static library).
if [ ! -f "$PREFIX/lib/libsqlite3.a" ]; then
  command -v tclsh >/dev/null || die "tclsh missing (Debian package tcl): the SQLite amalgamation needs it"
  t0=$(date +%s)
  echo "build-qt-mingw: SQLite (apt-get source sqlite3, amalgamation, static library)"
  if ! ls -d "$WORK"/sqlite3-*/ >/dev/null 2>&1; then
    (cd "$WORK" && apt-get source -qq sqlite3 >/dev/null 2>&1) || die "'apt-get source sqlite3' failed"
  fi
  sq_src=$(ls -d "$WORK"/sqlite3-*/ | head -1)
  rm -rf "$WORK/build-sqlite" && mkdir -p "$WORK/build-sqlite"
  (cd "$WORK/build-sqlite" && "$sq_src/configure" --disable-tcl > configure.log 2>&1 &&
     make sqlite3.c > make.log 2>&1) || die "SQLite amalgamation failed ($WORK/build-sqlite)"
  $TRIPLE-gcc-posix -O2 -DSQLITE_THREADSAFE=1 -DSQLITE_ENABLE_COLUMN_METADATA \
    -c "$WORK/build-sqlite/sqlite3.c" -o "$WORK/build-sqlite/sqlite3.o"
  mkdir -p "$PREFIX/lib" "$PREFIX/include"
  $TRIPLE-ar rcs "$PREFIX/lib/libsqlite3.a" "$WORK/build-sqlite/sqlite3.o"
  cp "$WORK/build-sqlite/sqlite3.h" "$WORK/build-sqlite/sqlite3ext.h" "$PREFIX/include/" 2>/dev/null ||
    cp "$WORK/build-sqlite/sqlite3.h" "$PREFIX/include/"
  echo "build-qt-mingw: SQLite took $(( $(date +%s) - t0 )) s"
fi

# The Windows platform plugin's tablet support includes wintab.h and pktdef.h, which Debian's
# qtbase source also leaves out (Wacom's licence); Wine's own LGPL headers (Debian libwine-dev,
# downloaded, not installed) stand in for them, with the two Wine-only macros they use.
WINTAB=$QTBASE/src/3rdparty/wintab
if [ ! -f "$WINTAB/wine-wintab.h" ]; then
  echo "build-qt-mingw: wintab.h and pktdef.h from Wine's headers (apt-get download libwine-dev)"
  rm -rf "$WORK/libwine-dev" && mkdir -p "$WORK/libwine-dev" "$WINTAB"
  (cd "$WORK/libwine-dev" && apt-get download -qq libwine-dev >/dev/null 2>&1 && dpkg -x libwine-dev_*.deb root) ||
    die "'apt-get download libwine-dev' failed"
  cp "$WORK/libwine-dev/root/usr/include/wine/wine/windows/pktdef.h" "$WINTAB/pktdef.h"
  cp "$WORK/libwine-dev/root/usr/include/wine/wine/windows/wintab.h" "$WINTAB/wine-wintab.h"
  cat > "$WINTAB/wintab.h" <<'WINTAB_H'
/* Wine's wintab.h (LGPL, Debian libwine-dev) in place of the one Debian's qtbase source leaves
   out; its two Wine-only macros defined here (scripts/build-qt-mingw.sh). */
#ifndef NEURAL_WINTAB_COMPAT_H
#define NEURAL_WINTAB_COMPAT_H
#include <windows.h>
#ifndef DECL_WINELIB_TYPE_AW
#ifdef UNICODE
#define DECL_WINELIB_TYPE_AW(type) typedef type##W type;
#else
#define DECL_WINELIB_TYPE_AW(type) typedef type##A type;
#endif
#endif
#ifndef API
#define API WINAPI
#endif
#include "wine-wintab.h"
#endif
WINTAB_H
fi

# Qt 6.4.2's Windows platform plugin does not build without OpenGL when dynamicgl stays on
# (qwindowswindow.cpp's isSoftwareGl uses the OpenGL context classes): guard it.
sed -i 's/^#if QT_CONFIG(dynamicgl)$/#if QT_CONFIG(dynamicgl) \&\& QT_CONFIG(opengl)/' \
  "$QTBASE/src/plugins/platforms/windows/qwindowswindow.cpp"

# qtbase: only what the desktop app, the server and their tests load. No OpenGL (the app draws
# with the raster engine; Charts builds without its OpenGL series), no D-Bus, no ICU; the bundled
# zlib, PCRE2, libpng, libjpeg, FreeType and HarfBuzz, so the DLLs need nothing but Windows
# (and the static SQLite above).
build_module qtbase "$QTBASE" \
  -DBUILD_SHARED_LIBS=ON -DFEATURE_opengl=OFF -DFEATURE_vulkan=OFF -DFEATURE_dbus=OFF \
  -DFEATURE_icu=OFF -DFEATURE_printsupport=OFF -DFEATURE_sql_odbc=OFF -DFEATURE_sql_psql=OFF \
  -DFEATURE_sql_mysql=OFF -DFEATURE_sql_ibase=OFF -DFEATURE_sql_oci=OFF -DFEATURE_sql_db2=OFF \
  -DFEATURE_sql_sqlite=ON -DFEATURE_system_sqlite=ON -DSQLite3_INCLUDE_DIR="$PREFIX/include" \
  -DSQLite3_LIBRARY="$PREFIX/lib/libsqlite3.a" -DFEATURE_system_zlib=OFF \
  -DFEATURE_system_pcre2=OFF -DFEATURE_system_png=OFF -DFEATURE_system_jpeg=OFF \
  -DFEATURE_system_freetype=OFF -DFEATURE_system_harfbuzz=OFF -DFEATURE_system_doubleconversion=OFF \
  -DFEATURE_openssl=OFF
for m in qtcharts qtwebsockets qthttpserver; do
  [ -f "$WORK/.done-$m" ] && { echo "build-qt-mingw: $m already built"; continue; }
  src=$(module_src $m) || exit 1
  build_module $m "$src" -DCMAKE_PREFIX_PATH="$PREFIX"
done

# The MinGW runtime DLLs the Qt DLLs load, beside them (as Qt's own MinGW packages ship them), so
# the prefix is self-contained: tests run with its bin/ on the path, the MSI takes them from there.
for dll in libstdc++-6.dll libgcc_s_seh-1.dll libwinpthread-1.dll; do
  src=$($TRIPLE-g++-posix -print-file-name=$dll)
  [ -f "$src" ] || src=/usr/$TRIPLE/lib/$dll
  [ -f "$src" ] || die "the MinGW runtime $dll was not found"
  cp "$src" "$PREFIX/bin/"
  $TRIPLE-strip --strip-debug "$PREFIX/bin/$dll"  # Debian ships them with debug info
done

for f in Qt6Core Qt6Gui Qt6Widgets Qt6Network Qt6Sql Qt6Test Qt6Charts Qt6HttpServer; do
  [ -f "$PREFIX/bin/$f.dll" ] || die "$PREFIX/bin/$f.dll missing after the build"
done
for f in platforms/qwindows.dll sqldrivers/qsqlite.dll; do
  [ -f "$PREFIX/plugins/$f" ] || die "$PREFIX/plugins/$f missing after the build"
done
echo "$VERSION $(date -u +%FT%TZ)" > "$PREFIX/.neural-qt-done"
echo "build-qt-mingw: done in $(( $(date +%s) - t_all )) s, $(du -sh "$PREFIX" | cut -f1) in $PREFIX"
