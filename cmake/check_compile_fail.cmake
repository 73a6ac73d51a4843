# Runs one compile-fail test (see cmake/tests.cmake):
#   cmake -DCOMPILER=<c++ compiler> -DFLAGS=<flags;...> -DSOURCE=<file> -P this
# Passes only when compiling SOURCE fails AND the compiler output matches the regex on SOURCE's first
# line, `// expect-error: <regex>`. A file that compiles is a failure, whatever its output.
file(STRINGS "${SOURCE}" first_line LIMIT_COUNT 1)
if(NOT first_line MATCHES "^// expect-error: (.+)$")
  message(FATAL_ERROR "${SOURCE}: the first line must be `// expect-error: <regex>`")
endif()
set(expected "${CMAKE_MATCH_1}")
# Optionally, among the first five lines, `// not-expected: <regex>`: what the output must not hold
# (a second error that a first one cascades into, or a list of candidate overloads), so that the
# test checks that the expected message is the only one.
file(STRINGS "${SOURCE}" head_lines LIMIT_COUNT 5)
set(not_expected "")
foreach(line IN LISTS head_lines)
  if(line MATCHES "^// not-expected: (.+)$")
    set(not_expected "${CMAKE_MATCH_1}")
  endif()
endforeach()

execute_process(
  COMMAND "${COMPILER}" ${FLAGS} "${SOURCE}"
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)

if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not.\n${output}")
endif()
if(NOT output MATCHES "${expected}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but its output does not match "
                      "`${expected}`:\n${output}")
endif()
if(NOT not_expected STREQUAL "" AND output MATCHES "${not_expected}")
  message(FATAL_ERROR "${SOURCE} failed to compile with the expected message, but its output also matches "
                      "`${not_expected}`, which it must not:\n${output}")
endif()
message(STATUS "${SOURCE} failed to compile as expected (matched `${expected}`)")
