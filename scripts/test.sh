#!/usr/bin/env bash
# The one way to run crema's tests, locally and in CI: installs the Debian dependencies, builds
# everything (the CUDA code too when the toolkit is present, even without a GPU) and runs ctest.
# Tests that need ../shared/reference skip cleanly when it is absent (with CREMA_REQUIRE_REFERENCE=1,
# as .ci/run sets it, they fail instead); GPU tests skip without a GPU.
# Usage: scripts/test.sh [--sanitize | --no-sanitize] [--no-fuzz-smoke] [ctest args...]
#   e.g. scripts/test.sh -R convolution
#   After the unit tests of build/, the same tests built with AddressSanitizer and
#     UndefinedBehaviorSanitizer in build-asan/ (scripts/build_sanitized.sh: clang-14 at -O1, CUDA
#     and Python off), any report failing the test. --sanitize runs only this one; --no-sanitize
#     (or CREMA_TEST_SANITIZE=0) skips it.
#   Then each libFuzzer target runs for 20 s (scripts/fuzz.sh smoke; its targets are built in
#     build-asan/ too), any finding failing the run; --no-fuzz-smoke (or CREMA_TEST_FUZZ=0) skips it.
#   At the end, each step's wall time (README.md, "Testing": about half an hour on 2 cores with an
#   empty ccache).
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
# Each step's wall time, printed at the end (README.md, "Testing", has the figures).
steps=()
step() {
  local name=$1 t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  steps+=("$(printf '%-28s %6d s' "$name" $((SECONDS - t0)))$([ $rc = 0 ] || echo "  FAILED")")
  [ $rc = 0 ] || exit $rc
}
summary() {
  echo "scripts/test.sh: time by step"
  [ ${#steps[@]} -eq 0 ] || printf '  %s\n' "${steps[@]}"
  printf '  %-28s %6d s\n' total "$SECONDS"
}
trap summary EXIT
step setup scripts/setup.sh
if [ "$plain" = 1 ]; then
  step "build (build/)" scripts/build.sh
  step "unit tests (build/)" \
    ctest --test-dir "${CREMA_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
fi
if [ "$sanitize" = 1 ]; then
  san_dir="${CREMA_SANITIZE_BUILD_DIR:-build-asan}"  # as scripts/build_sanitized.sh
  step "build (build-asan/)" scripts/build_sanitized.sh
  asan="${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
  # OpenMPI leaks at MPI_Finalize, from plugins it has already unloaded (no names to suppress):
  # the test that runs `mpirun crema train` runs without the leak check, every other check on.
  ASAN_OPTIONS="$asan" step "sanitized tests (build-asan/)" \
    ctest --test-dir "$san_dir" --output-on-failure -j "$(nproc)" -E '^mpi_train_test$' "$@"
  if [ $# -eq 0 ]; then
    ASAN_OPTIONS="$asan:detect_leaks=0" step "sanitized mpi_train_test" \
      ctest --test-dir "$san_dir" --output-on-failure -R '^mpi_train_test$'
  fi
fi
if [ "$fuzz" = 1 ]; then
  step "fuzz targets (build-asan/)" scripts/fuzz.sh build
  step "fuzz smoke" scripts/fuzz.sh smoke
fi
