#!/usr/bin/env bash
# Multi-process scaling on the CPU: LeNet (the models/lenet structure, batch 64 per process,
# constant DummyData so that the data path costs nothing) trained by `crema train` in one process
# and by two processes, each with one thread (OMP_NUM_THREADS=1): under `mpirun -np 2` (MPI), and
# started torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: the TCP transport), each
# with the gradient all-reduce overlapped with backward (the default) and after it
# (--overlap_allreduce=false). Reports images/s (global: processes x batch x iterations/s, from
# rank 0's "Iteration N (X iter/s" lines after the first) and the scaling efficiency
# images/s(2) / (2 x images/s(1)).
#
#   bench/mpi_bench.sh            (BENCH_ITERS=200 iterations a run; CREMA=build/crema)
#   Without mpirun, the MPI rows are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
crema="$(realpath "${CREMA:-build/crema}")"
iters="${BENCH_ITERS:-200}"
have_mpi=1
command -v mpirun >/dev/null || { echo "mpirun not found: MPI rows left out"; have_mpi=0; }
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
train() { "$crema" train --solver "$work/solver.prototxt" --alsologtostderr --progress=off "$@"; }
train >"$work/one.log" 2>&1
r1=$(rate "$work/one.log")
echo "machine: $cores cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average before: $load"
printf "%-34s %10s %10s %10s\n" "run" "iter/s" "images/s" "efficiency"
row() { awk -v name="$1" -v n="$2" -v r="$3" -v r1="$r1" 'BEGIN {
  printf "%-34s %10.2f %10.1f %10.2f\n", name, r, r * 64 * n, (r * 64 * n) / (n * r1 * 64) }'; }
row "1 process" 1 "$r1"
for overlap in true false; do
  if [ "$have_mpi" = 1 ]; then
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
      "$crema" train --solver "$work/solver.prototxt" --alsologtostderr --progress=off \
      --overlap_allreduce=$overlap >"$work/mpi.log" 2>&1
    row "2 ranks, MPI, overlap $overlap" 2 "$(rate "$work/mpi.log")"
  fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for rank in 1 0; do
    env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$crema" train --solver "$work/solver.prototxt" --alsologtostderr --progress=off \
      --overlap_allreduce=$overlap >"$work/tcp$rank.log" 2>&1 &
  done
  wait
  row "2 ranks, TCP, overlap $overlap" 2 "$(rate "$work/tcp0.log")"
done
