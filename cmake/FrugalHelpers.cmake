# Helper functions shared by frugal's tests, benchmarks and examples.

# frugal_detect_cuda(<out-var>): TRUE when the CUDA adapter should be built.
# FRUGAL_WITH_CUDA=AUTO builds it when nvcc is found (also in /usr/local/cuda/bin,
# where the toolkit installs without touching PATH); ON makes a missing nvcc an error.
function(frugal_detect_cuda out)
  set(${out} OFF PARENT_SCOPE)
  if(FRUGAL_WITH_CUDA STREQUAL "OFF")
    return()
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(${out} ON PARENT_SCOPE)
  elseif(FRUGAL_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "frugal: FRUGAL_WITH_CUDA=ON but no CUDA compiler (nvcc) was found")
  else()
    message(STATUS "frugal: nvcc not found; the CUDA adapter is not built")
  endif()
endfunction()

# frugal_backend_component(<name> HEADERS <glob> LIBRARIES <targets...>): the INTERFACE
# target frugal_<name>, frugal::<name> here and once installed, over frugal and LIBRARIES;
# its header set is include/frugal/backend/<name>/<glob>.
function(frugal_backend_component name)
  cmake_parse_arguments(ARG "" "HEADERS" "LIBRARIES" ${ARGN})
  add_library(frugal_${name} INTERFACE)
  add_library(frugal::${name} ALIAS frugal_${name})
  set_target_properties(frugal_${name} PROPERTIES EXPORT_NAME ${name})
  target_link_libraries(frugal_${name} INTERFACE frugal ${ARG_LIBRARIES})
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS
       RELATIVE "${PROJECT_SOURCE_DIR}" "${PROJECT_SOURCE_DIR}/include/frugal/backend/${name}/${ARG_HEADERS}")
  target_sources(frugal_${name} INTERFACE FILE_SET HEADERS BASE_DIRS include FILES ${headers})
endfunction()

# Warning flags for frugal's own targets (never imposed on consumers).
function(frugal_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
      $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${FRUGAL_WARNINGS_AS_ERRORS}>>:-Werror>)
  endif()
endfunction()

# frugal_add_test(<name> SOURCES <files...> [LIBRARIES <targets...>] [LABELS <labels...>])
# One GoogleTest executable; its tests are registered with ctest one by one.
function(frugal_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE frugal::frugal frugal::sim frugal_test_support GTest::gtest_main ${ARG_LIBRARIES})
  frugal_target_warnings(${name})
  # gtest_discover_tests writes properties unquoted into a generated script, so a label
  # list would split into property names: join the labels into one ("unit.cache.threads");
  # `ctest -L` takes a regex, so `-L threads` or `-L cache` still select the suite.
  string(JOIN "." label unit ${ARG_LABELS})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${label}")
endfunction()
