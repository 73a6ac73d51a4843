# Runs one compile-fail test (see cmake/tests.cmake):
#   cmake -DCOMPILER=<c++ compiler> -DFLAGS=<flags;...> -DSOURCE=<file> -P this
# Passes only when compiling SOURCE fails AND the compiler output matches the regex on SOURCE's first
# line, `// expect-error: <regex>`. A file that compiles is a failure, whatever its output.
file(STRINGS "${SOURCE}" first_line LIMIT_COUNT 1)
if(NOT first_line MATCHES "^// expect-error: (.+)$")
  message(FATAL_ERROR "${SOURCE}: the first line must be `// expect-error: <regex>`")
endif()
set(expected "${CMAKE_MATCH_1}")

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
message(STATUS "${SOURCE} failed to compile as expected (matched `${expected}`)")
