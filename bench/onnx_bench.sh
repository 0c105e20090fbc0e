#!/usr/bin/env bash
# CPU inference, crema vs onnxruntime on the same machine in one run: each zoo deploy net is
# exported by crema's own `export-onnx` and the two run the same model, batch 1 and 8, with 1 and
# 2 threads, in images/s (forward only; crema as `crema time --phase TEST`, which folds BatchNorm
# by default, onnxruntime with all graph optimisations, intra-op threads = threads, sequential).
# Nets: models/{resnet50,mobilenet_v1,bvlc_googlenet,squeezenet_v1.1}/deploy.prototxt with their
# fillers' weights (zeros where none is given: the arithmetic is the same as with trained ones).
#
#   bench/onnx_bench.sh [NET ...]
#
# Needs onnxruntime in .bench/venv (bench/setup_bench.sh; $ORT_PYTHON overrides the interpreter)
# and crema's Python module in build/python for Debian's /usr/bin/python3 (to write the weights).
# Each case alternates the two runtimes BENCH_ROUNDS times and reports each one's best round:
# this machine's speed drifts by 5-10% within minutes (other tenants, clock), and a case run once
# per runtime compares two moments as much as two runtimes.
# Environment: BENCH_SECONDS=2 (timed seconds per round), BENCH_ROUNDS=3, BENCH_THREADS="1 2",
# BENCH_BATCHES="1 8",
# CREMA=build/crema, BENCH_OMP_WAIT_POLICY (unset by default: each runtime waits as it does for a
# user, libgomp's spin-then-sleep for crema, onnxruntime's own spinning pool, which ignores
# OMP_WAIT_POLICY; PASSIVE, as bench/cpu_bench.sh sets for its two libgomp users, would put
# crema's threads to sleep between layers while onnxruntime's spin).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
crema="${CREMA:-build/crema}"
ort_python="${ORT_PYTHON:-.bench/venv/bin/python}"
seconds="${BENCH_SECONDS:-2}"
rounds="${BENCH_ROUNDS:-3}"
threads_list="${BENCH_THREADS:-1 2}"
batches="${BENCH_BATCHES:-1 8}"
wait_policy="${BENCH_OMP_WAIT_POLICY-}"
if [ -n "$wait_policy" ]; then export OMP_WAIT_POLICY="$wait_policy"; else unset OMP_WAIT_POLICY; fi
"$ort_python" -c 'import onnxruntime' 2>/dev/null || {
  echo "onnx_bench.sh: no onnxruntime for $ort_python (run bench/setup_bench.sh)" >&2
  exit 2
}
nets=("$@")
[ ${#nets[@]} -eq 0 ] && nets=(resnet50 mobilenet_v1 bvlc_googlenet squeezenet_v1.1)
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

# The deploy net at `batch` (its Input's first dim), its weights, and crema's ONNX export of it.
prepare() {
  local net=$1 batch=$2 out=$dir/$1.b$2
  /usr/bin/python3 - "$root/models/$net/deploy.prototxt" "$batch" "$out.prototxt" <<'EOF' || return 1
import re, sys
text = open(sys.argv[1]).read()
# The first dim of the first Input shape is the batch.
text = re.sub(r"(input_param\s*\{\s*shape\s*\{\s*dim:\s*)\d+", r"\g<1>" + sys.argv[2], text, count=1)
open(sys.argv[3], "w").write(text)
EOF
  PYTHONPATH="$root/build/python" GLOG_minloglevel=2 /usr/bin/python3 -c \
    "import crema, sys; crema.Net(sys.argv[1], phase=crema.TEST).save(sys.argv[2])" \
    "$out.prototxt" "$out.caffemodel" || return 1
  "$crema" export-onnx --model "$out.prototxt" --weights "$out.caffemodel" --out "$out.onnx" \
    >"$out.export.log" 2>&1 || { tail -3 "$out.export.log" >&2; return 1; }
}

# The larger of two images/s figures, either of which may be empty (a failed run).
best() {
  if [ -z "$1" ]; then echo "$2"; elif [ -z "$2" ]; then echo "$1"; else
    awk -v a="$1" -v b="$2" 'BEGIN { print (b > a ? b : a) }'
  fi
}

cat >"$dir/ort_time.py" <<'EOF'
# images/s of one ONNX model on onnxruntime's CPU provider: warm-up, then whole runs for `seconds`.
import sys, time
import numpy as np
import onnxruntime as ort
path, threads, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
options = ort.SessionOptions()
options.intra_op_num_threads = threads
options.inter_op_num_threads = 1
options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
feed = {}
for i in session.get_inputs():
    feed[i.name] = np.random.default_rng(0).standard_normal(i.shape).astype(np.float32)
batch = session.get_inputs()[0].shape[0]
for _ in range(3):
    session.run(None, feed)
runs, start = 0, time.perf_counter()
while runs < 2 or time.perf_counter() - start < seconds:
    session.run(None, feed)
    runs += 1
print("images_per_s=%.2f" % (runs * batch / (time.perf_counter() - start)))
EOF

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
  "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# crema $(git rev-parse --short HEAD 2>/dev/null) ($crema), onnxruntime" \
  "$("$ort_python" -c 'import onnxruntime; print(onnxruntime.__version__)') ($ort_python)," \
  "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-default}, the best of $rounds alternating rounds of ${seconds}s"
printf "%-18s %5s %7s %12s %12s %7s\n" net batch threads "crema img/s" "ort img/s" ratio
for net in "${nets[@]}"; do
  [ -f "models/$net/deploy.prototxt" ] || { echo "onnx_bench.sh: no models/$net" >&2; exit 2; }
  for batch in $batches; do
    prepare "$net" "$batch" || { echo "onnx_bench.sh: could not prepare $net" >&2; continue; }
    model=$dir/$net.b$batch
    for threads in $threads_list; do
      c_ips="" o_ips=""
      for ((round = 0; round < rounds; ++round)); do
        OMP_NUM_THREADS="$threads" "$crema" time --model "$model.prototxt" --phase TEST \
          --threads "$threads" --iterations 2 --seconds "$seconds" >"$model.$threads.crema" 2>&1
        c_ips=$(best "$c_ips" "$(sed -n 's/.*= \([0-9.]*\) images\/s.*/\1/p' "$model.$threads.crema")")
        OMP_NUM_THREADS="$threads" "$ort_python" "$dir/ort_time.py" "$model.onnx" "$threads" \
          "$seconds" >"$model.$threads.ort" 2>&1
        o_ips=$(best "$o_ips" "$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' "$model.$threads.ort")")
      done
      ratio=n/a
      [ -n "$c_ips" ] && [ -n "$o_ips" ] &&
        ratio=$(awk -v c="$c_ips" -v o="$o_ips" 'BEGIN { printf "%.2f", c / o }')
      printf "%-18s %5s %7s %12s %12s %7s\n" "$net" "$batch" "$threads" "${c_ips:-error}" \
        "${o_ips:-error}" "$ratio"
      [ -z "$c_ips" ] && tail -3 "$model.$threads.crema" | sed 's/^/    crema: /'
      [ -z "$o_ips" ] && tail -3 "$model.$threads.ort" | sed 's/^/    ort: /'
    done
  done
done
