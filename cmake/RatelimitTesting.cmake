# RatelimitTesting.cmake — ratelimit_add_test(), usable from any folder (tests/, examples/).
find_package(GTest REQUIRED)
include(GoogleTest)

set(RATELIMIT_VECTORS_DIR ${PROJECT_SOURCE_DIR}/tests/vectors)

# ratelimit_add_test(name SOURCES... LIBS...) — one GoogleTest binary registered with ctest.
function(ratelimit_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main ratelimit_warnings)
  target_compile_definitions(${name} PRIVATE
    RATELIMIT_VECTORS_DIR="${RATELIMIT_VECTORS_DIR}"
    RATELIMIT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    RATELIMIT_BIN_DIR="${CMAKE_RUNTIME_OUTPUT_DIRECTORY}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS}")
endfunction()

