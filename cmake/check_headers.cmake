# Compiles each of a list of headers alone, as a program's first include (see cmake/tests.cmake,
# "Self-contained headers"):
#   cmake -DCOMPILER=<c++ compiler> -DFLAGS=<flags;...> -DHEADERS=<fluxion/a.hpp;...> -DWORK_DIR=<dir> -P this
# Each header gets a file of one line, `#include <fluxion/...>`, run through the compiler's front end.
# Fails naming every header that does not compile, with the first lines of its errors.
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failed "")
foreach(header IN LISTS HEADERS)
  string(REGEX REPLACE "[/.]" "_" stem "${header}")
  set(source "${WORK_DIR}/${stem}.cpp")
  file(WRITE "${source}" "#include <${header}>\n")
  execute_process(COMMAND "${COMPILER}" ${FLAGS} "${source}"
                  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    string(REGEX MATCHALL "[^\n]*error:[^\n]*" errors "${output}")
    list(SUBLIST errors 0 3 errors)
    list(JOIN errors "\n    " errors)
    string(APPEND failed "\n  <${header}>:\n    ${errors}")
  endif()
endforeach()
list(LENGTH HEADERS count)
if(failed)
  message(FATAL_ERROR "headers that do not compile when included first and alone:${failed}")
endif()
message(STATUS "${count} headers compile alone")
