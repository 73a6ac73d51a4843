# Runs one compile-fail test (see cmake/tests.cmake):
#   cmake -DBUILD_DIR=<build tree> -DTARGET=<object library> -DSOURCE=<file> [-DCONFIG=<config>] -P this
# Passes only when building TARGET fails AND the compiler output matches the regex on SOURCE's first
# line, `// expect-error: <regex>`. A file that compiles is a failure, whatever its output.
file(STRINGS "${SOURCE}" first_line LIMIT_COUNT 1)
if(NOT first_line MATCHES "^// expect-error: (.+)$")
  message(FATAL_ERROR "${SOURCE}: the first line must be `// expect-error: <regex>`")
endif()
set(expected "${CMAKE_MATCH_1}")

set(config_args "")
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}" ${config_args}
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)

if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not.\n${output}")
endif()
if(NOT output MATCHES "${expected}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but its output does not match "
                      "`${expected}`:\n${output}")
endif()
message(STATUS "${SOURCE} failed to compile as expected (matched `${expected}`)")
