#!/usr/bin/env bash
# Installs what crema needs from Debian 12's packages. Idempotent, non-interactive, root.
# Usage: scripts/setup.sh            (build + test dependencies, Fashion-MNIST)
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  protobuf-compiler libprotobuf-dev
  libgoogle-glog-dev libgflags-dev
  libopenblas-dev libopenblas-openmp-dev
  liblmdb-dev lmdb-utils libleveldb-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  libhdf5-dev
  libgtest-dev libgmock-dev
  dataset-fashion-mnist
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
