#!/usr/bin/env bash
# Configures and builds crema in build/ (Release, ccache when present).
# Usage: scripts/build.sh [extra cmake args...]   e.g. -DCREMA_CUDA=OFF
# Targets to build may be given with CREMA_BUILD_TARGETS="crema_cli" (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${CREMA_BUILD_DIR:-build}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Paths relative to the checkout, so every clone shares the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >"$build_dir/configure.log" 2>&1 || {
  cat "$build_dir/configure.log"
  exit 1
}
grep -E '^-- crema:' "$build_dir/configure.log" || true
jobs="${CREMA_JOBS:-$(nproc)}"
if [ -n "${CREMA_BUILD_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build_dir" -j "$jobs" --target ${CREMA_BUILD_TARGETS}
else
  cmake --build "$build_dir" -j "$jobs"
fi
