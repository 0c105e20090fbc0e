#!/usr/bin/env bash
# Builds BVLC Caffe (CPU only, OpenBLAS) into .bench/caffe/bin/caffe for bench/caffe_bench.sh,
# idempotently (root for the Debian packages). The source is Caffe's master at 9b89154 (its last
# commit) as PyPI's `brocolli-caffe` 9.0.2 source archive carries it: PyPI is the one registry
# this machine reaches. That archive builds only a Python module, so three lines of its CMake
# files are changed (below) to build the library and the `caffe` tool instead; Caffe's own
# sources are built as they are (Release, -O3). About 25 minutes on 2 cores.
#   bench/setup_caffe.sh            then bench/caffe_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=.bench/caffe
[ -x "$out/bin/caffe" ] && { echo "setup_caffe: $out/bin/caffe is there"; exit 0; }
packages=(libboost-system-dev libboost-thread-dev libboost-filesystem-dev libgoogle-glog-dev
  libgflags-dev libprotobuf-dev protobuf-compiler libhdf5-dev liblmdb-dev libopenblas-dev cmake
  ninja-build)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
mkdir -p "$out"
src="$out/brocolli-caffe-9.0.2"
if [ ! -d "$src" ]; then
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$out" brocolli-caffe==9.0.2
  tar -xzf "$out/brocolli-caffe-9.0.2.tar.gz" -C "$out"
  # The library (commented out in the archive), linked without Python, and the `caffe` tool alone.
  sed -i -e 's/^# add_library(caffe \${srcs})/add_library(caffe ${srcs})/' \
    -e 's/^# caffe_default_properties(caffe)/caffe_default_properties(caffe)/' \
    -e 's/^# target_include_directories(caffe PUBLIC/target_include_directories(caffe PUBLIC/' \
    -e 's/^#\( *\$<\(BUILD\|INSTALL\)_INTERFACE\)/\1/' \
    -e 's|^# target_link_libraries(caffe proto .*|target_link_libraries(caffe proto -lglog -lgflags -lprotobuf -lboost_thread -lboost_system -lboost_filesystem -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5_hl -lhdf5 -llmdb -lopenblas)|' \
    "$src/src/caffe/CMakeLists.txt"
  sed -i 's/^# add_subdirectory(tools)/add_subdirectory(tools)/' "$src/CMakeLists.txt"
  sed -i -e 's|^file(GLOB_RECURSE srcs .*|set(srcs ${CMAKE_CURRENT_SOURCE_DIR}/caffe.cpp)|' \
    -e 's/ -lboost_regex -lhdf5_hl -lhdf5//' "$src/tools/CMakeLists.txt"
  grep -q '^add_library(caffe ' "$src/src/caffe/CMakeLists.txt" ||
    { echo "setup_caffe: the archive's CMakeLists.txt is not the one expected" >&2; exit 1; }
fi
cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCPU_ONLY=ON -DBLAS=Open \
  -DBUILD_python=OFF -DUSE_LMDB=ON -DCMAKE_CXX_FLAGS=-I/usr/include/hdf5/serial >/dev/null
ninja -C "$src/build" caffe.bin
mkdir -p "$out/bin"
cp "$src/build/tools/caffe" "$out/bin/caffe"
echo "setup_caffe: $out/bin/caffe (BVLC Caffe 9b89154, CPU only, OpenBLAS)"
