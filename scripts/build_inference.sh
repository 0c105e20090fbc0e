#!/usr/bin/env bash
# Configures, builds and installs the inference-only variant (cmake/inference.cmake) in
# build-inference/ (install tree: build-inference/install), then checks it: libcrema_infer.so,
# crema-infer and crema-classify must not link LMDB, LevelDB or HDF5, and a net with a Data layer
# must get the "not in this inference-only build" error. Prints the sizes.
# Usage: scripts/build_inference.sh [extra cmake args...]   (default -DCREMA_CUDA=OFF; pass
# -DCREMA_CUDA=ON for GPU inference, -DCREMA_INFERENCE_OPENCV=ON for image input)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${CREMA_INFERENCE_BUILD_DIR:-build-inference}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCREMA_INFERENCE_ONLY=ON \
  -DCREMA_CUDA=OFF -DCMAKE_INSTALL_PREFIX="$PWD/$build_dir/install" "$@" \
  >"$build_dir/configure.log" 2>&1 || {
  cat "$build_dir/configure.log"
  exit 1
}
grep -E '^-- crema:' "$build_dir/configure.log" || true
cmake --build "$build_dir" -j "${CREMA_JOBS:-$(nproc)}"
cmake --install "$build_dir" >"$build_dir/install.log"

lib="$build_dir/libcrema_infer.so"
status=0
for f in "$lib" "$build_dir/crema-infer" "$build_dir/examples/inference/crema-classify"; do
  if ldd "$f" | grep -Ei 'lmdb|leveldb|hdf5'; then
    echo "FAIL: $f links a data-source library" >&2
    status=1
  fi
done
printf 'layer { name: "d" type: "Data" top: "x" data_param { source: "x" batch_size: 1 } }\n' \
  >"$build_dir/data_net.prototxt"
if "$build_dir/crema-infer" inspect --model "$build_dir/data_net.prototxt" >"$build_dir/data_net.log" 2>&1 ||
  ! grep -q "not in this inference-only build" "$build_dir/data_net.log"; then
  echo "FAIL: a Data layer did not get the inference-only error:" >&2
  cat "$build_dir/data_net.log" >&2
  status=1
fi
echo "sizes (bytes):"
stat -c '%s %n' "$(readlink -f "$lib")" "$build_dir/crema-infer" \
  "$build_dir/examples/inference/crema-classify"
echo "shared libraries of $lib:"
ldd "$lib" | awk '{print "  " $1}'
exit $status
