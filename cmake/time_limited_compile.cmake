# A compiler launcher with a time limit (cmake/tests.cmake): runs the compile command after `--` and
# fails, by name, if it runs longer than LIMIT seconds, killing the compiler:
#   cmake -DLIMIT=<seconds> -P time_limited_compile.cmake -- [launcher...] <compiler> <arguments>...
# The composition matrix's test programs build under it, so that a template instantiation that never
# ends (as reduce_sum(gather(x, i) * 2) once did, issue 10) fails the build instead of hanging it.
set(command "")
set(after_separator OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator ON)
  endif()
endforeach()
if(NOT command OR NOT LIMIT)
  message(FATAL_ERROR "usage: cmake -DLIMIT=<seconds> -P time_limited_compile.cmake -- <compiler> <arguments>...")
endif()

execute_process(COMMAND ${command} RESULT_VARIABLE result TIMEOUT ${LIMIT})
if(NOT result EQUAL 0)
  if(NOT result MATCHES "^[0-9]+$")  # not an exit code: the compile was stopped (TIMEOUT)
    list(FIND command "-c" at)  # the source file follows -c; otherwise name the whole command
    set(source "${command}")
    if(at GREATER_EQUAL 0)
      math(EXPR at "${at} + 1")
      list(LENGTH command count)
      if(at LESS count)
        list(GET command ${at} source)
      endif()
    endif()
    message(FATAL_ERROR "compile-time limit: compiling ${source} took more than ${LIMIT} s and was "
                        "stopped (${result}). A template instantiation that never ends?")
  endif()
  # The compiler's own diagnostics are already on the terminal; keep its exit code's meaning.
  message(FATAL_ERROR "the compile failed (exit code ${result})")
endif()
