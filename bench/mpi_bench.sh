#!/usr/bin/env bash
# Multi-process (MPI) scaling on the CPU: LeNet (the models/lenet structure, batch 64 per process,
# constant DummyData so that the data path costs nothing) trained by `crema train` in one process
# and by `mpirun -np 2 crema train`, each process with one thread (OMP_NUM_THREADS=1). Reports
# images/s (global: processes x batch x iterations/s, from rank 0's "Iteration N (X iter/s"
# lines after the first) and the scaling efficiency images/s(2) / (2 x images/s(1)).
#
#   bench/mpi_bench.sh            (BENCH_ITERS=200 iterations a run; CREMA=build/crema)
set -euo pipefail
cd "$(dirname "$0")/.."
crema="$(realpath "${CREMA:-build/crema}")"
iters="${BENCH_ITERS:-200}"
command -v mpirun >/dev/null || { echo "mpirun not found (apt-get install openmpi-bin)"; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/net.prototxt" <<'NET'
name: "LeNet"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 64 dim: 1 dim: 28 dim: 28 } shape { dim: 64 }
    data_filler { type: "constant" value: 0.5 } data_filler { type: "constant" value: 3 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 20 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 50 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1"
  inner_product_param { num_output: 500 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
NET
cat >"$work/solver.prototxt" <<SOLVER
net: "$work/net.prototxt"
type: "SGD" base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 lr_policy: "fixed"
display: 20 max_iter: $iters snapshot_after_train: false solver_mode: CPU
SOLVER
cores="$(nproc --all)"  # before OMP_NUM_THREADS, which nproc obeys
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
# Ranks waiting in a collective yield the core instead of spinning (matters when cores are shared).
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1
# Mean iterations/s over rank 0's display lines after the first (the warm-up).
rate() { grep -o 'Iteration [0-9]* ([0-9.e+-]* iter/s' "$1" | awk '{gsub(/\(/,"",$3); if (NR > 1) {s += $3; n++}} END {printf "%.3f", s / n}'; }
load="$(cut -d' ' -f1-3 /proc/loadavg)"
"$crema" train --solver "$work/solver.prototxt" --alsologtostderr --progress=off >"$work/one.log" 2>&1
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  "$crema" train --solver "$work/solver.prototxt" --alsologtostderr --progress=off >"$work/two.log" 2>&1
r1=$(rate "$work/one.log")
r2=$(rate "$work/two.log")
echo "machine: $cores cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average before: $load"
awk -v r1="$r1" -v r2="$r2" 'BEGIN {
  printf "%-12s %10s %10s %10s\n", "processes", "iter/s", "images/s", "efficiency";
  printf "%-12d %10.2f %10.1f %10s\n", 1, r1, r1 * 64, "1.00";
  printf "%-12d %10.2f %10.1f %10.2f\n", 2, r2, r2 * 128, (r2 * 128) / (2 * r1 * 64) }'
