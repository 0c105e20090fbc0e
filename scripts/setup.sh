#!/usr/bin/env bash
# Installs what crema needs from Debian 12's packages. Idempotent, non-interactive, root.
# Usage: scripts/setup.sh            (build + test dependencies, Fashion-MNIST)
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  protobuf-compiler libprotobuf-dev
  libgoogle-glog-dev libgflags-dev
  libopenblas-dev libopenblas-openmp-dev libdnnl-dev
  liblmdb-dev lmdb-utils libleveldb-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  libhdf5-dev zlib1g-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev
  clang-14 libclang-rt-14-dev
  libcurl4-openssl-dev libssl-dev
  python3-dev python3-numpy pybind11-dev python3-pybind11 python3-protobuf python3-pytest
  python3-setuptools python3-venv graphviz python3-pydot
  dataset-fashion-mnist
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# TensorBoard's own event reader, for the test that reads crema's event files with it (that test
# skips without it). Installed for `python3` on PATH (pip reaches PyPI); failure is not fatal.
install_tensorboard() {
  python3 -c 'import tensorboard' 2>/dev/null && return 0
  python3 -m pip install -q --disable-pip-version-check tensorboard >/dev/null 2>&1 ||
    echo "setup: could not install Python's tensorboard package; its reader test will skip"
}
# onnx and onnxruntime, for the tests that check crema's ONNX export with onnx.checker and run it
# with onnxruntime (they skip without them); failure is not fatal.
install_onnx() {
  python3 -c 'import onnx, onnxruntime' 2>/dev/null && return 0
  python3 -m pip install -q --disable-pip-version-check onnx onnxruntime >/dev/null 2>&1 ||
    echo "setup: could not install Python's onnx/onnxruntime packages; the ONNX runtime tests will skip"
}

if [ ${#missing[@]} -eq 0 ]; then
  install_tensorboard
  install_onnx
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_tensorboard
install_onnx
echo "setup: done"
