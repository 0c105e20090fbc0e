# Run at every build (cmake -P, from the crema_git_commit target in cmake/version.cmake): writes
# OUTPUT, a header defining CREMA_GIT_COMMIT as the source tree's commit (12 hex digits, "-dirty"
# when tracked files differ from it; "unknown" outside a git checkout, or GIT_COMMIT when given).
# The file is rewritten only when that changes, so only version.cpp recompiles after a commit.
if(GIT_COMMIT)
  set(commit "${GIT_COMMIT}")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE commit RESULT_VARIABLE failed ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(failed OR NOT commit)
    set(commit "unknown")
  else()
    execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(changes)
      string(APPEND commit "-dirty")
    endif()
  endif()
endif()
file(CONFIGURE OUTPUT "${OUTPUT}" CONTENT "#define CREMA_GIT_COMMIT \"${commit}\"\n")
