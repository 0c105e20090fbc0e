#!/usr/bin/env bash
# Fashion-MNIST as Caffe LMDBs: takes the idx files from Debian's dataset-fashion-mnist package
# (installed with apt-get when missing and running as root), gunzips them here and runs
# `crema convert-mnist` to create fashion_mnist_{train,test}_lmdb. Idempotent.
# usage: data/fashion_mnist/get_fashion_mnist.sh [path/to/crema]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src=/usr/share/datasets/fashion-mnist

crema="${1:-}"
if [[ -z "$crema" ]]; then
  for candidate in "$root/build/crema" "$root"/build*/crema; do
    if [[ -x "$candidate" ]]; then crema="$candidate"; break; fi
  done
fi
if [[ -z "$crema" || ! -x "$crema" ]]; then
  echo "error: crema binary not found; build it (cmake --build build) or pass its path" >&2
  exit 2
fi

if [[ -d "$here/fashion_mnist_train_lmdb" && -d "$here/fashion_mnist_test_lmdb" ]]; then
  echo "fashion_mnist_train_lmdb and fashion_mnist_test_lmdb already exist in $here"
  exit 0
fi

files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte
       t10k-labels-idx1-ubyte)
if [[ ! -f "$src/${files[0]}.gz" ]]; then
  if [[ "$(id -u)" -eq 0 ]]; then
    apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist
  else
    echo "error: $src is missing; install it with: sudo apt-get install dataset-fashion-mnist" >&2
    exit 1
  fi
fi

for f in "${files[@]}"; do
  if [[ ! -f "$here/$f" ]]; then
    echo "gunzip $src/$f.gz -> $here/$f"
    gzip -dc "$src/$f.gz" > "$here/$f.tmp" && mv "$here/$f.tmp" "$here/$f"
  fi
done

convert() {  # images labels db
  if [[ -d "$here/$3" ]]; then
    echo "$3 exists, skipped"
    return
  fi
  "$crema" convert-mnist "$here/$1" "$here/$2" "$here/$3.tmp" --backend lmdb
  mv "$here/$3.tmp" "$here/$3"
}
rm -rf "$here/fashion_mnist_train_lmdb.tmp" "$here/fashion_mnist_test_lmdb.tmp"
convert train-images-idx3-ubyte train-labels-idx1-ubyte fashion_mnist_train_lmdb
convert t10k-images-idx3-ubyte t10k-labels-idx1-ubyte fashion_mnist_test_lmdb
echo "done: $here/fashion_mnist_train_lmdb (60000 records), $here/fashion_mnist_test_lmdb (10000)"
