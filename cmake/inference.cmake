# The inference-only build (-DCREMA_INFERENCE_ONLY=ON, scripts/build_inference.sh): a small
# library for embedding crema, libcrema_infer, and a CLI, crema-infer, with only what running a
# deploy net needs. Included by CMakeLists.txt after the common dependencies and crema_module();
# the rest of CMakeLists.txt (full library, solvers, tools, tests) is skipped.
#
# Left out: the data layers and what they read (LMDB, LevelDB, HDF5, the prefetch pool and data
# transformer), the solvers, the training and dataset tools, libcurl/OpenSSL (`zoo fetch`). A
# net using a left-out layer type gets "layer type Data is not in this inference-only build";
# HDF5 weights (.caffemodel.h5) are a RuntimeError (binary .caffemodel only). OpenCV only with
# -DCREMA_INFERENCE_OPENCV=ON (image input in examples/inference).
option(CREMA_INFERENCE_OPENCV "Inference-only build: link OpenCV for image input" OFF)

# Layer folders left out, and their prototxt types (for the registry's error message).
set(CREMA_INFERENCE_EXCLUDED_LAYER_DIRS data image_data hdf5_data hdf5_output window_data
    annotated_data)
set(CREMA_INFERENCE_EXCLUDED_LAYER_TYPES
    "Data,ImageData,HDF5Data,HDF5Output,WindowData,AnnotatedData")

list(REMOVE_ITEM CREMA_COMMON_DEFS CREMA_WITH_LEVELDB=1)
set(LevelDB_FOUND FALSE)
if(NOT (CREMA_INFERENCE_OPENCV AND OpenCV_FOUND))
  list(REMOVE_ITEM CREMA_COMMON_DEFS CREMA_WITH_OPENCV=1)
  set(OpenCV_FOUND FALSE)
endif()
if(CREMA_INFERENCE_OPENCV AND NOT OpenCV_FOUND)
  message(FATAL_ERROR "CREMA_INFERENCE_OPENCV=ON but OpenCV (core, imgproc, imgcodecs) was not found")
endif()
message(STATUS "crema: inference-only build (no data layers, solvers, LMDB, LevelDB, HDF5); "
               "OpenCV ${OpenCV_FOUND}")

file(GLOB _crema_infer_layer_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/layers/*/*.cpp
     ${CMAKE_CURRENT_SOURCE_DIR}/layers/*/*.cu)
foreach(_dir ${CREMA_INFERENCE_EXCLUDED_LAYER_DIRS})
  list(FILTER _crema_infer_layer_sources EXCLUDE REGEX "/layers/${_dir}/")
endforeach()

crema_module(crema_core src/core/*.cpp src/core/*.cu)
target_compile_definitions(crema_core PRIVATE
  CREMA_EXCLUDED_LAYER_TYPES="${CREMA_INFERENCE_EXCLUDED_LAYER_TYPES}")
include(cmake/version.cmake)
crema_module(crema_math src/math/*.cpp src/math/*.cu)
crema_module(crema_io src/io/npy.cpp src/io/input_checks.cpp src/io/prefetch_pool.cpp
             src/io/json.cpp src/io/boxes.cpp)
crema_module(crema_net src/net/*.cpp)
target_compile_definitions(crema_net PRIVATE CREMA_NO_HDF5=1)
crema_module(crema_onnx src/onnx/*.cpp)
crema_module(crema_layers ${_crema_infer_layer_sources})

add_library(crema_infer SHARED
  $<TARGET_OBJECTS:crema_proto> $<TARGET_OBJECTS:crema_core> $<TARGET_OBJECTS:crema_math>
  $<TARGET_OBJECTS:crema_io> $<TARGET_OBJECTS:crema_net> $<TARGET_OBJECTS:crema_layers>
  $<TARGET_OBJECTS:crema_onnx>)
target_include_directories(crema_infer PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${CMAKE_CURRENT_BINARY_DIR}/proto>
  $<INSTALL_INTERFACE:include>)
target_link_libraries(crema_infer PUBLIC protobuf::libprotobuf glog::glog gflags
                      PRIVATE ${OPENBLAS_LIBRARY} Threads::Threads ${CMAKE_DL_LIBS})
# Every symbol resolved at link time: a left-out module still referenced fails here, not in a
# user's program.
target_link_options(crema_infer PRIVATE -Wl,--no-undefined)
crema_link_dnnl(crema_infer)
if(OpenMP_CXX_FOUND)
  target_link_libraries(crema_infer PRIVATE OpenMP::OpenMP_CXX)
endif()
if(CREMA_WITH_CUDA)
  target_link_libraries(crema_infer PRIVATE CUDA::cudart ${CUDNN_LIBRARY} ${CMAKE_DL_LIBS})
endif()

# crema-infer: the crema CLI with the inference verbs only (each verb registers itself).
set(_crema_infer_verbs crema flags forward inspect layers onnx time device_query)
list(TRANSFORM _crema_infer_verbs PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/tools/)
list(TRANSFORM _crema_infer_verbs APPEND .cpp)
add_executable(crema_infer_cli ${_crema_infer_verbs})
target_compile_definitions(crema_infer_cli PRIVATE CREMA_INFERENCE_ONLY=1)  # time: no --solver
set_target_properties(crema_infer_cli PROPERTIES OUTPUT_NAME crema-infer)
target_include_directories(crema_infer_cli PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src
                           ${CMAKE_CURRENT_SOURCE_DIR}/tools)
target_compile_definitions(crema_infer_cli PRIVATE ${CREMA_COMMON_DEFS})
target_link_libraries(crema_infer_cli PRIVATE crema_infer)

add_subdirectory(examples/inference)

# Install (cmake/install.cmake): lib/libcrema_infer.so, bin/crema-infer, the public headers but
# solver.hpp, and a CMake package (find_package(crema_infer) -> crema::crema_infer).
crema_install_package(PACKAGE crema_infer LIBRARY crema_infer CLI crema_infer_cli
                      EXCLUDE_HEADERS solver.hpp)
