# RatelimitVersion.cmake — the one version of every binary and of the installed library:
# generates <build>/generated/include/ratelimit/version.h from the project version and, when
# the source is a git checkout, `git describe --tags --always --dirty` at configure time.
# The header is rewritten only when its text changes, so an unchanged version costs no rebuild;
# CMake re-runs (and re-describes) when HEAD or the current branch moves.
include_guard(GLOBAL)

set(RATELIMIT_GIT_DESCRIBE "")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --tags --always --dirty
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE describe OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE describe_rc ERROR_QUIET TIMEOUT 10)
  if(describe_rc EQUAL 0)
    set(RATELIMIT_GIT_DESCRIBE ${describe})
    # Re-configure when a commit lands or the branch changes (worktrees have their own HEAD).
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --absolute-git-dir --symbolic-full-name HEAD
                    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                    OUTPUT_VARIABLE git_paths OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET TIMEOUT 10)
    string(REPLACE "\n" ";" git_paths "${git_paths}")
    list(LENGTH git_paths n)
    if(n EQUAL 2)
      list(GET git_paths 0 git_dir)
      list(GET git_paths 1 git_ref)
      execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --path-format=absolute --git-path ${git_ref}
                      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                      OUTPUT_VARIABLE ref_file OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET TIMEOUT 10)
      foreach(f ${git_dir}/HEAD ${ref_file})
        if(EXISTS ${f})
          set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${f})
        endif()
      endforeach()
    endif()
  endif()
endif()

set(RATELIMIT_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/generated/include)
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.h.in
               ${RATELIMIT_GENERATED_INCLUDE_DIR}/ratelimit/version.h @ONLY)
