#!/usr/bin/env bash
# Trains crema's own zoo weights reproducibly: prepares the data, trains with the model's
# solver, scores the result with `crema test`, copies the final snapshot beside the model and
# writes its sha256, the measured test accuracy and the exact command into the model's
# readme.md front matter (with --no-readme it only prints those lines).
#
# usage: models/train_own.sh lenet [--iters N] [--crema PATH] [--no-readme]
#        models/train_own.sh cifar10_quick CIFAR_SOURCE [--iters N] [--crema PATH] [--no-readme]
#
#   lenet          LeNet on Fashion-MNIST (data/fashion_mnist/get_fashion_mnist.sh makes the
#                  LMDBs). Full schedule: the solver's 10,000 iterations (the default).
#   cifar10_quick  Caffe's CIFAR-10 quick net. CIFAR_SOURCE is either the official binary
#                  release (cifar-10-binary.tar.gz or its cifar-10-batches-bin folder, converted
#                  by data/cifar10/get_cifar10.sh: RGB planes, as Caffe's LMDB) or a tarball /
#                  folder of JPEGs in class folders with train.txt and test.txt list files
#                  (converted by `crema convert-imageset --shuffle`: BGR, as Caffe decodes
#                  images). Existing data/cifar10/cifar10_{train,test}_lmdb are reused as they
#                  are. Full schedule (Caffe's): 4,000 iterations at lr 0.001 then 1,000 at lr
#                  0.0001 (--iters 5000, the default); --iters N keeps the same shape: the first
#                  4/5 of N at 0.001, the rest at 0.0001.
#
# Outputs: models/lenet/lenet_fmnist.caffemodel or models/cifar10_quick/cifar10_quick.caffemodel
# (gitignored), snapshots and metrics.jsonl under models/MODEL/snapshots/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

usage() {
  sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
model="$1"
shift
source=""
iters=""
crema=""
write_readme=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --iters) [[ $# -ge 2 ]] || usage; iters="$2"; shift 2 ;;
    --crema) [[ $# -ge 2 ]] || usage; crema="$2"; shift 2 ;;
    --no-readme) write_readme=0; shift ;;
    -h|--help) usage ;;
    -*) echo "error: unknown option $1" >&2; usage ;;
    *) [[ -z "$source" ]] || usage; source="$1"; shift ;;
  esac
done
if [[ -n "$iters" && ! "$iters" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: --iters wants a positive integer, got '$iters'" >&2
  exit 2
fi

source "$root/scripts/find_crema.sh"
crema="$(find_crema "$root" "$crema")"

# Reads "accuracy = X" from `crema test` output.
test_accuracy() {  # net weights iterations
  "$crema" test --model "$1" --weights "$2" --iterations "$3" 2>/dev/null |
    awk -F' = ' '$1 == "accuracy" { print $2 }'
}

# Sets `key: value` in the readme's front matter (the block between the first two --- lines).
set_front_matter() {  # readme key value
  local readme="$1" key="$2" value="$3"
  VALUE="$value" awk -v key="$key" '
    BEGIN { value = ENVIRON["VALUE"] }
    /^---$/ { fences++ }
    fences == 1 && index($0, key ":") == 1 && !done { print key ": " value; done = 1; next }
    fences == 2 && !done { print key ": " value; done = 1 }
    { print }
  ' "$readme" > "$readme.tmp"
  mv "$readme.tmp" "$readme"
}

# Prepares CIFAR-10 LMDBs and the mean from the binary release or the JPEG tarball/folder.
prepare_cifar10() {
  local dir="$root/data/cifar10"
  if [[ -d "$dir/cifar10_train_lmdb" && -d "$dir/cifar10_test_lmdb" &&
        -f "$dir/mean.binaryproto" ]]; then
    echo "reusing $dir/cifar10_{train,test}_lmdb and mean.binaryproto"
    return
  fi
  if [[ -z "$source" ]]; then
    echo "error: cifar10_quick needs CIFAR_SOURCE (cifar-10-binary.tar.gz, cifar-10-batches-bin," \
         "or a JPEG tarball/folder with train.txt and test.txt)" >&2
    exit 2
  fi
  local jpegs=""
  if [[ -d "$source" && -f "$source/train.txt" ]]; then
    jpegs="$(cd "$source" && pwd)"
  elif [[ -f "$source" ]] && tar -tzf "$source" 2>/dev/null | grep -x 'train.txt' >/dev/null; then
    jpegs="$dir/cifar10_jpeg"
    if [[ ! -f "$jpegs/test.txt" ]]; then
      echo "extracting $source -> $jpegs"
      rm -rf "$jpegs.tmp"
      mkdir -p "$jpegs.tmp"
      tar -xzf "$source" -C "$jpegs.tmp"
      rm -rf "$jpegs"
      mv "$jpegs.tmp" "$jpegs"
    fi
  fi
  if [[ -z "$jpegs" ]]; then
    data/cifar10/get_cifar10.sh "$source" "$crema"
    return
  fi
  rm -rf "$dir/cifar10_train_lmdb" "$dir/cifar10_test_lmdb" "$dir"/cifar10_*_lmdb.tmp
  "$crema" convert-imageset "$jpegs/" "$jpegs/train.txt" "$dir/cifar10_train_lmdb.tmp" \
    --shuffle --backend lmdb
  "$crema" convert-imageset "$jpegs/" "$jpegs/test.txt" "$dir/cifar10_test_lmdb.tmp" \
    --backend lmdb
  mv "$dir/cifar10_train_lmdb.tmp" "$dir/cifar10_train_lmdb"
  mv "$dir/cifar10_test_lmdb.tmp" "$dir/cifar10_test_lmdb"
  "$crema" compute-image-mean "$dir/cifar10_train_lmdb" "$dir/mean.binaryproto.tmp" \
    --backend lmdb
  mv "$dir/mean.binaryproto.tmp" "$dir/mean.binaryproto"
}

# No periodic tests while training (test_interval past max_iter; crema train still scores the
# final net once): `crema test` scores the copied final weights for the readme.
common=(--progress off --set test_initialization=false)
case "$model" in
  lenet)
    iters="${iters:-10000}"
    data/fashion_mnist/get_fashion_mnist.sh "$crema"
    solver=models/lenet/lenet_solver.prototxt
    net=models/lenet/lenet_train_test.prototxt
    prefix=models/lenet/snapshots/lenet
    out=models/lenet/lenet_fmnist.caffemodel
    data_note="Fashion-MNIST"
    train=("$crema" train --solver "$solver" --set max_iter="$iters" --set snapshot="$iters"
           --set test_interval="$((iters + 1))" "${common[@]}")
    echo "+ ${train[*]}"
    "${train[@]}"
    ;;
  cifar10_quick)
    iters="${iters:-5000}"
    prepare_cifar10
    solver=models/cifar10_quick/solver.prototxt
    net=models/cifar10_quick/train_val.prototxt
    prefix=models/cifar10_quick/snapshots/cifar10_quick
    out=models/cifar10_quick/cifar10_quick.caffemodel
    data_note="CIFAR-10"
    stage1=$((iters * 4 / 5))
    [[ $stage1 -ge 1 ]] || stage1=1
    train=("$crema" train --solver "$solver" --set max_iter="$stage1" --set snapshot="$stage1"
           --set test_interval="$((stage1 + 1))" "${common[@]}")
    echo "+ ${train[*]}"
    "${train[@]}"
    if [[ $iters -gt $stage1 ]]; then
      train=("$crema" train --solver "$solver" --snapshot "${prefix}_iter_${stage1}.solverstate"
             --set base_lr=0.0001 --set max_iter="$iters" --set snapshot="$iters"
             --set test_interval="$((iters + 1))" "${common[@]}")
      echo "+ ${train[*]}"
      "${train[@]}"
    fi
    ;;
  *)
    echo "error: unknown model '$model' (lenet or cifar10_quick)" >&2
    exit 2
    ;;
esac

final="${prefix}_iter_${iters}.caffemodel"
if [[ ! -f "$final" ]]; then
  echo "error: training did not write $final" >&2
  exit 1
fi
cp "$final" "$out"
# Both test nets read 100 batches of 100: the whole 10,000-image test set.
accuracy="$(test_accuracy "$net" "$out" 100)"
if [[ -z "$accuracy" ]]; then
  echo "error: crema test printed no accuracy for $out" >&2
  exit 1
fi
sha="$(sha256sum "$out" | cut -d' ' -f1)"
percent="$(awk -v a="$accuracy" 'BEGIN { printf "%.2f", 100 * a }')"
command="models/train_own.sh $model${source:+ $(basename "$source")} --iters $iters"
accuracy_line="\"${percent}% on the $data_note test set (10,000 images) after $iters iterations (crema)\""

echo
echo "weights: $out"
echo "sha256: \"$sha\""
echo "accuracy: $accuracy_line"
if [[ $write_readme -eq 1 ]]; then
  readme="models/$model/readme.md"
  set_front_matter "$readme" sha256 "\"$sha\""
  set_front_matter "$readme" weights "\"trained by crema: $command (writes $out)\""
  set_front_matter "$readme" accuracy "$accuracy_line"
  echo "updated the front matter of $readme"
fi
