# RatelimitInstall.cmake — what `cmake --install` puts where (and what CPack packages):
#   include/ratelimit/*.h (+ the generated version.h)           component dev
#   lib/libratelimit_<name>.a for every exported library         component dev
#   lib/cmake/ratelimit/ (ratelimitConfig.cmake, targets, version, FindRatelimitHiredis.cmake)
#   lib/pkgconfig/ratelimit.pc (core, memory, http), ratelimit-redis.pc
#   bin/ratelimitd (component server), bin/ratelimit-sim, bin/ratelimit-bench (component tools)
# Included last by the top-level CMakeLists.txt, when every library has been declared
# (ratelimit_add_library records them in the global properties read here).
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ratelimit
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(FILES ${RATELIMIT_GENERATED_INCLUDE_DIR}/ratelimit/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ratelimit COMPONENT dev)
install(TARGETS ratelimit_warnings EXPORT ratelimitTargets)

get_property(ratelimit_libraries GLOBAL PROPERTY RATELIMIT_EXPORTED_LIBRARIES)
# Per library, the find_package() arguments its consumers need, as CMake code for the config.
set(RATELIMIT_CONFIG_LIBRARIES "")
foreach(lib ${ratelimit_libraries})
  get_property(deps GLOBAL PROPERTY RATELIMIT_DEPENDENCIES_${lib})
  set(quoted "")
  foreach(dep ${deps})
    string(APPEND quoted " [==[${dep}]==]")
  endforeach()
  string(APPEND RATELIMIT_CONFIG_LIBRARIES "set(_ratelimit_deps_${lib}${quoted})\n")
endforeach()
get_property(RATELIMIT_TEST_VECTORS_INSTALL_DIR GLOBAL PROPERTY RATELIMIT_TEST_VECTORS_INSTALL_DIR)
if(NOT RATELIMIT_TEST_VECTORS_INSTALL_DIR)  # not built: the config does not read it
  set(RATELIMIT_TEST_VECTORS_INSTALL_DIR ${CMAKE_INSTALL_DATADIR}/ratelimit/test_vectors)
endif()

install(EXPORT ratelimitTargets NAMESPACE ratelimit:: DESTINATION ${RATELIMIT_INSTALL_CMAKEDIR}
        COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ratelimitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ratelimitConfig.cmake INSTALL_DESTINATION ${RATELIMIT_INSTALL_CMAKEDIR}
  PATH_VARS RATELIMIT_TEST_VECTORS_INSTALL_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ratelimitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ratelimitConfig.cmake
              ${PROJECT_BINARY_DIR}/ratelimitConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FindRatelimitHiredis.cmake
        DESTINATION ${RATELIMIT_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config files, relocatable: the prefix is found from the .pc file's own directory.
set(pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH RATELIMIT_PC_PREFIX_FROM_PCDIR /${pc_dir} /)
string(REGEX REPLACE "/$" "" RATELIMIT_PC_PREFIX_FROM_PCDIR "${RATELIMIT_PC_PREFIX_FROM_PCDIR}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/ratelimit.pc.in ${PROJECT_BINARY_DIR}/ratelimit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ratelimit.pc DESTINATION ${pc_dir} COMPONENT dev)
if(TARGET ratelimit_redis)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/ratelimit-redis.pc.in
                 ${PROJECT_BINARY_DIR}/ratelimit-redis.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/ratelimit-redis.pc DESTINATION ${pc_dir} COMPONENT dev)
endif()

# The binaries (each only when built).
foreach(bin ratelimitd)
  if(TARGET ${bin})
    install(TARGETS ${bin} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
  endif()
endforeach()
foreach(bin ratelimit-sim ratelimit-bench)
  if(TARGET ${bin})
    install(TARGETS ${bin} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
  endif()
endforeach()
