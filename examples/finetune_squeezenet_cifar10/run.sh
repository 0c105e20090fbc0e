#!/usr/bin/env bash
# Fine-tuning worked example: SqueezeNet v1.0 pre-trained on ImageNet -> CIFAR-10 on the CPU.
# The CIFAR-10 JPEGs are upscaled to SIZE x SIZE (default 64; SqueezeNet is fully convolutional
# up to its global pooling), conv_final gets 10 outputs (--set ...num_output=10) and
# --skip-mismatched leaves it at its fillers while every other layer is copied from the
# ImageNet weights. The same net trained from scratch for the same iterations is the baseline.
# Prints both test accuracies (on TEST_IMAGES of the 10,000 test images, every 10,000/N-th).
#
# usage: examples/finetune_squeezenet_cifar10/run.sh SQUEEZENET_DIR CIFAR_JPEGS [--crema PATH]
#   SQUEEZENET_DIR: holds SqueezeNet_trainval.prototxt and squeezenet_v1.0*.caffemodel (the
#     Deep Compression release decoded to a dense .caffemodel, BSD-2)
#   CIFAR_JPEGS: a folder or .tar.gz with train/ and test/ class folders and train.txt, test.txt
#   env: ITERS (default 300), SIZE (64), TEST_IMAGES (2000), BASE_LR (0.001)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

usage() {
  sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[[ $# -eq 2 || $# -eq 4 ]] || usage
squeeze="$(cd "$1" && pwd)"
jpegs_arg="$2"
crema=""
if [[ $# -eq 4 ]]; then
  [[ "$3" == "--crema" ]] || usage
  crema="$4"
fi
[[ -d "$jpegs_arg" ]] && jpegs_arg="$(cd "$jpegs_arg" && pwd)"
[[ -f "$jpegs_arg" ]] && jpegs_arg="$(cd "$(dirname "$jpegs_arg")" && pwd)/$(basename "$jpegs_arg")"
cd "$root"
source "$root/scripts/find_crema.sh"
crema="$(find_crema "$root" "$crema")"
iters="${ITERS:-300}"
size="${SIZE:-64}"
test_images="${TEST_IMAGES:-2000}"
base_lr="${BASE_LR:-0.001}"
python="${PYTHON:-/usr/bin/python3}"

net_in="$squeeze/SqueezeNet_trainval.prototxt"
weights="$(ls "$squeeze"/squeezenet_v1.0*.caffemodel 2>/dev/null | head -1 || true)"
if [[ ! -f "$net_in" || -z "$weights" ]]; then
  echo "error: $squeeze lacks SqueezeNet_trainval.prototxt or squeezenet_v1.0*.caffemodel" >&2
  exit 1
fi

d=examples/finetune_squeezenet_cifar10/data
runs=examples/finetune_squeezenet_cifar10/runs
mkdir -p "$d" "$runs"

# 1. The JPEGs (reusing models/train_own.sh's extraction when it is there).
if [[ -d "$jpegs_arg" ]]; then
  jpegs="$jpegs_arg"
elif [[ -f "$jpegs_arg" ]]; then
  jpegs=data/cifar10/cifar10_jpeg
  if [[ ! -f "$jpegs/test.txt" ]]; then
    rm -rf "$jpegs.tmp"
    mkdir -p "$jpegs.tmp"
    tar -xzf "$jpegs_arg" -C "$jpegs.tmp"
    mv "$jpegs.tmp" "$jpegs"
  fi
else
  echo "error: '$jpegs_arg' is neither a folder nor a tarball" >&2
  exit 1
fi
[[ -f "$jpegs/train.txt" && -f "$jpegs/test.txt" ]] || {
  echo "error: $jpegs has no train.txt / test.txt" >&2
  exit 1
}

# 2. LMDBs of upscaled images (BGR, as Caffe decodes JPEGs, like the ImageNet weights expect).
step=$((10000 / test_images))
[[ $step -ge 1 ]] || step=1
convert() {  # list db [flags]
  local list="$1" db="$2"
  shift 2
  if [[ -d "$db" ]]; then
    echo "$db exists, kept"
    return
  fi
  rm -rf "$db.tmp"
  "$crema" convert-imageset "$jpegs/" "$list" "$db.tmp" --resize_width "$size" \
    --resize_height "$size" --backend lmdb "$@"
  mv "$db.tmp" "$db"
}
awk -v step="$step" '(NR - 1) % step == 0' "$jpegs/test.txt" > "$d/test_subset.txt"
test_count="$(wc -l < "$d/test_subset.txt")"
convert "$jpegs/train.txt" "$d/cifar10_${size}_train_lmdb" --shuffle
convert "$d/test_subset.txt" "$d/cifar10_${size}_test${test_count}_lmdb"

# 3. The train/test net: SqueezeNet's own, with the data layers pointed at the LMDBs, no
# 227 crop, batch 32 / 100 (generated, since the prototxt is not part of crema).
net="$runs/squeezenet_cifar10_train_val.prototxt"
"$python" - "$net_in" "$net" "$d/cifar10_${size}_train_lmdb" \
  "$d/cifar10_${size}_test${test_count}_lmdb" <<'EOF'
import re, sys
src, dst, train_db, test_db = sys.argv[1:]
text = open(src).read()
sources = iter([train_db, test_db])
text = re.sub(r'source:\s*"[^"]*"', lambda m: 'source: "%s"' % next(sources), text)
text = re.sub(r'\n\s*crop_size:\s*\d+', '', text)
sizes = iter([32, 100])
text = re.sub(r'batch_size:\s*\d+', lambda m: 'batch_size: %d' % next(sizes), text, count=2)
open(dst, 'w').write(text)
EOF
solver="$runs/solver.prototxt"
cat > "$solver" <<EOF
net: "$net"
test_iter: $(((test_count + 99) / 100))
test_interval: $iters
test_initialization: false
base_lr: $base_lr
lr_policy: "poly"
power: 1.0
momentum: 0.9
weight_decay: 0.0002
display: 20
max_iter: $iters
snapshot: $iters
snapshot_prefix: "$runs/run"
solver_mode: CPU
random_seed: 1701
EOF

declare -A accuracy
train() {  # name [flags...]
  local name="$1"
  shift
  local cmd=("$crema" train --solver "$solver" --progress off
             --set net.conv_final.convolution_param.num_output=10
             --set snapshot_prefix="$runs/$name" "$@")
  echo "+ ${cmd[*]}"
  "${cmd[@]}" > "$runs/$name.out" 2> "$runs/$name.log" || {
    tail -20 "$runs/$name.log" >&2
    exit 1
  }
  accuracy[$name]="$(awk -F' = ' '$1 == "Test net #0: accuracy_top1" { a = $2 } END { print a }' \
                     "$runs/$name.out")"
  echo "  $name: top-1 test accuracy ${accuracy[$name]}"
}
train finetune --weights "$weights" --skip-mismatched
train scratch

echo
echo "CIFAR-10 at ${size}x${size}, $iters iterations of batch 32, base_lr $base_lr (poly);" \
     "test: $test_count images"
printf '%-10s %s\n' run "top-1 test accuracy"
printf '%-10s %s\n' finetune "${accuracy[finetune]}" scratch "${accuracy[scratch]}"
