# tests/install/check_consumers.cmake — run by ctest (tests/install/CMakeLists.txt) as
#   cmake -DMODE=installed|subproject -DSOURCE_DIR=... -DBUILD_DIR=... -DWORK_DIR=... -P this
# MODE=installed: `cmake --install --component dev` of the build into WORK_DIR/prefix, checks
#   what was installed (and that no internal header was), then configures, builds and runs
#   tests/install/consumer against that prefix with find_package(ratelimit), and compiles and
#   runs consumer/pkg_config_main.cc with the flags `pkg-config ratelimit-redis` gives.
# MODE=subproject: configures, builds and runs tests/install/subproject (add_subdirectory of the
#   source tree) with the server's, tools' and tests' packages made unfindable.
# Every step has a time bound; the compiler launcher (ccache) of the main build is reused.
# WORK_DIR is emptied first and left behind for inspection (it is inside the build tree).
cmake_minimum_required(VERSION 3.25)
foreach(v MODE SOURCE_DIR BUILD_DIR WORK_DIR CXX_COMPILER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_consumers.cmake: -D${v}=... is required")
  endif()
endforeach()
set(step_timeout 400)

# step(<description> <command>...): runs the command, fails the test with its output if it fails.
function(step what)
  message(STATUS "${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT ${step_timeout})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: failed (${rc})\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common_args -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=RelWithDebInfo)
if(DEFINED LAUNCHER AND NOT LAUNCHER STREQUAL "")
  list(APPEND common_args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()

if(MODE STREQUAL "installed")
  set(prefix ${WORK_DIR}/prefix)
  step("install the dev component into ${prefix}"
       ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component dev)
  foreach(f include/ratelimit/limiter.h include/ratelimit/version.h
            include/ratelimit/test_vectors/vectors.h
            lib/libratelimit_core.a lib/libratelimit_memory.a lib/libratelimit_http.a
            lib/libratelimit_redis.a lib/libratelimit_test_vectors.a lib/libratelimit_denial_cache.a
            lib/cmake/ratelimit/ratelimitConfig.cmake lib/cmake/ratelimit/ratelimitTargets.cmake
            lib/pkgconfig/ratelimit.pc lib/pkgconfig/ratelimit-redis.pc
            share/ratelimit/test_vectors/token_bucket.json)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "not installed: ${f}")
    endif()
  endforeach()
  # Exactly the public headers are installed: include/ratelimit/*.h of the source tree, the
  # generated version.h and the test-vector runner's header; no internal header of src/.
  file(GLOB_RECURSE installed RELATIVE ${prefix}/include ${prefix}/include/*)
  file(GLOB_RECURSE public RELATIVE ${SOURCE_DIR}/include ${SOURCE_DIR}/include/ratelimit/*.h)
  list(APPEND public ratelimit/version.h ratelimit/test_vectors/vectors.h
       ratelimit/test_vectors/distributed_vectors.h)
  list(SORT installed)
  list(SORT public)
  if(NOT installed STREQUAL public)
    message(FATAL_ERROR "installed headers differ from the public ones:\n  installed: ${installed}\n  public: ${public}")
  endif()

  step("configure tests/install/consumer against the installed package"
       ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/consumer-build
       ${common_args} -DCMAKE_PREFIX_PATH=${prefix})
  step("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build -j2)
  step("run the consumer" ${WORK_DIR}/consumer-build/consumer)
  message(STATUS "${step_output}")

  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  step("pkg-config --cflags --libs ratelimit-redis"
       pkg-config --cflags --libs ratelimit-redis)
  string(STRIP "${step_output}" pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  if(NOT "-I${prefix}/include" IN_LIST pc_flags AND NOT pc_flags MATCHES "prefix/lib/pkgconfig/\\.\\./\\.\\./include")
    message(FATAL_ERROR "pkg-config gave no include path into the prefix: ${pc_flags}")
  endif()
  if(NOT "-std=c++20" IN_LIST pc_flags)
    message(FATAL_ERROR "pkg-config --cflags ratelimit-redis lacks -std=c++20: ${pc_flags}")
  endif()
  # Nothing but pkg-config's flags (the language standard included), and the linker as strict
  # as Debian's default about libraries named only indirectly (--no-copy-dt-needed-entries).
  step("compile consumer/pkg_config_main.cc with the pkg-config flags alone"
       ${CXX_COMPILER} -O1 -Wl,--as-needed -Wl,--no-copy-dt-needed-entries -o ${WORK_DIR}/pkg_config_consumer
       ${SOURCE_DIR}/tests/install/consumer/pkg_config_main.cc ${pc_flags})
  step("run the pkg-config consumer" ${WORK_DIR}/pkg_config_consumer)
  message(STATUS "${step_output}")
elseif(MODE STREQUAL "subproject")
  set(unfindable)
  foreach(pkg yaml-cpp CLI11 nlohmann_json GTest benchmark gRPC Protobuf RatelimitHiredis Boost)
    list(APPEND unfindable -DCMAKE_DISABLE_FIND_PACKAGE_${pkg}=ON)
  endforeach()
  step("configure tests/install/subproject (add_subdirectory) with no server, tool or test package"
       ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/subproject -B ${WORK_DIR}/build
       ${common_args} -DRATELIMIT_SOURCE_DIR=${SOURCE_DIR} -DRATELIMIT_WERROR=ON ${unfindable})
  step("build the subproject" ${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2 --target subproject)
  step("run the subproject" ${WORK_DIR}/build/subproject)
  message(STATUS "${step_output}")
else()
  message(FATAL_ERROR "MODE must be installed or subproject, not '${MODE}'")
endif()
