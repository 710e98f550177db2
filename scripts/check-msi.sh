#!/usr/bin/env bash
# The Linux proof of the Windows installer: builds an MSI with wixl (Debian msitools) from the
# same WiX product source the CPack WIX build uses (installer/neural.wxs, with
# installer/wixl-files.wxs in place of the file list CPack generates), from the mingw-w64 cross
# build of neural.exe and neural_cpu_persistent.dll, then checks it:
#   1. every DLL the binaries import is a Windows system DLL or shipped in the MSI;
#   2. its tables (msiinfo export): Property (ProductVersion = the project version, ProductCode
#      = the per-version UUID, UpgradeCode, ALLUSERS), File (every expected file, sizes),
#      Component (64-bit), Directory (ProgramFiles64Folder), Shortcut (Start menu, desktop),
#      Feature/FeatureComponents (the optional desktop shortcut), Upgrade (MajorUpgrade rows),
#      the summary's x64 platform;
#   3. the files extracted from it (msiextract) are byte-identical to the built ones;
#   4. under Wine (when present), in a prefix of its own: install, run the installed neural.exe,
#      upgrade to a newer version (the older one is replaced), install without the desktop
#      shortcut, uninstall (nothing left behind).
# Called at the end of scripts/test-windows.sh; skipped with the reason when wixl is missing.
#   check-msi.sh [CROSS_BUILD_DIR]   (default build-windows/neural)
#   NEURAL_MSI_WINE=0                skip step 4
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-$ROOT/build-windows/neural}
OUT=$BUILD/msi

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

fails=0
check() {  # check DESCRIPTION COMMAND...: runs COMMAND, prints ok/FAIL
  local what=$1; shift
  if "$@"; then echo "  ok    $what"; else echo "  FAIL  $what"; fails=$((fails + 1)); fi
}

# --- build ------------------------------------------------------------------------------------
# Staging folder laid out as CPack stages the install() rules (wixl finds sources relative to
# the current folder); the include files CPack would write come from installer/product.cmake.
build_msi() {  # build_msi VERSION MSI
  local version=$1 msi=$2 stage vars
  stage=$OUT/stage-$version
  vars=$OUT/vars-$version
  rm -rf "$stage" "$vars"
  mkdir -p "$stage/bin" "$vars"
  cp "$EXE" "$DLL" "$stage/bin/"
  cp "$ROOT/LICENSE" "$stage/LICENSE.txt"
  cp "$ROOT/installer/neural.ico" "$vars/"
  cmake -DVERSION="$version" -DICON=neural.ico -DOUT_DIR="$vars" -P "$ROOT/installer/product.cmake" 2>/dev/null
  (cd "$stage" && wixl -a x64 -I "$vars" -o "$msi" "$ROOT/installer/neural.wxs" \
     "$ROOT/installer/wixl-files.wxs")
}
mkdir -p "$OUT"
MSI=$OUT/Neural-$VERSION-win64.msi
rm -f "$MSI"
build_msi "$VERSION" "$MSI"
echo "check-msi: built $MSI ($(stat -c %s "$MSI") bytes) with wixl $(wixl --version)"

# --- 1. runtime DLLs --------------------------------------------------------------------------
# The MinGW runtime is linked statically (cmake/mingw-w64.cmake); if that ever changes, the DLLs
# it brings (libstdc++-6.dll, libgomp-1.dll, ...) must be added to installer/wixl-files.wxs.
SYSTEM_DLLS=" kernel32.dll msvcrt.dll ucrtbase.dll ntdll.dll advapi32.dll shell32.dll ole32.dll "
SYSTEM_DLLS+="user32.dll ws2_32.dll bcrypt.dll psapi.dll shlwapi.dll synchronization.dll "
files=$(msiinfo export "$MSI" File | tail -n +4 | tr -d '\r' | cut -f3 | tr 'A-Z' 'a-z')
imports_ok=1
for bin in "$EXE" "$DLL"; do
  for dll in $(x86_64-w64-mingw32-objdump -p "$bin" | sed -n 's/^\s*DLL Name: //p' | tr 'A-Z' 'a-z'); do
    case "$SYSTEM_DLLS" in *" $dll "*) continue ;; esac
    [[ $dll == api-ms-win-* ]] && continue
    grep -qx "$dll" <<<"$files" && continue
    echo "  $(basename "$bin") imports $dll, which is neither a Windows system DLL nor in the MSI"
    imports_ok=0
  done
done
check "every imported DLL is a Windows system DLL or in the MSI" test $imports_ok = 1

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
for f in "neural.exe:NeuralExe:$EXE" "neural_cpu_persistent.dll:NeuralPersistentDll:$DLL" \
         "LICENSE.txt:NeuralLicense:$ROOT/LICENSE"; do
  IFS=: read -r name comp src <<<"$f"
  check "File $name ($(stat -c %s "$src") bytes) in component $comp" \
    grep -qP "^\Q$name\E\t$comp\t\Q$name\E\t$(stat -c %s "$src")\t" <(table File)
done
check "3 files, no others" test "$(table File | wc -l)" = 3
check "components are 64-bit: bin/ holds neural.exe and the DLL, LICENSE.txt in the root" \
  test "$(table Component | awk -F'\t' '$1 ~ /^Neural(Exe|PersistentDll|License)$/ && int($4 / 256) % 2 == 1 { print $1 ":" $3 }' | sort | tr '\n' ' ')" \
       = "NeuralExe:NEURAL_BIN NeuralLicense:INSTALL_ROOT NeuralPersistentDll:NEURAL_BIN "
check "INSTALL_ROOT = ProgramFiles64Folder\\Neural" has_row Directory "$(printf 'INSTALL_ROOT\tProgramFiles64Folder\tNeural')"
check "bin below INSTALL_ROOT" has_row Directory "$(printf 'NEURAL_BIN\tINSTALL_ROOT\tbin')"
check "Start-menu folder ProgramMenuFolder\\Neural" has_row Directory "$(printf 'NEURAL_MENU_FOLDER\tProgramMenuFolder\tNeural')"
check "Start-menu shortcut (cmd /k bin\\neural.exe --help in INSTALL_ROOT, icon)" \
  grep -qP '^NeuralStartMenu\tNEURAL_MENU_FOLDER\tNeural command prompt\tNeuralStartMenuShortcut\t\[SystemFolder\]cmd\.exe\t/k bin\\neural\.exe --help\t.*NeuralIcon\.ico\t.*INSTALL_ROOT' <(table Shortcut)
check "desktop shortcut" grep -qP '^NeuralDesktop\tDesktopFolder\t' <(table Shortcut)
check "uninstall removes the Start-menu folder (RemoveFile)" \
  grep -qP '^NeuralRemoveMenuFolder\tNeuralStartMenuShortcut\t\tNEURAL_MENU_FOLDER\t2$' <(table RemoveFile)
check "features: ProductFeature (required, level 1) and DesktopShortcut (level 1)" \
  test "$(table Feature | awk -F'\t' '{ print $1 ":" $6 }' | sort | tr '\n' ' ')" = "DesktopShortcut:1 ProductFeature:1 "
check "the desktop shortcut is the DesktopShortcut feature's only component, and not in ProductFeature" \
  test "$(table FeatureComponents | sort | tr '\t\n' ': ')" \
       = "DesktopShortcut:NeuralDesktopShortcut ProductFeature:NeuralExe ProductFeature:NeuralLicense ProductFeature:NeuralPersistentDll ProductFeature:NeuralStartMenuShortcut "
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
  WINESERVER=$(command -v wineserver || echo /usr/lib/wine/wineserver64)
  stop_server() { HOME=$W/home WINEPREFIX=$W/prefix "$WINESERVER" -w >/dev/null 2>&1 || true; }
  PF=$W/prefix/drive_c/Program\ Files/Neural
  menu_lnk() { find "$W/prefix/drive_c" -path '*Start Menu/Programs/Neural/Neural command prompt.lnk' | head -1; }
  desk_lnk() { find "$W/home" "$W/prefix/drive_c/users" -name 'Neural command prompt.lnk' \
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
  none_left() { ! registered "$PRODUCT_CODE" && ! registered "$NEXT_CODE"; }
  check "Wine: no product left registered" eventually none_left
  stop_server
fi

if [ "$fails" != 0 ]; then
  echo "check-msi: $fails check(s) failed ($MSI)"
  exit 1
fi
echo "check-msi: all checks passed ($MSI)"
