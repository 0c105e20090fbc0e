#!/usr/bin/env bash
# The wheel as a new user gets it (run by scripts/package_test.sh): `pip wheel ./python`
# (scikit-build-core builds crema's CMake project in build-wheel/; it, pybind11 and numpy come from
# the package index), then `pip install` of that wheel into a fresh venv outside the tree, where
# python/tests/wheel_check.py imports crema and uses it.
# usage: python/tests/wheel_test.sh [pip wheel options, e.g. -Ccmake.define.CREMA_CUDA=OFF]
# CREMA_WHEEL_PYTHON picks the interpreter (default python3). Exit 77 (skipped) only when that
# interpreter has no pip or venv, or no package index can be reached for the build requirements.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${CREMA_WHEEL_PYTHON:-python3}"
skip() {
  echo "SKIP: $*"
  exit 77
}
command -v "$python" >/dev/null || skip "no $python on PATH"
"$python" -m pip --version >/dev/null 2>&1 || skip "$python has no pip"
"$python" -c 'import venv, ensurepip' 2>/dev/null || skip "$python has no venv/ensurepip"
work="$(mktemp -d "${TMPDIR:-/tmp}/crema_wheel_test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$python" -m pip download -q --no-deps -d "$work/probe" scikit-build-core >"$work/probe.log" 2>&1 ||
  skip "cannot download scikit-build-core: no package index reachable ($(tail -1 "$work/probe.log"))"

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
# The compilers a plain CMake build picks (ccache keys on the name: pip's interpreter may say g++).
export CC="${CC:-cc}" CXX="${CXX:-c++}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-${CREMA_JOBS:-$(nproc)}}"
start=$(date +%s)
"$python" -m pip wheel --no-deps --disable-pip-version-check -w "$work/dist" "$@" "$root/python"
wheel="$(ls "$work"/dist/crema-*.whl)"
echo "wheel_test: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB, built in" \
  "$(($(date +%s) - start)) s"

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
cd "$work"  # outside the tree: crema must come from the venv
env -u PYTHONPATH -u GLOG_minloglevel "$work/venv/bin/python" "$root/python/tests/wheel_check.py" \
  "$root/models/lenet/lenet.prototxt"
