# What `crema --version` (crema::BuildInfo, src/core/version.cpp) reports: the project version,
# the git commit (refreshed at every build by cmake/git_commit.cmake) and the optional libraries
# this build found. Only version.cpp gets these definitions, so nothing else recompiles. Included
# by CMakeLists.txt and cmake/inference.cmake after crema_core exists.
set(CREMA_GIT_COMMIT "" CACHE STRING "The commit `crema --version` names (default: git rev-parse HEAD)")
set(_crema_generated ${PROJECT_BINARY_DIR}/generated)
add_custom_target(crema_git_commit
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DGIT_COMMIT=${CREMA_GIT_COMMIT}
          -DOUTPUT=${_crema_generated}/crema_git_commit.hpp -P ${PROJECT_SOURCE_DIR}/cmake/git_commit.cmake
  BYPRODUCTS ${_crema_generated}/crema_git_commit.hpp
  COMMENT "" VERBATIM)
add_dependencies(crema_core crema_git_commit)

set(_crema_version_defs CREMA_VERSION="${PROJECT_VERSION}" CREMA_BUILD_TYPE="${CMAKE_BUILD_TYPE}")
set(_crema_version_includes ${_crema_generated})
if(CREMA_WITH_CUDA)
  list(APPEND _crema_version_defs CREMA_CUDA_VERSION="${CUDAToolkit_VERSION}"
       CREMA_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES}")
endif()
if(CREMA_WITH_DNNL)
  list(APPEND _crema_version_defs CREMA_WITH_DNNL=1)
  list(APPEND _crema_version_includes ${DNNL_INCLUDE_DIR})
endif()
if(CREMA_WITH_NCCL)
  list(APPEND _crema_version_defs CREMA_WITH_NCCL=1)
  list(APPEND _crema_version_includes ${NCCL_INCLUDE_DIR})
endif()
if(CREMA_WITH_MPI)
  list(APPEND _crema_version_defs CREMA_WITH_MPI=1)
endif()
if(CREMA_INFERENCE_ONLY)
  list(APPEND _crema_version_defs CREMA_INFERENCE_ONLY=1)
endif()
# The compiler's own folders (oneDNN in /usr/include) must not come again as -isystem.
list(REMOVE_ITEM _crema_version_includes ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES})
set_source_files_properties(${PROJECT_SOURCE_DIR}/src/core/version.cpp PROPERTIES
  COMPILE_DEFINITIONS "${_crema_version_defs}" INCLUDE_DIRECTORIES "${_crema_version_includes}")
