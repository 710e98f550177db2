# Finds xxHash (Debian libxxhash-dev; vcpkg "xxhash") and provides the imported target
# XXHash::xxhash. The expert store uses its XXH3-64 for checksums.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_XXHASH QUIET libxxhash)
endif()
find_path(XXHASH_INCLUDE_DIR NAMES xxhash.h HINTS ${PC_XXHASH_INCLUDE_DIRS})
find_library(XXHASH_LIBRARY NAMES xxhash libxxhash HINTS ${PC_XXHASH_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(XXHash REQUIRED_VARS XXHASH_LIBRARY XXHASH_INCLUDE_DIR)
if(XXHash_FOUND AND NOT TARGET XXHash::xxhash)
  add_library(XXHash::xxhash UNKNOWN IMPORTED)
  set_target_properties(XXHash::xxhash PROPERTIES
    IMPORTED_LOCATION "${XXHASH_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${XXHASH_INCLUDE_DIR}")
endif()
