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
# Precompiled headers (CREMA_PCH): ccache caches the compiles that use them only with these.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
mkdir -p "$build_dir"
t0=$SECONDS
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >"$build_dir/configure.log" 2>&1 || {
  cat "$build_dir/configure.log"
  exit 1
}
grep -E '^-- crema:' "$build_dir/configure.log" || true
echo "build.sh: configured $build_dir/ in $((SECONDS - t0)) s"
t0=$SECONDS
jobs="${CREMA_JOBS:-$(nproc)}"
if [ -n "${CREMA_BUILD_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build_dir" -j "$jobs" --target ${CREMA_BUILD_TARGETS}
else
  cmake --build "$build_dir" -j "$jobs"
fi
echo "build.sh: built $build_dir/ in $((SECONDS - t0)) s"
