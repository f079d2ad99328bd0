# FindRatelimitHiredis.cmake — finds hiredis and defines the imported target ratelimit::hiredis.
# Used by the build (src/redis) and installed beside ratelimitConfig.cmake so that consumers of
# ratelimit::redis get the same target. Why by hand: Debian 12's HiredisConfigVersion.cmake
# (hiredis 0.14.1) is broken, and the pkg-config file is not available on every system.
include(FindPackageHandleStandardArgs)
find_path(RATELIMIT_HIREDIS_INCLUDE_DIR hiredis/hiredis.h)
find_library(RATELIMIT_HIREDIS_LIBRARY hiredis)
find_package_handle_standard_args(RatelimitHiredis
  REQUIRED_VARS RATELIMIT_HIREDIS_LIBRARY RATELIMIT_HIREDIS_INCLUDE_DIR)
if(RatelimitHiredis_FOUND AND NOT TARGET ratelimit::hiredis)
  add_library(ratelimit::hiredis UNKNOWN IMPORTED GLOBAL)
  set_target_properties(ratelimit::hiredis PROPERTIES
    IMPORTED_LOCATION ${RATELIMIT_HIREDIS_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${RATELIMIT_HIREDIS_INCLUDE_DIR})
endif()
mark_as_advanced(RATELIMIT_HIREDIS_INCLUDE_DIR RATELIMIT_HIREDIS_LIBRARY)
