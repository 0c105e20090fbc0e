#!/usr/bin/env bash
# GPU training throughput, crema vs PyTorch on the same GPU in one run: AlexNet (batch 128),
# VGG-19, ResNet-50, MobileNet v1, GoogLeNet (batch 64), forward + backward + update, fp32,
# tf32, and mixed precision fp16 and bf16 (crema --amp with --math tf32 against PyTorch's
# torch.autocast, GradScaler for fp16, channels-last). Nets come from bench/nets.py; PyTorch builds the same nets from the same prototxts
# (bench/torch_train.py, cudnn.benchmark on). Needs a CUDA build of crema ($CREMA, default
# build-gpu/crema) and a python3 with PyTorch.
#   bench/gpu_bench.sh [NET ...]        (default: all five; `none`: no big-batch table)
# Prints the table (images/s, ratio, peak memory of each framework's allocator), then where
# crema's step goes: the per-layer-type split of `crema time` (forward + backward, each layer
# timed alone) for each net and math. CREMA_BENCH_LOGS=DIR keeps crema's and PyTorch's logs.
#
# Then the small-batch rows, where launch overhead counts (whole-iteration CUDA graphs, issue
# 21): LeNet (batch 64), CIFAR-10 quick (100), MobileNet v1 (8), ResNet-50 (8) (nets.py --small),
# fp32. One `crema time` per net gives the iteration captured as one CUDA graph and uncaptured
# (its `CUDA graph: captured X ms, uncaptured Y ms per iteration` line), next to PyTorch eager
# and PyTorch with the whole step captured by torch.cuda.graph (torch_train.py --cuda-graph);
# images/s, crema graphs-on / PyTorch graphed and crema graphs-on / PyTorch eager. Where crema
# says `CUDA graph: off (REASON)`, its column reads `off` and the line follows the row.
#   CREMA_BENCH_SMALL="lenet resnet50" limits the rows, NAME=B sets a batch ("resnet50=16"),
#   CREMA_BENCH_SMALL=none skips them; BENCH_SMALL_ITERATIONS (default: BENCH_ITERATIONS, at
#   least 200) and BENCH_SMALL_MATH (fp32) set their iterations and math.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
crema="${CREMA:-build-gpu/crema}"
iters="${BENCH_ITERATIONS:-20}"
nets=("$@")
[ ${#nets[@]} -eq 0 ] && nets=(alexnet vgg19 resnet50 mobilenet_v1 googlenet)
[ "${nets[*]}" = none ] && nets=()
dir="$(mktemp -d)"
logs="${CREMA_BENCH_LOGS:-$dir/logs}"
mkdir -p "$logs"

# ratio A B: A / B with two decimals, n/a when either is empty.
ratio() {
  awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a";
    else printf "%.2f\n", a / b }'
}
# ips BATCH MS: images/s of an iteration of MS milliseconds.
ips() {
  awk -v b="$1" -v ms="$2" 'BEGIN { if (ms > 0) printf "%.1f\n", b * 1000 / ms }'
}

if [ ${#nets[@]} -gt 0 ]; then
  python3 bench/nets.py "$dir"
  printf "%-13s %-5s %14s %14s %8s %11s %11s %8s\n" net math "crema img/s" "torch img/s" ratio \
    "crema MiB" "torch MiB" "mem ratio"
  for net in "${nets[@]}"; do
    for math in fp32 tf32 fp16 bf16; do
      c_flags=(--math "$math")
      case "$math" in fp16 | bf16) c_flags=(--math tf32 --amp "$math") ;; esac
      c_out=$("$crema" time --model "$dir/$net.prototxt" --gpu 0 "${c_flags[@]}" \
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
fi

# Small batches: whole-iteration CUDA graphs.
small_spec="${CREMA_BENCH_SMALL:-lenet cifar10_quick mobilenet_v1 resnet50}"
if [ "$small_spec" != none ]; then
  small_iters="${BENCH_SMALL_ITERATIONS:-$((iters > 200 ? iters : 200))}"
  small_math="${BENCH_SMALL_MATH:-fp32}"
  read -r -a small <<<"$small_spec"
  batch_args=()
  for entry in "${small[@]}"; do
    [[ "$entry" == *=* ]] && batch_args+=(--batch "$entry")
  done
  if ! python3 bench/nets.py "$dir/small" --small "${batch_args[@]}" 2>"$logs/small.nets.log"; then
    sed 's/^/small batches: /' "$logs/small.nets.log"
    small=()
  fi
  [ ${#nets[@]} -gt 0 ] && echo
  echo "Small batches, the training iteration as one CUDA graph ($small_math, $small_iters" \
    "iterations, images/s):"
  echo "(on/graphed = crema graphs on / PyTorch graphed; on/eager = crema graphs on / PyTorch eager)"
  printf "%-13s %5s %15s %16s %13s %11s %10s %8s\n" net batch "crema graphs on" \
    "crema graphs off" "torch graphed" "torch eager" on/graphed on/eager
  for entry in "${small[@]}"; do
    net="${entry%%=*}"
    f="$dir/small/$net.prototxt"
    if [ ! -f "$f" ]; then
      echo "$net: not a small-batch net (nets.py --small: lenet cifar10_quick mobilenet_v1" \
        "resnet50; any net of nets.py as NAME=B)"
      continue
    fi
    log="$logs/small.$net.$small_math"
    batch=$(sed -n 's/.*dummy_data_param { shape { dim: \([0-9]*\).*/\1/p' "$f" 2>/dev/null)
    c_out=$("$crema" time --model "$f" --gpu 0 --math "$small_math" --iterations "$small_iters" \
      2>"$log.crema.log")
    printf '%s\n' "$c_out" >"$log.crema.txt"
    # The CUDA graph line, from stdout or from the log.
    g_line=$(cat "$log.crema.txt" "$log.crema.log" | grep -m1 '^CUDA graph: ')
    num='\([0-9.eE+-]*\)'
    c_ms=$(sed -n "s/^CUDA graph: captured $num ms, uncaptured $num ms per iteration.*/\\1 \\2/p" \
      <<<"$g_line")
    c_on="" c_off="" note=""
    if [ -n "$c_ms" ] && [ -n "$batch" ]; then
      read -r cap uncap <<<"$c_ms"
      c_on=$(ips "$batch" "$cap")
      c_off=$(ips "$batch" "$uncap")
    else
      # Graphs off (or a crema without the line): the iteration's images/s is the uncaptured one.
      c_off=$(sed -n 's/.*= \([0-9.]*\) images\/s.*/\1/p' <<<"$c_out")
      if [[ "$g_line" == "CUDA graph: off"* ]]; then
        note="$g_line"
      elif [ -n "$c_off" ]; then
        note="no 'CUDA graph:' line in crema time's output (a crema without whole-iteration"
        note+=" graphs?)"
      fi
    fi
    t_out=$(python3 bench/torch_train.py "$f" --iterations "$small_iters" --math "$small_math" 2>&1)
    printf '%s\n' "$t_out" >"$log.torch.log"
    t_eager=$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' <<<"$t_out")
    tg_out=$(python3 bench/torch_train.py "$f" --iterations "$small_iters" --math "$small_math" \
      --cuda-graph 2>&1)
    printf '%s\n' "$tg_out" >"$log.torch-graph.log"
    t_graph=$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' <<<"$tg_out")
    if [ -n "$c_on" ]; then
      on_col="$c_on"
    elif [ -n "$c_off" ]; then
      on_col=off
    else
      on_col=error
    fi
    printf "%-13s %5s %15s %16s %13s %11s %10s %8s\n" "$net" "${batch:-?}" "$on_col" \
      "${c_off:-error}" "${t_graph:-error}" "${t_eager:-error}" "$(ratio "$c_on" "$t_graph")" \
      "$(ratio "$c_on" "$t_eager")"
    [ -n "$note" ] && printf '    crema: %s\n' "$note"
    [ -z "$c_off" ] && tail -3 "$log.crema.log" | sed 's/^/    crema: /'
    [ -z "$t_graph" ] && tail -3 <<<"$tg_out" | sed 's/^/    torch graphed: /'
    [ -z "$t_eager" ] && tail -3 <<<"$t_out" | sed 's/^/    torch eager: /'
  done
fi
rm -rf "$dir"
