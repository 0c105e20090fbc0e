#!/usr/bin/env bash
# The one way to run crema's tests, locally and in CI: installs the Debian dependencies, builds
# everything (the CUDA code too when the toolkit is present, even without a GPU) and runs ctest.
# Tests that need ../shared/reference skip cleanly when it is absent (with CREMA_REQUIRE_REFERENCE=1,
# as .ci/run sets it, they fail instead); GPU tests skip without a GPU.
# Usage: scripts/test.sh [--sanitize | --no-sanitize] [--no-fuzz-smoke] [ctest args...]
#   e.g. scripts/test.sh -R convolution
#   After the unit tests, the same tests built with AddressSanitizer and UndefinedBehaviorSanitizer
#     in build-asan/ (CUDA and Python off), any report failing the test (a second build: about
#     35 minutes on 2 cores with a cold ccache, a few with a warm one). --sanitize runs only this
#     one; --no-sanitize (or CREMA_TEST_SANITIZE=0) skips it.
#   Then each libFuzzer target runs for 20 s (scripts/fuzz.sh smoke: a clang build in
#     build-fuzz/), any finding failing the run; --no-fuzz-smoke (or CREMA_TEST_FUZZ=0) skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
plain=1
sanitize="${CREMA_TEST_SANITIZE:-1}"
fuzz="${CREMA_TEST_FUZZ:-1}"
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) plain=0 sanitize=1 ;;
    --no-sanitize) sanitize=0 ;;
    --fuzz-smoke) fuzz=1 ;;
    --no-fuzz-smoke) fuzz=0 ;;
    *) break ;;
  esac
  shift
done
scripts/setup.sh
if [ "$plain" = 1 ]; then
  scripts/build.sh
  ctest --test-dir "${CREMA_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
fi
if [ "$sanitize" = 1 ]; then
  CREMA_BUILD_DIR=build-asan scripts/build.sh "-DCREMA_SANITIZE=address;undefined" \
    -DCREMA_CUDA=OFF -DCREMA_PYTHON=OFF
  asan="${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
  # OpenMPI leaks at MPI_Finalize, from plugins it has already unloaded (no names to suppress):
  # the test that runs `mpirun crema train` runs without the leak check, every other check on.
  ASAN_OPTIONS="$asan" ctest --test-dir build-asan --output-on-failure -j "$(nproc)" \
    -E '^mpi_train_test$' "$@"
  if [ $# -eq 0 ]; then
    ASAN_OPTIONS="$asan:detect_leaks=0" ctest --test-dir build-asan --output-on-failure \
      -R '^mpi_train_test$'
  fi
fi
if [ "$fuzz" = 1 ]; then
  scripts/fuzz.sh build
  scripts/fuzz.sh smoke
fi
