#!/usr/bin/env bash
# CPU throughput, crema vs PyTorch on the same machine in one run: training (forward, backward,
# SGD update with momentum 0.9 and weight decay 5e-4) and inference (phase TEST / eval mode,
# forward only) in images/s, with 1 and 2 threads, and the peak resident memory of each case.
# Nets (bench/nets.py --cpu, the published Caffe structures fed by constant DummyData): lenet
# (batch 64), cifar10_quick (100), bvlc_reference_caffenet (16), bvlc_googlenet (8),
# squeezenet_v1.1 (16), mobilenet_v1 (16), resnet50 (8). PyTorch builds the same nets from the
# same prototxts (bench/torch_train.py --device cpu).
#
# PyTorch is Debian's python3-torch (1.13, oneDNN convolutions, OpenBLAS for Linear) for the
# system interpreter: this script runs /usr/bin/python3 explicitly ($PYTHON overrides it); and,
# when bench/setup_bench.sh made it, the newest PyTorch from PyPI in .bench/venv ($PYPI_PYTHON
# overrides it; "none" skips it), in two more columns (the ratio against it is "ratio2").
# crema is build/crema ($CREMA overrides it), a Release build.
#
#   bench/cpu_bench.sh [NET ...]        (default: all seven)
#
# Environment:
#   BENCH_SECONDS=4          timed seconds per case (after the warm-up), each framework
#   BENCH_THREADS="1 2"      thread counts (OMP_NUM_THREADS, crema --threads, torch.set_num_threads)
#   BENCH_MODES="train test" which modes
#   BENCH_LAYER_ITERATIONS=2 crema's per-layer pass (also its warm-up)
#   BENCH_WARMUP=3           PyTorch's warm-up iterations
#   BENCH_LOG_DIR=DIR        keep every case's full output there (crema's per-layer tables)
#   BENCH_OMP_WAIT_POLICY=PASSIVE  OMP_WAIT_POLICY for both (both use libgomp); "" = libgomp's
#                            default (spin, then sleep). On a machine shared with other jobs the
#                            spinning threads of a 2-thread team steal the cores the working
#                            threads need: 2-thread cases ran 3-8x slower for both frameworks.
#   BENCH_OPENBLAS_CORETYPE  OPENBLAS_CORETYPE for both (both load OpenBLAS); unset by default so
#                            that OpenBLAS picks its kernels for this CPU (and crema its fix).
# Each case runs in its own process, so peak RSS (getrusage ru_maxrss) is per case; crema and
# PyTorch alternate case by case so that load from other processes hits both alike. The whole
# table (7 nets x 2 modes x 2 thread counts x 2 frameworks) takes about 8-10 minutes on 2 cores.
# crema restarts itself with a better OPENBLAS_CORETYPE when OpenBLAS picks generic kernels and
# the variable is unset; the last line says which kernels crema ran.
set -uo pipefail
cd "$(dirname "$0")/.."
crema="${CREMA:-build/crema}"
python="${PYTHON:-/usr/bin/python3}"
pypi_python="${PYPI_PYTHON:-.bench/venv/bin/python}"
[ -x "$pypi_python" ] || pypi_python=none
seconds="${BENCH_SECONDS:-4}"
threads_list="${BENCH_THREADS:-1 2}"
modes="${BENCH_MODES:-train test}"
layer_iters="${BENCH_LAYER_ITERATIONS:-2}"
warmup="${BENCH_WARMUP:-3}"
if [ -n "${BENCH_OPENBLAS_CORETYPE:-}" ]; then
  export OPENBLAS_CORETYPE="$BENCH_OPENBLAS_CORETYPE"
else
  unset OPENBLAS_CORETYPE
fi
wait_policy="${BENCH_OMP_WAIT_POLICY-PASSIVE}"
if [ -n "$wait_policy" ]; then export OMP_WAIT_POLICY="$wait_policy"; else unset OMP_WAIT_POLICY; fi
nets=("$@")
[ ${#nets[@]} -eq 0 ] && nets=(lenet cifar10_quick bvlc_reference_caffenet bvlc_googlenet
  squeezenet_v1.1 mobilenet_v1 resnet50)
dir="$(mktemp -d)"
logs="${BENCH_LOG_DIR:-$dir/logs}"
mkdir -p "$logs"
"$python" bench/nets.py "$dir" --cpu || exit 1
for net in "${nets[@]}"; do
  [ -f "$dir/$net.prototxt" ] || { echo "cpu_bench.sh: unknown net $net" >&2; exit 2; }
done

start=$(date +%s)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
  "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
pypi_version=none
[ "$pypi_python" != none ] &&
  pypi_version=$("$pypi_python" -c 'import torch; print(torch.__version__)' 2>/dev/null)
echo "# crema $(git rev-parse --short HEAD 2>/dev/null) ($crema), PyTorch" \
  "$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null) ($python), PyTorch" \
  "$pypi_version ($pypi_python; torch2), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}," \
  "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-default}, ${seconds}s per case"
printf "%-24s %-5s %7s %12s %12s %7s %12s %7s %10s %10s %10s\n" net mode threads "crema img/s" \
  "torch img/s" ratio "torch2 img/s" ratio2 "crema MiB" "torch MiB" "torch2 MiB"
for net in "${nets[@]}"; do
  for mode in $modes; do
    for threads in $threads_list; do
      case_log="$logs/$net.$mode.${threads}t"
      if [ "$mode" = train ]; then
        model=(--solver "$dir/$net.solver.prototxt")
      else
        model=(--model "$dir/$net.prototxt" --phase TEST)
      fi
      OMP_NUM_THREADS="$threads" "$crema" time "${model[@]}" --threads "$threads" \
        --iterations "$layer_iters" --seconds "$seconds" >"$case_log.crema" 2>"$case_log.crema.err"
      c_ips=$(sed -n 's/.*= \([0-9.]*\) images\/s.*/\1/p' "$case_log.crema")
      c_mib=$(sed -n 's/^Peak resident memory: \([0-9.]*\) MiB.*/\1/p' "$case_log.crema")
      OMP_NUM_THREADS="$threads" "$python" bench/torch_train.py "$dir/$net.prototxt" --device cpu \
        --threads "$threads" --mode "$mode" --momentum 0.9 --weight_decay 0.0005 \
        --warmup "$warmup" --iterations 1 --seconds "$seconds" >"$case_log.torch" 2>&1
      t_ips=$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' "$case_log.torch")
      t_mib=$(sed -n 's/.*peak_mib=\([0-9.]*\).*/\1/p' "$case_log.torch")
      p_ips="" p_mib=""
      if [ "$pypi_python" != none ]; then
        OMP_NUM_THREADS="$threads" "$pypi_python" bench/torch_train.py "$dir/$net.prototxt" \
          --device cpu --threads "$threads" --mode "$mode" --momentum 0.9 --weight_decay 0.0005 \
          --warmup "$warmup" --iterations 1 --seconds "$seconds" >"$case_log.torch2" 2>&1
        p_ips=$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' "$case_log.torch2")
        p_mib=$(sed -n 's/.*peak_mib=\([0-9.]*\).*/\1/p' "$case_log.torch2")
      fi
      ratio=n/a ratio2=n/a
      [ -n "$c_ips" ] && [ -n "$t_ips" ] &&
        ratio=$(awk -v c="$c_ips" -v t="$t_ips" 'BEGIN { printf "%.2f", c / t }')
      [ -n "$c_ips" ] && [ -n "$p_ips" ] &&
        ratio2=$(awk -v c="$c_ips" -v t="$p_ips" 'BEGIN { printf "%.2f", c / t }')
      printf "%-24s %-5s %7s %12s %12s %7s %12s %7s %10s %10s %10s\n" "$net" "$mode" "$threads" \
        "${c_ips:-error}" "${t_ips:-error}" "$ratio" "${p_ips:--}" "$ratio2" "${c_mib:-?}" \
        "${t_mib:-?}" "${p_mib:--}"
      [ -z "$c_ips" ] && tail -3 "$case_log.crema.err" | sed 's/^/    crema: /'
      [ -z "$t_ips" ] && tail -3 "$case_log.torch" | sed 's/^/    torch: /'
      [ "$pypi_python" != none ] && [ -z "$p_ips" ] && tail -3 "$case_log.torch2" |
        sed 's/^/    torch2: /'
    done
  done
done
kernels=$(sed -n 's/.*OpenBLAS, \(.*\) kernels.*/\1/p' "$logs"/*.crema 2>/dev/null | sort -u | tr '\n' ' ')
echo "# crema's OpenBLAS kernels: ${kernels:-?}; took $(($(date +%s) - start)) s;" \
  "load average now $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$dir"
