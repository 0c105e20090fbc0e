#!/usr/bin/env bash
# Data-layer throughput, crema vs PyTorch in one run, on the CPU:
#   1. an LMDB of encoded JPEGs, 256x256, made by `crema convert-imageset --encoded` from the
#      CIFAR-10 JPEGs of ../shared/reference/real/datasets/cifar10 (upscaled), or from synthetic
#      images when that folder is absent;
#   2. crema's Data layer reading it in TRAIN phase (random 227 crop, mirror, per-channel
#      mean_value, batch 64), timed by `crema time` on a net holding only the Data layer, with
#      decode_threads at its default (0: auto) and at 2, and prefetch at its default (4);
#   3. a PyTorch DataLoader (num_workers 2) doing the same to the same records
#      (bench/torch_data.py, run with Debian's /usr/bin/python3, which has torch, lmdb, cv2);
#   4. whether training waits for data: `crema time` on LeNet (Fashion-MNIST LMDB) and on
#      CIFAR-10 quick (an LMDB of the 32x32 CIFAR-10 JPEGs, mean file) reports the time the Data
#      layers' Forward spent waiting for the prefetch thread during its training iterations.
# Usage: bench/data_bench.sh   (env: CREMA=build/crema, BENCH_IMAGES=5000, BENCH_BATCHES=60,
#        BENCH_REFERENCE=../shared/reference,
#        BENCH_KEEP=1 keeps the work folder)
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
crema="$(realpath "${CREMA:-build/crema}")"
python=/usr/bin/python3  # Debian's interpreter: the one with torch, lmdb, cv2 and numpy
images="${BENCH_IMAGES:-5000}"
batches="${BENCH_BATCHES:-60}"
shared="${BENCH_REFERENCE:-$root/../shared/reference}"
# The thread environment crema users run with (the defaults, spelled out): crema links Debian's
# OpenMP OpenBLAS, so OMP_NUM_THREADS sizes both the GEMMs and crema's own loops (all cores);
# OPENBLAS_CORETYPE is left to crema, which restarts itself with the right one when OpenBLAS
# picks generic kernels. The Data layer's threads are its own: one prefetch thread plus
# data_param.decode_threads (0: half the cores). PyTorch's workers are single-threaded processes.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-$(nproc)}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
export GLOG_minloglevel="${GLOG_minloglevel:-1}"

[ -x "$crema" ] || { echo "no crema at $crema (build it, or set CREMA)" >&2; exit 1; }
work="$(mktemp -d)"
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1);" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%dT%H:%MZ)"

# ---- the images ----
tarball="$shared/real/datasets/cifar10/cifar10_jpeg_train_test.tar.gz"
if [ -f "$tarball" ]; then
  source_desc="CIFAR-10 JPEGs (32x32) upscaled to 256x256"
  tar xzf "$tarball" -C "$work" train.txt test.txt
  # Every k-th image, so that all ten classes are in.
  awk -v k=$((50000 / images > 0 ? 50000 / images : 1)) 'NR % k == 1 || k == 1' \
    "$work/train.txt" | head -n "$images" >"$work/big.txt"
  cut -d' ' -f1 "$work/big.txt" >"$work/members.txt"
  cut -d' ' -f1 "$work/test.txt" >>"$work/members.txt"
  tar xzf "$tarball" -C "$work" -T "$work/members.txt"
  cp "$work/test.txt" "$work/small.txt"
else
  source_desc="synthetic JPEGs (../shared absent)"
  "$python" - "$work" "$images" <<'EOF'
import os, sys, cv2, numpy as np
work, count = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
os.makedirs(f"{work}/synthetic", exist_ok=True)
with open(f"{work}/big.txt", "w") as big, open(f"{work}/small.txt", "w") as small:
    for i in range(count):
        # Smooth colour fields with some texture, compressible like photos.
        base = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
        image = cv2.resize(base, (32, 32), interpolation=cv2.INTER_CUBIC)
        image = np.clip(image + rng.normal(0, 12, image.shape), 0, 255).astype(np.uint8)
        cv2.imwrite(f"{work}/synthetic/{i:05d}.jpg", image)
        print(f"synthetic/{i:05d}.jpg {i % 10}", file=big)
        if i < 2000:
            print(f"synthetic/{i:05d}.jpg {i % 10}", file=small)
EOF
fi
echo "images: $source_desc"
t0=$(date +%s.%N)
"$crema" convert-imageset "$work/" "$work/big.txt" "$work/jpeg256_lmdb" --backend lmdb \
  --resize_height 256 --resize_width 256 --encoded --encode_type jpg >"$work/convert.log" 2>&1 ||
  { cat "$work/convert.log"; exit 1; }
t1=$(date +%s.%N)
echo "$(tail -1 "$work/convert.log") in $(printf %.1f "$(echo "$t1 - $t0" | bc)") s;" \
  "$(du -sh "$work/jpeg256_lmdb" | cut -f1)"

# ---- crema's Data layer alone ----
mean="104,117,123"
data_net() {  # $1: decode_threads
  cat <<EOF
name: "data_only"
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { crop_size: 227 mirror: true mean_value: 104 mean_value: 117 mean_value: 123 }
  data_param { source: "$work/jpeg256_lmdb" batch_size: 64 backend: LMDB decode_threads: $1 } }
EOF
}
crema_ips() {  # $1: decode_threads; prints images/s of the training iterations
  data_net "$1" >"$work/data_$1.prototxt"
  "$crema" time --model "$work/data_$1.prototxt" --iterations "$batches" 2>"$work/time_$1.log" |
    sed -n 's/.*= \([0-9.]*\) images\/s.*/\1/p'
}
torch_ips() {
  "$python" bench/torch_data.py "$work/jpeg256_lmdb" --batch 64 --crop 227 --mean "$mean" \
    --workers 2 --batches "$batches" 2>"$work/torch.log" |
    sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p'
}
data_net 0 >"$work/auto.prototxt"
GLOG_minloglevel=0 "$crema" time --model "$work/auto.prototxt" --iterations 1 >/dev/null \
  2>"$work/auto.log"
auto_threads=$(sed -n 's/.*, \([0-9]*\) decode threads.*/\1/p' "$work/auto.log" | head -1)
echo
echo "Data layer, TRAIN: 256x256 JPEG -> random 227 crop, mirror, mean_value; batch 64;" \
  "$batches batches after warm-up; prefetch 4 (default)"
printf "%-44s %12s %8s\n" "loader" "images/s" "vs torch"
t_ips=$(torch_ips)
c0_ips=$(crema_ips 0)
c2_ips=$(crema_ips 2)
ratio() {  # $1 / $2 as "1.23x", or n/a
  "$python" -c "import sys; a, b = sys.argv[1:]; print(f'{float(a) / float(b):.2f}x' if a and b else 'n/a')" \
    "$1" "$2"
}
printf "%-44s %12s %8s\n" "pytorch DataLoader, num_workers 2" "${t_ips:-error}" "1.00x"
printf "%-44s %12s %8s\n" "crema Data, decode_threads 0 (auto: ${auto_threads:-?})" \
  "${c0_ips:-error}" "$(ratio "$c0_ips" "$t_ips")"
printf "%-44s %12s %8s\n" "crema Data, decode_threads 2" "${c2_ips:-error}" \
  "$(ratio "$c2_ips" "$t_ips")"
[ -z "$t_ips" ] && tail -3 "$work/torch.log" | sed 's/^/    torch: /'
[ -z "$c0_ips" ] && tail -3 "$work/time_0.log" | sed 's/^/    crema: /'

# ---- does training wait for data? ----
echo
echo "Training on the CPU: time the Data layers waited for the prefetch thread" \
  "($batches iterations)"
fmnist="$shared/bvlc/fmnist_small/train_lmdb"
[ -d "$fmnist" ] || fmnist="$root/data/fashion_mnist/fashion_mnist_train_lmdb"
if [ -d "$fmnist" ]; then
  sed -e "s#data/fashion_mnist/fashion_mnist_train_lmdb#$fmnist#" \
    -e "s#data/fashion_mnist/fashion_mnist_test_lmdb#$fmnist#" \
    models/lenet/lenet_train_test.prototxt >"$work/lenet.prototxt"
  nets=(lenet)
else
  echo "  (no Fashion-MNIST LMDB: run data/fashion_mnist/get_fashion_mnist.sh; LeNet skipped)"
  nets=()
fi
if "$crema" convert-imageset "$work/" "$work/small.txt" "$work/cifar32_lmdb" --backend lmdb \
  >"$work/convert32.log" 2>&1 &&
  "$crema" compute-image-mean "$work/cifar32_lmdb" "$work/cifar_mean.binaryproto" \
    --backend lmdb >"$work/mean.log" 2>&1; then
  sed -e "s#@SOURCE@#$work/cifar32_lmdb#" -e "s#@MEAN@#$work/cifar_mean.binaryproto#" \
    bench/cifar10_quick_train.prototxt >"$work/cifar10_quick.prototxt"
  nets+=(cifar10_quick)
else
  cat "$work/convert32.log" "$work/mean.log" 2>/dev/null | tail -3
fi
printf "%-14s %10s %12s %16s %10s\n" net batch "iter ms" "waited ms" "share"
for net in "${nets[@]}"; do
  out=$("$crema" time --model "$work/$net.prototxt" --iterations "$batches" 2>"$work/$net.log")
  iter_ms=$(sed -n 's/^Average training iteration[^:]*: \([0-9.]*\) ms.*/\1/p' <<<"$out")
  batch=$(sed -n 's/.*(batch \([0-9]*\)).*/\1/p' <<<"$out")
  waited=$(sed -n 's/^Data layers waited for data: \([0-9.]*\) ms over \([0-9]*\) batches (\([0-9.]*%\).*/\1 \2 \3/p' \
    <<<"$out")
  read -r w_ms w_batches w_share <<<"$waited"
  printf "%-14s %10s %12s %16s %10s\n" "$net" "${batch:-?}" "${iter_ms:-error}" \
    "${w_ms:-?} / ${w_batches:-?} b" "${w_share:-?}"
  [ -z "$iter_ms" ] && tail -3 "$work/$net.log" | sed 's/^/    crema: /'
done
