#!/usr/bin/env bash
# SSD worked example: a small SSD trained from scratch on synthetic shapes on the CPU, scored
# (mAP), run on images with `crema detect`, then fine-tuned to a set with one class more.
# Everything is prototxt and CLI; see examples/ssd_shapes/README.md.
#
# usage: examples/ssd_shapes/run.sh [--crema PATH]
#   env: ITERS (default 3000: training from scratch), FT_ITERS (1000: fine-tuning and its
#        from-scratch baseline), NUM_TRAIN (2000 images), NUM_TEST (200)
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
iters="${ITERS:-3000}"
ft_iters="${FT_ITERS:-1000}"
num_train="${NUM_TRAIN:-2000}"
num_test="${NUM_TEST:-200}"
python=/usr/bin/python3
ex=examples/ssd_shapes
data=$ex/data
runs=$ex/runs
mkdir -p "$data" "$runs"

# 1. Two synthetic sets: circles, squares and triangles; and the same plus crosses (another seed).
dataset() {  # folder classes seed
  local d="$data/$1"
  if [[ -d "$d/train_lmdb" && -d "$d/test_lmdb" ]]; then
    echo "$d exists, kept"
    return
  fi
  rm -rf "$d"
  "$python" data/detection/make_shapes.py --out "$d" --classes "$2" --seed "$3" \
    --num-train "$num_train" --num-test "$num_test"
  for split in train test; do
    "$crema" convert-annoset "$d/" "$d/$split.txt" "$d/${split}_lmdb" --progress off \
      --label_map_file "$d/labelmap.prototxt" --encoded --encode_type png
  done
}
dataset shapes circle,square,triangle 1
dataset shapes4 circle,square,triangle,cross 2

# 2. The nets (committed; regenerated here so that they follow make_nets.py).
"$python" $ex/make_nets.py --num-classes 4 --out $ex --data $data/shapes --name ssd_shapes
"$python" $ex/make_nets.py --num-classes 5 --out $ex --data $data/shapes4 --name ssd_shapes4

train() {  # name solver iters [flags...]
  local name="$1" solver="$2" n="$3"
  shift 3
  local cmd=("$crema" train --solver "$solver" --progress off --set max_iter="$n"
             --set "stepvalue=$((n * 4 / 5))" --set snapshot="$n" --set test_interval="$((n / 4))"
             --set snapshot_prefix="$runs/$name" "$@")
  echo "+ ${cmd[*]}"
  local start=$SECONDS
  "${cmd[@]}" > "$runs/$name.out" 2> "$runs/$name.log" || {
    tail -20 "$runs/$name.log" >&2
    exit 1
  }
  echo "  $name: $((SECONDS - start)) s, test mAP (VOC 11-point) by iteration:" \
    "$(grep -o 'detection_eval = [0-9.]*' "$runs/$name.log" | awk '{printf "%s ", $3}')"
}

# 3. Train from scratch, then score the final weights (11-point and area under the curve).
train ssd_shapes $ex/solver.prototxt "$iters"
weights=$runs/ssd_shapes_iter_${iters}.caffemodel
"$crema" test --model $ex/ssd_shapes_train_test.prototxt --weights "$weights" \
  --iterations $(((num_test + 24) / 25)) 2> "$runs/test.log" | tee "$runs/test.out"

# 4. Boxes on a few held-out images, as CSV and drawn.
first_test=$(head -1 "$data/shapes/test.txt" | cut -d' ' -f1)
images=$(head -4 "$data/shapes/test.txt" | cut -d' ' -f1 | sed "s|^|$data/shapes/|")
# shellcheck disable=SC2086
"$crema" detect --model $ex/ssd_shapes_deploy.prototxt --weights "$weights" \
  --labelmap $data/shapes/labelmap.prototxt --mean_values 127.5,127.5,127.5 --scale 0.007843 \
  --threshold 0.5 --out "$runs/detections.csv" --draw "$runs/drawn" $images 2> "$runs/detect.log"
echo "detections of 4 test images: $runs/detections.csv; drawn: $runs/drawn/ (e.g." \
  "$(basename "$first_test"))"
cat "$runs/detections.csv"

# 5. Fine-tune to four classes: the convolutions come from step 3; the class heads (conf), whose
# shapes differ, keep their fillers (--skip-mismatched). Baseline: the same from scratch.
train ssd_shapes4_finetune $ex/solver_finetune.prototxt "$ft_iters" --weights "$weights" \
  --skip-mismatched
train ssd_shapes4_scratch $ex/solver_finetune.prototxt "$ft_iters"
