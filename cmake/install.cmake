# Install rules, one set for both builds: the full one (CMakeLists.txt: libcrema and the crema
# CLI, find_package(crema) -> crema::crema) and the inference-only one (cmake/inference.cmake:
# libcrema_infer and crema-infer, find_package(crema_infer) -> crema::crema_infer).
#   lib/lib<library>.so.MAJOR.MINOR (+ links), bin/<cli> (RPATH $ORIGIN/../lib)
#   include/crema/*.hpp and the generated include/crema/crema.pb.h (proto.hpp includes it)
#   share/crema/proto/crema.proto
#   lib/cmake/<package>/: <package>Config.cmake, ...ConfigVersion.cmake, <package>_targets.cmake
#   lib/pkgconfig/<package>.pc (relocatable: paths from its own folder)
# Components, for cpack's packages (cmake/package.cmake): runtime (library and CLI), dev (headers,
# schema, CMake and pkg-config files); the Python package is "python" (python/CMakeLists.txt).
# Libraries outside the system folders (CUDA, cuDNN, NCCL under /usr/local/cuda) stay on the
# installed RPATH. cpack (cmake/package.cmake) packs the same files.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)

# crema_install_package(PACKAGE name LIBRARY target CLI target [EXCLUDE_HEADERS file...])
function(crema_install_package)
  cmake_parse_arguments(arg "" "PACKAGE;LIBRARY;CLI" "EXCLUDE_HEADERS" ${ARGN})
  set(package ${arg_PACKAGE})
  set(cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/${package})
  set_target_properties(${arg_LIBRARY} PROPERTIES VERSION ${PROJECT_VERSION}
                        SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  set_target_properties(${arg_CLI} PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS ${arg_LIBRARY} ${arg_CLI} EXPORT ${package}_targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

  set(excluded)
  foreach(header ${arg_EXCLUDE_HEADERS})
    list(APPEND excluded PATTERN ${header} EXCLUDE)
  endforeach()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/crema DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT dev FILES_MATCHING PATTERN "*.hpp" ${excluded})
  install(FILES ${PROJECT_BINARY_DIR}/proto/crema.pb.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/crema COMPONENT dev)
  install(FILES ${PROJECT_SOURCE_DIR}/proto/crema.proto
          DESTINATION ${CMAKE_INSTALL_DATADIR}/crema/proto COMPONENT dev)

  install(EXPORT ${package}_targets NAMESPACE crema:: DESTINATION ${cmake_dir} COMPONENT dev)
  set(CREMA_PACKAGE ${package})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/cremaConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/${package}Config.cmake
                                INSTALL_DESTINATION ${cmake_dir})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/${package}ConfigVersion.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/${package}Config.cmake
          ${PROJECT_BINARY_DIR}/${package}ConfigVersion.cmake DESTINATION ${cmake_dir}
          COMPONENT dev)

  # pkg-config: prefix found from the .pc file's own folder, so `cmake --install --prefix P`
  # works wherever P is.
  file(RELATIVE_PATH CREMA_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
  set(CREMA_PC_LIBRARY ${arg_LIBRARY})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/crema.pc.in ${PROJECT_BINARY_DIR}/${package}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${package}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endfunction()
