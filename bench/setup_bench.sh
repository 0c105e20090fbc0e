#!/usr/bin/env bash
# What the peer benchmarks need besides crema's own dependencies (scripts/setup.sh), installed
# idempotently (root): Debian's PyTorch 1.13 for the system interpreter (python3-torch, the
# anchor of earlier figures), and a virtual environment of the `python3` on PATH in .bench/venv
# with the newest PyTorch, onnxruntime and onnx from PyPI (PyTorch's Linux wheel brings its CUDA
# libraries too: about 3 GB on disk; on the CPU they stay unused).
#   bench/setup_bench.sh            then bench/cpu_bench.sh compares crema with both PyTorches
set -euo pipefail
cd "$(dirname "$0")/.."
if ! dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi
venv=.bench/venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade torch onnxruntime onnx \
  numpy
echo "setup_bench: Debian PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')," \
  "PyPI PyTorch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') in $venv," \
  "onnxruntime $("$venv/bin/python" -c 'import onnxruntime; print(onnxruntime.__version__)')"
