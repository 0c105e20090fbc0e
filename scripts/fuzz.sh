#!/usr/bin/env bash
# libFuzzer targets (fuzz/*_fuzzer.cpp), built with clang in the sanitizer build, build-asan/
# (scripts/build_sanitized.sh: the library with libFuzzer's coverage, fuzz/README.md says where,
# and -fsanitize=address,undefined; CUDA and Python off; the sanitized unit tests are built there
# too).
# Usage:
#   scripts/fuzz.sh build              configure build-asan/ and build the targets and the seeder
#   scripts/fuzz.sh smoke [SECONDS]    each target for SECONDS (default 20) from its seeds; exit 1
#                                      on any finding (what the test suite runs)
#   scripts/fuzz.sh campaign [SECONDS] each target for SECONDS (default 600), corpus kept in
#                                      fuzz-corpus/<target>; prints executions, corpus size and
#                                      findings per target
#   (smoke and campaign run CREMA_FUZZ_JOBS targets at a time, default 1)
#   scripts/fuzz.sh run TARGET [libFuzzer args...]   one target, e.g. to replay a crash file
# Findings (crash-*, leak-*, timeout-*, oom-* inputs) are saved under fuzz-findings/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build_dir="${CREMA_SANITIZE_BUILD_DIR:-build-asan}"
findings_dir="${CREMA_FUZZ_FINDINGS:-fuzz-findings}"
corpus_dir="${CREMA_FUZZ_CORPUS:-fuzz-corpus}"

targets() {
  for f in fuzz/*_fuzzer.cpp; do basename "$f" .cpp; done
}

build() {
  CREMA_SANITIZE_BUILD_DIR="$build_dir" CREMA_BUILD_TARGETS="crema_fuzz_seeds $(targets | xargs)" \
    scripts/build_sanitized.sh "$@"
}

# Seeds: small valid files of every format (written by crema_fuzz_seeds from models/ and the
# formats' writers), in $build_dir/seeds/<target>/.
seeds() {
  rm -rf "$build_dir/seeds"
  "$build_dir/fuzz/crema_fuzz_seeds" "$root" "$build_dir/seeds" >/dev/null
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export GLOG_minloglevel="${GLOG_minloglevel:-3}"
# crema's blob bound (2^27 values here; INT_MAX by default) below the fuzzer's 1 GB malloc limit,
# so an input that passes the bound may be allocated: what is checked is that anything beyond
# it is refused before the allocation.
export CREMA_MAX_BLOB_ELEMENTS="${CREMA_MAX_BLOB_ELEMENTS:-134217728}"

# Runs one target for $2 seconds; prints "target: N execs, corpus M, findings K".
fuzz_one() {
  local target=$1 seconds=$2 corpus=$3
  local out="$findings_dir/$target"
  mkdir -p "$out" "$corpus"
  local log="$out/fuzz.log"
  local before
  before=$(find "$out" -maxdepth 1 -type f ! -name fuzz.log | wc -l)
  # -rss_limit_mb: a hostile file must be rejected before a large allocation; -timeout: a hang.
  # Inputs that once crashed a target (fuzz/regressions/<target>/) are run first, every time.
  local regressions=()
  [ -d "fuzz/regressions/$target" ] && regressions=("$root/fuzz/regressions/$target")
  set +e
  (cd "$out" && "$root/$build_dir/fuzz/$target" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$root/$out/" "$root/$corpus" "$root/$build_dir/seeds/$target" \
    "${regressions[@]}") >"$log" 2>&1
  local rc=$?
  set -e
  local execs after
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1)
  after=$(find "$out" -maxdepth 1 -type f ! -name fuzz.log | wc -l)
  local size
  size=$(find "$corpus" -type f | wc -l)
  echo "$target: ${execs:-?} executions, corpus $size, findings $((after - before)) (exit $rc)"
  if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR: |SUMMARY: |runtime error|terminate called|==[0-9]+==' "$log" | head -5 | sed 's/^/  /'
    echo "  log: $log"
    return 1
  fi
}

# Every target for $1 seconds, CREMA_FUZZ_JOBS (default 1) at a time; $2 = 1 keeps the corpus.
run_all() {
  local seconds=$1 keep=$2 jobs="${CREMA_FUZZ_JOBS:-1}" failed=0 running=0
  seeds
  local results
  results=$(mktemp -d)
  for t in $(targets); do
    local corpus
    if [ "$keep" = 1 ]; then
      corpus="$corpus_dir/$t"
    else
      corpus="$build_dir/smoke-corpus/$t"
      rm -rf "$corpus"
    fi
    (if fuzz_one "$t" "$seconds" "$corpus" >"$results/$t" 2>&1; then echo 0; else echo 1; fi \
      >"$results/$t.rc") &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
      wait -n || true
      running=$((running - 1))
    fi
  done
  wait
  for t in $(targets); do
    cat "$results/$t"
    [ "$(cat "$results/$t.rc")" = 0 ] || failed=1
  done
  rm -rf "$results"
  return $failed
}

case "${1:-}" in
  build) shift; build "$@" ;;
  seeds) seeds ;;
  smoke) run_all "${2:-20}" 0 ;;
  campaign) run_all "${2:-600}" 1 ;;
  run)
    shift
    t=$1
    shift
    exec "$build_dir/fuzz/$t" "$@"
    ;;
  *)
    sed -n '2,15p' "$0"
    exit 2
    ;;
esac
