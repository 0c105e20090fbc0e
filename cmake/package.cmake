# Debian packages of this build, by cpack from the install rules (cmake/install.cmake):
#   cpack -G DEB --config build/CPackConfig.cmake -B DIR    (scripts/package_test.sh does it)
# makes two packages, installed under /usr:
#   crema      bin/crema, libcrema.so.X.Y, bash completion and, when built, the Python package in
#              lib/python3/dist-packages (Debian's python3); Depends from dpkg-shlibdeps.
#   crema-dev  headers, crema.proto, libcrema.so, the CMake package and crema.pc; Depends on crema
#              and the -dev packages of crema's public dependencies (protobuf, glog, gflags).
# dpkg-shlibdeps names Debian's packages for every library the binaries link; libraries that no
# Debian package holds (CUDA, cuDNN and NCCL from NVIDIA's installers under /usr/local/cuda) get no
# dependency, so a package built with CUDA needs them on the target machine as they are here;
# -DCREMA_CUDA=OFF builds a package that needs Debian's packages only.
set(CPACK_PACKAGE_NAME crema)
set(CPACK_PACKAGE_VENDOR crema)
set(CPACK_PACKAGE_CONTACT "crema maintainers <crema@localhost>")
# Debian's Description: this summary line, then the package's own text.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "crema, a Caffe-compatible deep-learning framework in C++")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime python dev)
set(CPACK_COMPONENT_RUNTIME_GROUP runtime)
set(CPACK_COMPONENT_PYTHON_GROUP runtime)
set(CPACK_COMPONENT_DEV_GROUP dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME crema)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "The crema command line (train, test, time, ...), libcrema, bash completion, the Python package.")
if(CREMA_WITH_PYTHON)
  # The Python package: `import crema` with Debian's python3.
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "python3-numpy, python3-protobuf")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_NAME crema-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "crema (= ${PROJECT_VERSION}), libprotobuf-dev, libgoogle-glog-dev, libgflags-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "C++ development files: headers, crema.proto, find_package(crema) and pkg-config crema.")
include(CPack)
