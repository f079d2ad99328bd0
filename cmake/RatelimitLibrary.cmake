# RatelimitLibrary.cmake — ratelimit_add_library(): one call declares a library of this project
# with its namespaced ALIAS (ratelimit::<name>, the same name in-tree and for find_package
# consumers), and, unless INTERNAL, its installation and export into the CMake package
# (ratelimitTargets.cmake) together with the find_dependency() lines its consumers need.
#
#   ratelimit_add_library(<name> SOURCES <file>... [INTERNAL] [DEPENDENCIES "<pkg args>"...])
#
# creates the static library target ratelimit_<name> (file libratelimit_<name>.a) and the
# alias ratelimit::<name>. DEPENDENCIES are find_package() argument strings ("Boost 1.81",
# "RatelimitHiredis") that the installed ratelimitConfig.cmake passes to find_dependency()
# before it loads the targets. Link, include and compile settings are added by the caller with
# the usual target_* commands on ratelimit_<name>; headers that belong to the public API live in
# include/ratelimit/ (installed once for all libraries), everything else stays PRIVATE.
# Invariant: an exported library links only exported libraries or imported targets that one
# of the DEPENDENCIES (of it or another exported library) recreates.
include_guard(GLOBAL)
include(GNUInstallDirs)

set(RATELIMIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)

function(ratelimit_add_library name)
  cmake_parse_arguments(L "INTERNAL" "" "SOURCES;DEPENDENCIES" ${ARGN})
  set(target ratelimit_${name})
  add_library(${target} STATIC ${L_SOURCES})
  add_library(ratelimit::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:ratelimit_warnings>)
  if(L_INTERNAL)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY RATELIMIT_EXPORTED_LIBRARIES ${name})
  set_property(GLOBAL PROPERTY RATELIMIT_DEPENDENCIES_${name} ${L_DEPENDENCIES})
  install(TARGETS ${target} EXPORT ratelimitTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()
