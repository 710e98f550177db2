# neural_require_qt(<what> <component>...): finds the Qt 6 components <what> needs and stops the
# configure step when one is missing, naming the Debian package that provides it. A promised
# part of the product is never skipped silently (NEURAL_GUI=OFF is the explicit opt-out).
set(NEURAL_QT_DEBIAN_PACKAGE_Core qt6-base-dev)
set(NEURAL_QT_DEBIAN_PACKAGE_Gui qt6-base-dev)
set(NEURAL_QT_DEBIAN_PACKAGE_Widgets qt6-base-dev)
set(NEURAL_QT_DEBIAN_PACKAGE_Network qt6-base-dev)
set(NEURAL_QT_DEBIAN_PACKAGE_Sql "qt6-base-dev libqt6sql6-sqlite")
set(NEURAL_QT_DEBIAN_PACKAGE_Test qt6-base-dev)
set(NEURAL_QT_DEBIAN_PACKAGE_Charts "qt6-charts-dev libqt6opengl6-dev")
set(NEURAL_QT_DEBIAN_PACKAGE_HttpServer "qt6-httpserver-dev qt6-websockets-dev")
set(NEURAL_QT_DEBIAN_PACKAGE_Pdf qt6-pdf-dev)

function(neural_require_qt what)
  find_package(Qt6 6.4 QUIET COMPONENTS ${ARGN})
  set(missing "")
  set(packages "")
  foreach(c IN LISTS ARGN)
    if(NOT Qt6${c}_FOUND)
      list(APPEND missing Qt6${c})
      list(APPEND packages ${NEURAL_QT_DEBIAN_PACKAGE_${c}})
    endif()
  endforeach()
  if(missing)
    set(without "To build without the desktop app and the server: -DNEURAL_GUI=OFF")
    if(missing STREQUAL "Qt6Pdf")
      set(without "To build the desktop app without PDF attachments: -DNEURAL_PDF=OFF")
    endif()
    list(REMOVE_DUPLICATES packages)
    string(REPLACE ";" " " packages "${packages}")
    string(REPLACE ";" ", " missing "${missing}")
    message(FATAL_ERROR
      "${what} needs ${missing}, which CMake did not find.\n"
      "  Debian 12: sudo apt-get install ${packages}   (scripts/setup.sh installs them)\n"
      "  Elsewhere: point CMAKE_PREFIX_PATH at a Qt 6.4+ with these modules.\n"
      "  ${without}")
  endif()
endfunction()
