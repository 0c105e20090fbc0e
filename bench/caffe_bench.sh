#!/usr/bin/env bash
# CPU speed, crema vs BVLC Caffe on the same machine in one run, on bench/cpu_bench.sh's nets
# (bench/nets.py --cpu: the published Caffe structures fed by constant DummyData, the same
# prototxts for both). Training: crema's whole iteration (forward, backward, the SGD update with
# momentum and weight decay) against Caffe's forward + backward alone (`caffe time`, which has no
# update); inference: crema's forward pass in phase TEST against Caffe's "Average Forward pass" of
# `caffe time -phase TEST`. The ratio is Caffe's time / crema's (> 1: crema is faster).
#
#   bench/setup_caffe.sh                 builds Caffe into .bench/caffe/bin/caffe (once)
#   bench/caffe_bench.sh [NET ...]       (default: all seven nets of cpu_bench.sh)
#
# Environment: CAFFE (default .bench/caffe/bin/caffe), CREMA (build/crema), BENCH_SECONDS=4
# (timed seconds per case, each framework), BENCH_THREADS="1 2" (OMP_NUM_THREADS and
# OPENBLAS_NUM_THREADS for both, crema --threads), BENCH_MODES="train test", BENCH_LOG_DIR=DIR
# (keep every case's output), OMP_WAIT_POLICY=PASSIVE as cpu_bench.sh sets it. Caffe has no
# seconds option: a first run of 2 iterations sizes the timed one.
set -uo pipefail
cd "$(dirname "$0")/.."
caffe="${CAFFE:-.bench/caffe/bin/caffe}"
crema="${CREMA:-build/crema}"
seconds="${BENCH_SECONDS:-4}"
threads_list="${BENCH_THREADS:-1 2}"
modes="${BENCH_MODES:-train test}"
export OMP_WAIT_POLICY="${BENCH_OMP_WAIT_POLICY-PASSIVE}"
[ -x "$caffe" ] || { echo "caffe_bench.sh: no Caffe at $caffe (run bench/setup_caffe.sh)" >&2; exit 2; }
nets=("$@")
[ ${#nets[@]} -eq 0 ] && nets=(lenet cifar10_quick bvlc_reference_caffenet bvlc_googlenet
  squeezenet_v1.1 mobilenet_v1 resnet50)
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
logs="${BENCH_LOG_DIR:-$dir/logs}"
mkdir -p "$logs"
/usr/bin/python3 bench/nets.py "$dir" --cpu || exit 1
for net in "${nets[@]}"; do
  [ -f "$dir/$net.prototxt" ] || { echo "caffe_bench.sh: unknown net $net" >&2; exit 2; }
done

# Caffe's average time in ms of `caffe time` ($1: train|test, $2: net, $3: iterations, $4: log).
caffe_ms() {
  local phase=TRAIN key="Average Forward-Backward"
  [ "$1" = test ] && phase=TEST key="Average Forward pass"
  GLOG_logtostderr=1 "$caffe" time -model "$dir/$2.prototxt" -phase "$phase" -iterations "$3" \
    >"$4" 2>&1
  sed -n "s/.*$key: \([0-9.]*\) ms\..*/\1/p" "$4" | tail -1
}

start=$(date +%s)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
  "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# crema $(git rev-parse --short HEAD 2>/dev/null) ($crema), Caffe ($caffe)," \
  "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-default}, ${seconds}s per case"
printf "%-24s %-5s %7s %12s %12s %7s\n" net mode threads "crema ms" "Caffe ms" ratio
for net in "${nets[@]}"; do
  for mode in $modes; do
    for threads in $threads_list; do
      case_log="$logs/$net.$mode.${threads}t"
      export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"
      if [ "$mode" = train ]; then
        model=(--solver "$dir/$net.solver.prototxt")
        key="Average training iteration"
      else
        model=(--model "$dir/$net.prototxt" --phase TEST)
        key="Average inference pass"
      fi
      "$crema" time "${model[@]}" --threads "$threads" --iterations 2 --seconds "$seconds" \
        >"$case_log.crema" 2>"$case_log.crema.err"
      c_ms=$(sed -n "s/^$key .*: \([0-9.]*\) ms = .*/\1/p" "$case_log.crema")
      k_ms=$(caffe_ms "$mode" "$net" 2 "$case_log.caffe")
      if [ -n "$k_ms" ]; then
        iterations=$(awk -v t="$k_ms" -v s="$seconds" \
          'BEGIN { n = int(s * 1000 / t + 0.999); print n < 2 ? 2 : n }')
        k_ms=$(caffe_ms "$mode" "$net" "$iterations" "$case_log.caffe")
      fi
      ratio=n/a
      [ -n "$c_ms" ] && [ -n "$k_ms" ] &&
        ratio=$(awk -v c="$c_ms" -v k="$k_ms" 'BEGIN { printf "%.2f", k / c }')
      printf "%-24s %-5s %7s %12s %12s %7s\n" "$net" "$mode" "$threads" "${c_ms:-error}" \
        "${k_ms:-error}" "$ratio"
      [ -z "$c_ms" ] && tail -3 "$case_log.crema.err" | sed 's/^/    crema: /'
      [ -z "$k_ms" ] && tail -3 "$case_log.caffe" | sed 's/^/    caffe: /'
    done
  done
done
echo "# took $(($(date +%s) - start)) s; load average now $(cut -d' ' -f1-3 /proc/loadavg)"
