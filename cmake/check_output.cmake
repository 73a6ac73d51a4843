# Runs a program and checks its output (see cmake/examples.cmake):
#   cmake -DPROGRAM=<executable> [-DEXPECTED=<file>] [-DARGS_FILE=<file>] [-DWORKING_DIRECTORY=<dir>]
#         [-DLAUNCHER=<command line>] -P this
# ARGS_FILE, when it exists, holds the program's arguments, separated by spaces (one line).
# Passes when PROGRAM exits with 0 and, if EXPECTED names an existing file, every regex in it
# matches the program's output (stdout and stderr together), in order: each regex is searched
# from the end of the previous one's match. EXPECTED holds one CMake regex per line; blank lines
# and lines starting with `#` are ignored. The file is read as plain text, not as a CMake list,
# so regexes may hold `;`, `[` and `]` freely.
if(NOT PROGRAM)
  message(FATAL_ERROR "check_output.cmake: PROGRAM is not set")
endif()
if(NOT WORKING_DIRECTORY)
  set(WORKING_DIRECTORY ".")
endif()

set(arguments "")
if(ARGS_FILE AND EXISTS "${ARGS_FILE}")
  file(READ "${ARGS_FILE}" arguments)
  string(STRIP "${arguments}" arguments)
  separate_arguments(arguments UNIX_COMMAND "${arguments}")
endif()
# LAUNCHER: a command line the program runs under (mpiexec -n 2 for the distributed example).
set(launcher "")
if(LAUNCHER)
  separate_arguments(launcher UNIX_COMMAND "${LAUNCHER}")
endif()
execute_process(
  COMMAND ${launcher} "${PROGRAM}" ${arguments}
  WORKING_DIRECTORY "${WORKING_DIRECTORY}"
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output ERROR_VARIABLE output
  ECHO_OUTPUT_VARIABLE ECHO_ERROR_VARIABLE)
if(NOT result STREQUAL "0")
  message(FATAL_ERROR "${PROGRAM} failed (${result})")
endif()
if(NOT EXPECTED OR NOT EXISTS "${EXPECTED}")
  return()
endif()

file(READ "${EXPECTED}" text)
string(REPLACE "\r" "" text "${text}")
string(APPEND text "\n")
set(from 0)      # where the next regex starts searching in `output`
set(line_no 0)
set(failures "")
while(NOT text STREQUAL "")
  string(FIND "${text}" "\n" eol)
  string(SUBSTRING "${text}" 0 ${eol} regex)
  math(EXPR next "${eol} + 1")
  string(SUBSTRING "${text}" ${next} -1 text)
  math(EXPR line_no "${line_no} + 1")
  if(regex STREQUAL "" OR regex MATCHES "^#")
    continue()
  endif()
  string(SUBSTRING "${output}" ${from} -1 rest)
  if(rest MATCHES "${regex}")
    # Advance past this match; the regex matched leftmost, so the first occurrence of the matched
    # text is where it matched.
    set(matched "${CMAKE_MATCH_0}")
    string(FIND "${rest}" "${matched}" at)
    string(LENGTH "${matched}" length)
    math(EXPR from "${from} + ${at} + ${length}")
  else()
    string(APPEND failures "\n  ${EXPECTED}:${line_no}: `${regex}`")
  endif()
endwhile()
if(NOT failures STREQUAL "")
  message(FATAL_ERROR "${PROGRAM}: the output does not match these expected lines (each is searched "
                      "after the previous one's match):${failures}")
endif()
