#!/usr/bin/env bash
# The one way to run crema's tests, locally and in CI: installs the Debian dependencies, builds
# everything (the CUDA code too when the toolkit is present, even without a GPU) and runs ctest.
# Tests that need ../shared/reference skip cleanly when it is absent; GPU tests skip without a GPU.
# Usage: scripts/test.sh [ctest args...]   e.g. scripts/test.sh -R convolution
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${CREMA_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
