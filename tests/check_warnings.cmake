# Compiles SOURCE with COMPILER at -O2 with frugal's warning flags as errors and FLAGS
# (a |-list, e.g. -march=native); INCLUDES is frugal's include folder, SYSTEM_INCLUDES
# (a |-list) those of Eigen, xsimd and Boost, passed as -isystem as CMake passes imported
# targets' folders. Fails printing the compiler's messages.
string(REPLACE "|" ";" flags "${FLAGS}")
string(REPLACE "|" ";" system_includes "${SYSTEM_INCLUDES}")
set(include_flags "-I${INCLUDES}")
foreach(dir IN LISTS system_includes)
  list(APPEND include_flags "-isystem" "${dir}")
endforeach()
execute_process(
  COMMAND "${COMPILER}" -std=c++20 -O2 ${flags} -Wall -Wextra -Wpedantic -Werror ${include_flags} -c "${SOURCE}" -o "${OUTPUT}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${COMPILER} ${FLAGS} reports on ${SOURCE}:\n${out}${err}")
endif()
message("${COMPILER} ${FLAGS}: no warnings")
