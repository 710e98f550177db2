# The MSI's product identity, shared by the CPack WIX build (installer/CMakeLists.txt includes
# this file) and the Linux wixl proof (scripts/check-msi.sh runs it in script mode), so both
# build installer/neural.wxs with the same names and codes.
set(NEURAL_WIX_NAME "Neural")
set(NEURAL_WIX_VENDOR "Neural")
# Fixed for the life of the product: it ties every version together, so a newer MSI replaces
# an installed older one (MajorUpgrade in neural.wxs).
set(NEURAL_WIX_UPGRADE_GUID "8E4C1B52-6B1F-4C2A-9D57-3F0A2E71C4B9")

# The ProductCode of a version: a name-based UUID (v5, SHA-1) of the version string under the
# upgrade code. Fixed per version (the same MSI contents get the same code on every build
# machine) and new for every version, which a major upgrade needs.
function(neural_wix_product_guid version out_var)
  string(UUID guid NAMESPACE ${NEURAL_WIX_UPGRADE_GUID} NAME "${version}" TYPE SHA1 UPPER)
  set(${out_var} ${guid} PARENT_SCOPE)
endfunction()

# Script mode, for wixl (which has no CPack to write them): the include files that CPack's WIX
# generator writes beside neural.wxs, with the same variable names, plus NEURAL_WIXL.
#   cmake -DVERSION=0.1.0 -DICON=neural.ico -DOUT_DIR=dir -P installer/product.cmake
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  foreach(v VERSION ICON OUT_DIR)
    if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
      message(FATAL_ERROR "product.cmake: -D${v}=... is required")
    endif()
  endforeach()
  if(NOT VERSION MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
    message(FATAL_ERROR "product.cmake: VERSION '${VERSION}' is not MAJOR.MINOR.PATCH")
  endif()
  neural_wix_product_guid("${VERSION}" product_guid)
  file(MAKE_DIRECTORY "${OUT_DIR}")
  file(WRITE "${OUT_DIR}/cpack_variables.wxi" "<?xml version=\"1.0\" encoding=\"UTF-8\"?>
<!-- Written by installer/product.cmake for wixl; CPack writes its own on Windows. -->
<Include>
  <?define NEURAL_WIXL=\"1\"?>
  <?define CPACK_WIX_PRODUCT_GUID=\"${product_guid}\"?>
  <?define CPACK_WIX_UPGRADE_GUID=\"${NEURAL_WIX_UPGRADE_GUID}\"?>
  <?define CPACK_PACKAGE_NAME=\"${NEURAL_WIX_NAME}\"?>
  <?define CPACK_PACKAGE_VENDOR=\"${NEURAL_WIX_VENDOR}\"?>
  <?define CPACK_PACKAGE_VERSION=\"${VERSION}\"?>
  <?define CPACK_WIX_PRODUCT_ICON=\"${ICON}\"?>
</Include>
")
  message("${product_guid}")
endif()
