# Install rules and the package config: find_package(frugal CONFIG REQUIRED COMPONENTS eigen cuda faiss redis).
include(CMakePackageConfigHelpers)
set(FRUGAL_CMAKE_DIR "${CMAKE_INSTALL_DATADIR}/cmake/frugal")

install(TARGETS frugal frugal_sim EXPORT frugalTargets FILE_SET HEADERS)
install(EXPORT frugalTargets NAMESPACE frugal:: DESTINATION "${FRUGAL_CMAKE_DIR}")
# One export file per component, so a consumer that does not ask for Eigen, CUDA, FAISS or hiredis
# never needs them installed.
foreach(component eigen cuda faiss redis)
  if(TARGET frugal_${component})
    install(TARGETS frugal_${component} EXPORT frugal-${component}Targets FILE_SET HEADERS)
    install(EXPORT frugal-${component}Targets NAMESPACE frugal:: DESTINATION "${FRUGAL_CMAKE_DIR}")
  endif()
endforeach()

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/frugalConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/frugalConfig.cmake"
  INSTALL_DESTINATION "${FRUGAL_CMAKE_DIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/frugalConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/frugalConfig.cmake" "${PROJECT_BINARY_DIR}/frugalConfigVersion.cmake"
        DESTINATION "${FRUGAL_CMAKE_DIR}")
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/frugal")

# pkg-config: share/pkgconfig (frugal is header-only, so arch-independent), prefix relative to it.
set(FRUGAL_PC_DIR "${CMAKE_INSTALL_DATADIR}/pkgconfig")
string(REGEX REPLACE "[^/]+" ".." FRUGAL_PC_TO_PREFIX "${FRUGAL_PC_DIR}")
configure_file("${PROJECT_SOURCE_DIR}/cmake/frugal.pc.in" "${PROJECT_BINARY_DIR}/frugal.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/frugal.pc" DESTINATION "${FRUGAL_PC_DIR}")

# The one-file user backend the docs point to, buildable against the installed headers:
#   c++ $(pkg-config --cflags frugal) share/frugal/examples/minimal_backend/main.cpp
install(FILES "${PROJECT_SOURCE_DIR}/examples/minimal_backend/main.cpp"
              "${PROJECT_SOURCE_DIR}/examples/minimal_backend/minimal_backend.hpp"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/frugal/examples/minimal_backend")
