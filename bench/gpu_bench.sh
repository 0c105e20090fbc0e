#!/usr/bin/env bash
# GPU training throughput, crema vs PyTorch on the same GPU in one run: AlexNet (batch 128),
# VGG-19, ResNet-50, MobileNet v1, GoogLeNet (batch 64), forward + backward + update, fp32 and
# tf32. Nets come from bench/nets.py; PyTorch builds the same nets from the same prototxts
# (bench/torch_train.py, cudnn.benchmark on). Needs a CUDA build of crema ($CREMA, default
# build-gpu/crema) and a python3 with PyTorch.
#   bench/gpu_bench.sh [NET ...]        (default: all five)
# Prints the table (images/s, ratio, peak memory of each framework's allocator), then where
# crema's step goes: the per-layer-type split of `crema time` (forward + backward, each layer
# timed alone) for each net and math. CREMA_BENCH_LOGS=DIR keeps crema's and PyTorch's logs.
set -uo pipefail
cd "$(dirname "$0")/.."
crema="${CREMA:-build-gpu/crema}"
iters="${BENCH_ITERATIONS:-20}"
nets=("$@")
[ ${#nets[@]} -eq 0 ] && nets=(alexnet vgg19 resnet50 mobilenet_v1 googlenet)
dir="$(mktemp -d)"
logs="${CREMA_BENCH_LOGS:-$dir/logs}"
mkdir -p "$logs"
python3 bench/nets.py "$dir"
printf "%-13s %-5s %14s %14s %8s %11s %11s %8s\n" net math "crema img/s" "torch img/s" ratio \
  "crema MiB" "torch MiB" "mem ratio"
for net in "${nets[@]}"; do
  for math in fp32 tf32; do
    c_out=$("$crema" time --model "$dir/$net.prototxt" --gpu 0 --math "$math" \
      --iterations "$iters" 2>"$logs/$net.$math.crema.log")
    printf '%s\n' "$c_out" >"$logs/$net.$math.crema.txt"
    c_ips=$(sed -n 's/.*= \([0-9.]*\) images\/s.*/\1/p' <<<"$c_out")
    c_mib=$(sed -n 's/^Peak GPU memory held by crema.s allocator: \([0-9.]*\) MiB.*/\1/p' <<<"$c_out")
    t_out=$(python3 bench/torch_train.py "$dir/$net.prototxt" --iterations "$iters" --math "$math" 2>&1)
    printf '%s\n' "$t_out" >"$logs/$net.$math.torch.log"
    t_ips=$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' <<<"$t_out")
    t_mib=$(sed -n 's/.*peak_mib=\([0-9.]*\).*/\1/p' <<<"$t_out")
    ratio=$(python3 -c "print(f'{float(\"${c_ips:-0}\") / float(\"${t_ips:-0}\"):.2f}' if '${t_ips}' and '${c_ips}' else 'n/a')")
    mem=$(python3 -c "print(f'{float(\"${c_mib:-0}\") / float(\"${t_mib:-0}\"):.2f}' if '${t_mib}' and '${c_mib}' else 'n/a')")
    printf "%-13s %-5s %14s %14s %8s %11s %11s %8s\n" "$net" "$math" "${c_ips:-error}" \
      "${t_ips:-error}" "$ratio" "${c_mib:-?}" "${t_mib:-?}" "$mem"
    [ -z "$c_ips" ] && tail -3 "$logs/$net.$math.crema.log" | sed 's/^/    crema: /'
    [ -z "$t_ips" ] && tail -3 <<<"$t_out" | sed 's/^/    torch: /'
  done
done
echo
echo "Where crema's step goes (crema time: each layer timed alone, ms per iteration):"
for net in "${nets[@]}"; do
  for math in fp32 tf32; do
    f="$logs/$net.$math.crema.txt"
    [ -f "$f" ] || continue
    echo "$net $math:"
    sed -n '/^Time per layer type:/,/^Average Forward pass/p' "$f" | sed '1d;$d' | head -12
  done
done
rm -rf "$dir"
