#!/usr/bin/env bash
# Fine-tuning worked example: LeNet pre-trained on Fashion-MNIST classes 0-4 (T-shirt, trouser,
# pullover, dress, coat), then trained on a few samples of classes 5-9 (sandal, shirt, sneaker,
# bag, ankle boot; relabelled 0..4) from scratch and from the pre-trained weights, with and
# without frozen convolutions. Prints a table of the test accuracies on the 5,000 test images of
# classes 5-9. Every run uses the solver's random_seed, so the numbers repeat.
#
# usage: examples/finetune_fmnist/run.sh [--crema PATH]
#   env: PRETRAIN_ITERS (default 1000), FT_ITERS (200), SAMPLES (500 training images of 5-9)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

crema=""
if [[ "${1:-}" == "--crema" && $# -eq 2 ]]; then
  crema="$2"
elif [[ $# -ne 0 ]]; then
  sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
source "$root/scripts/find_crema.sh"
crema="$(find_crema "$root" "$crema")"
pretrain_iters="${PRETRAIN_ITERS:-1000}"
ft_iters="${FT_ITERS:-200}"
samples="${SAMPLES:-500}"
python="${PYTHON:-/usr/bin/python3}"

data/fashion_mnist/get_fashion_mnist.sh "$crema"
fm=data/fashion_mnist
d=examples/finetune_fmnist/data
runs=examples/finetune_fmnist/runs
mkdir -p "$d" "$runs"

subset() {  # src dst classes max
  if [[ -d "$2" ]]; then
    echo "$2 exists, kept"
    return
  fi
  rm -rf "$2.tmp"
  "$python" "$here/subset_lmdb.py" "$1" "$2.tmp" --classes "$3" --max "$4"
  mv "$2.tmp" "$2"
}
subset $fm/fashion_mnist_train_lmdb $d/fmnist_0to4_train_lmdb 0,1,2,3,4 0
subset $fm/fashion_mnist_test_lmdb $d/fmnist_0to4_test_lmdb 0,1,2,3,4 0
subset $fm/fashion_mnist_train_lmdb "$d/fmnist_5to9_train${samples}_lmdb" 5,6,7,8,9 "$samples"
subset $fm/fashion_mnist_test_lmdb $d/fmnist_5to9_test_lmdb 5,6,7,8,9 0

solver=examples/finetune_fmnist/solver.prototxt
declare -A accuracy
train() {  # name iters [extra flags...]
  local name="$1" iters="$2"
  shift 2
  local cmd=("$crema" train --solver "$solver" --progress off --set max_iter="$iters"
             --set snapshot="$iters" --set test_interval="$iters"
             --set snapshot_prefix="$runs/$name" "$@")
  echo "+ ${cmd[*]}" | sed "s|$root/||g"
  "${cmd[@]}" > "$runs/$name.out" 2> "$runs/$name.log" || {
    tail -20 "$runs/$name.log" >&2
    exit 1
  }
  accuracy[$name]="$(awk -F' = ' '$1 == "Test net #0: accuracy" { a = $2 } END { print a }' \
                     "$runs/$name.out")"
  echo "  $name: test accuracy ${accuracy[$name]}"
}

# 1. Pre-train on all ~30,000 training images of classes 0-4 (tested on their 5,000 test images).
pre="$runs/pretrain_0to4_iter_${pretrain_iters}.caffemodel"
if [[ -f "$pre" && -f "$runs/pretrain_0to4.out" ]]; then
  echo "reusing $pre (delete it to pre-train again)"
  accuracy[pretrain_0to4]="$(awk -F' = ' '$1 == "Test net #0: accuracy" { a = $2 } END { print a }' \
                             "$runs/pretrain_0to4.out")"
else
  train pretrain_0to4 "$pretrain_iters"
fi

# 2. Classes 5-9, SAMPLES training images, FT_ITERS iterations each.
five_to_nine=(--set net.data_train.data_param.source="$d/fmnist_5to9_train${samples}_lmdb"
              --set net.data_test.data_param.source="$d/fmnist_5to9_test_lmdb")
# The classifier of 0-4 means nothing for 5-9: renaming ip2 leaves it at its fillers (weights
# are copied by layer name), as Caffe's fine-tuning examples rename fc8.
new_head=(--set net.ip2.name=ip2_5to9)
train scratch "$ft_iters" "${five_to_nine[@]}"
train finetune "$ft_iters" "${five_to_nine[@]}" "${new_head[@]}" --weights "$pre"
train finetune_freeze_conv1 "$ft_iters" "${five_to_nine[@]}" "${new_head[@]}" --weights "$pre" \
  --freeze conv1
train finetune_freeze_conv12 "$ft_iters" "${five_to_nine[@]}" "${new_head[@]}" --weights "$pre" \
  --freeze 'conv[12]'

echo
echo "classes 5-9, $samples training images, $ft_iters iterations of batch 64; test: 5,000 images"
printf '%-24s %s\n' run "test accuracy"
for name in scratch finetune finetune_freeze_conv1 finetune_freeze_conv12; do
  printf '%-24s %s\n' "$name" "${accuracy[$name]}"
done
echo "(pre-training: $pretrain_iters iterations on classes 0-4, accuracy ${accuracy[pretrain_0to4]})"
