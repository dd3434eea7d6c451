# Compiles each header in HEADERS (a ;-list, relative to ROOT) alone with COMPILER, with
# frugal's warning flags as errors; fails naming every header that does not compile.
set(failed "")
string(REPLACE "|" ";" includes "${INCLUDES}")
set(include_flags "")
foreach(dir IN LISTS includes)
  list(APPEND include_flags "-I${dir}")
endforeach()
string(MAKE_C_IDENTIFIER "${HEADERS}" unit)
string(SUBSTRING "${unit}" 0 60 unit)
set(source "${WORK}/${unit}.cpp")
foreach(h IN LISTS HEADERS)
  # Included twice, as the g++ header check does: the include guard must hold.
  file(WRITE "${source}" "#include <${h}>\n#include <${h}>\n")
  execute_process(
    COMMAND "${COMPILER}" -std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Werror ${include_flags} "${source}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(APPEND failed "${h}")
    message("${h}:\n${err}")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "headers that ${COMPILER} cannot compile: ${failed}")
endif()
