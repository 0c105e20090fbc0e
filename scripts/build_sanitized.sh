#!/usr/bin/env bash
# Configures and builds the sanitizer build in build-asan/: clang-14 at -O1 with AddressSanitizer
# and UndefinedBehaviorSanitizer (every report fatal), assertions on, and libFuzzer's coverage in
# the library; CUDA and Python off. One build serves the sanitized unit tests (scripts/test.sh)
# and the fuzz targets (scripts/fuzz.sh).
# Usage: scripts/build_sanitized.sh [extra cmake args...]
#   CREMA_BUILD_TARGETS="a b" builds only those targets (as scripts/build.sh);
#   CREMA_SANITIZE_BUILD_DIR (default build-asan); CREMA_CLANG (default clang++-14).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${CREMA_SANITIZE_BUILD_DIR:-build-asan}"
clang="${CREMA_CLANG:-clang++-14}"
clang_c="${CREMA_CLANG_C:-${clang/clang++/clang}}"
command -v "$clang" >/dev/null || {
  echo "build_sanitized: $clang not found (Debian: apt-get install clang-14 libclang-rt-14-dev;" \
    "scripts/setup.sh installs it)" >&2
  exit 1
}
# A folder configured with another compiler (an older build-asan/ was built with gcc) starts over.
if [ -f "$build_dir/CMakeCache.txt" ] &&
  ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=.*$(basename "$clang")\$" "$build_dir/CMakeCache.txt"; then
  echo "build_sanitized: $build_dir was configured with another compiler; reconfiguring it"
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi
# -gline-tables-only (file:line in reports) makes ccache hash the build folder; without that, a
# clone in another folder (CI's) reuses the objects.
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
flags="-O1 -gline-tables-only"
CREMA_BUILD_DIR="$build_dir" exec scripts/build.sh \
  -DCMAKE_CXX_COMPILER="$clang" -DCMAKE_C_COMPILER="$clang_c" \
  -DCMAKE_CXX_FLAGS_RELEASE="$flags" -DCMAKE_C_FLAGS_RELEASE="$flags" \
  "-DCREMA_SANITIZE=address;undefined" -DCREMA_FUZZ=ON -DCREMA_CUDA=OFF -DCREMA_PYTHON=OFF "$@"
