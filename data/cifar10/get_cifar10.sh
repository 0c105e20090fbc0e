#!/usr/bin/env bash
# CIFAR-10 as Caffe LMDBs from the binary release, which you supply (nothing is downloaded):
# cifar-10-binary.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html, or the
# cifar-10-batches-bin folder extracted from it. Runs `crema convert-cifar10` to create
# cifar10_{train,test}_lmdb here (byte-identical to Caffe's create_cifar10.sh) and
# `crema compute-image-mean` to write mean.binaryproto. Idempotent. BACKEND=leveldb for LevelDB.
# usage: data/cifar10/get_cifar10.sh cifar-10-binary.tar.gz|cifar-10-batches-bin [path/to/crema]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
backend="${BACKEND:-lmdb}"

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 cifar-10-binary.tar.gz|cifar-10-batches-bin [path/to/crema]" >&2
  echo "  get cifar-10-binary.tar.gz (CIFAR-10 binary version) from" >&2
  echo "  https://www.cs.toronto.edu/~kriz/cifar.html; this script does not download it" >&2
  exit 2
fi
source="$1"

# The crema to run: the argument, else this checkout's build, else the one on PATH.
find_crema() {
  local candidate
  for candidate in "$@" "$root"/build/crema "$root"/build*/crema "$(command -v crema || true)"; do
    [[ -n "$candidate" && -x "$candidate" && ! -d "$candidate" ]] && { echo "$candidate"; return; }
  done
  echo "error: no crema binary (looked in $root/build*/ and PATH); build it or pass its path" >&2
  exit 2
}
if [[ -n "${2:-}" && ! -x "$2" ]]; then
  echo "error: '$2' is not an executable crema" >&2
  exit 2
fi
crema="$(find_crema "${2:-}")"

train="cifar10_train_$backend"
test="cifar10_test_$backend"
if [[ -d "$here/$train" && -d "$here/$test" && -f "$here/mean.binaryproto" ]]; then
  echo "$train, $test and mean.binaryproto already exist in $here"
  exit 0
fi

if [[ -d "$source" ]]; then
  batches="$(cd "$source" && pwd)"
elif [[ -f "$source" ]]; then
  batches="$here/cifar-10-batches-bin"
  if [[ ! -f "$batches/test_batch.bin" ]]; then
    echo "extracting $source -> $batches"
    tmp="$(mktemp -d "$here/.extract.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    tar -xzf "$source" -C "$tmp"
    if [[ ! -d "$tmp/cifar-10-batches-bin" ]]; then
      echo "error: $source holds no cifar-10-batches-bin folder; is it the binary version" \
           "(cifar-10-binary.tar.gz, not the python or matlab one)?" >&2
      exit 1
    fi
    rm -rf "$batches"
    mv "$tmp/cifar-10-batches-bin" "$batches"
  fi
else
  echo "error: '$source' does not exist (give cifar-10-binary.tar.gz or the extracted" \
       "cifar-10-batches-bin folder)" >&2
  exit 1
fi

if [[ -d "$here/$train" && -d "$here/$test" ]]; then
  echo "$train and $test exist, conversion skipped"
else
  # convert-cifar10 writes both or neither; a half-finished earlier pair is redone.
  rm -rf "${here:?}/$train" "${here:?}/$test"
  "$crema" convert-cifar10 "$batches" "$here" --backend "$backend"
fi
"$crema" compute-image-mean "$here/$train" "$here/mean.binaryproto.tmp" --backend "$backend"
mv "$here/mean.binaryproto.tmp" "$here/mean.binaryproto"
echo "done: $here/$train (50000 records), $here/$test (10000), $here/mean.binaryproto"
