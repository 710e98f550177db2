# Cross-compiles Neural for Windows x64 with mingw-w64 (Debian g++-mingw-w64-x86-64-posix: the
# posix thread model, which std::thread needs). Used by scripts/test-windows.sh, which builds the
# third-party dependencies into NEURAL_MINGW_PREFIX first and runs the tests under Wine.
#   cmake -S . -B build-windows/neural -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake \
#         -DNEURAL_MINGW_PREFIX=$PWD/build-windows/deps
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(NEURAL_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${NEURAL_MINGW_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${NEURAL_MINGW_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${NEURAL_MINGW_TRIPLE}-windres)

# Where scripts/test-windows.sh installs the cross-built dependencies (PCRE2, GoogleTest, the
# xxHash object, header-only fmt/spdlog/nlohmann-json configs). Passed on to try_compile.
set(NEURAL_MINGW_PREFIX "" CACHE PATH "Install prefix of the cross-built dependencies")
# The Qt built for mingw-w64 by scripts/build-qt-mingw.sh (the desktop app and the server);
# empty: no Qt, build with -DNEURAL_GUI=OFF. Its host tools (moc, rcc, uic) are Debian's own Qt of
# the same version (QT_HOST_PATH).
set(NEURAL_MINGW_QT "" CACHE PATH "Qt 6 prefix built for x86_64-w64-mingw32")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES NEURAL_MINGW_PREFIX NEURAL_MINGW_QT)
set(CMAKE_FIND_ROOT_PATH /usr/${NEURAL_MINGW_TRIPLE} ${NEURAL_MINGW_PREFIX} ${NEURAL_MINGW_QT})
set(CMAKE_PREFIX_PATH ${NEURAL_MINGW_PREFIX} ${NEURAL_MINGW_QT})
if(NEURAL_MINGW_QT)
  set(QT_HOST_PATH /usr CACHE PATH "Host Qt (Debian's) for the cross build's tools")
  execute_process(COMMAND gcc -dumpmachine OUTPUT_VARIABLE _neural_host_triple
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(QT_HOST_PATH_CMAKE_DIR /usr/lib/${_neural_host_triple}/cmake CACHE PATH "")
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Self-contained executables: libgcc, libstdc++ and winpthread linked statically, so the .exe
# files and the persistent DLL run with no MinGW runtime DLL beside them (as the MSVC build ships
# its own runtime). PCRE2 is a static library: its header must not declare dllimport.
set(CMAKE_C_FLAGS_INIT "-DPCRE2_STATIC")
set(CMAKE_CXX_FLAGS_INIT "-DPCRE2_STATIC")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static")

# Test discovery (gtest_discover_tests) and try_run execute Windows binaries through Wine.
find_program(NEURAL_WINE NAMES wine64 wine PATHS /usr/lib/wine NO_CMAKE_FIND_ROOT_PATH)
if(NEURAL_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${NEURAL_WINE})
endif()
