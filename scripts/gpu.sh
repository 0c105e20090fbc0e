#!/usr/bin/env bash
# GPU build, bundle and run, for a machine that has a GPU but no package registry.
#
#   scripts/gpu.sh bundle    here (Debian 12 with /usr/local/cuda): builds crema with CUDA for
#                            sm_90 + PTX in build-gpu/, then packs the crema binary, libcrema, the
#                            test executables, the example plugin and the non-system shared libraries they
#                            need into .gpu/crema-gpu.tar.xz (cuDNN, cuBLAS and the driver are not
#                            packed: the GPU machine has its own).
#   scripts/gpu.sh run       on the GPU machine, from the repository root: unpacks the bundle,
#                            finds cuDNN/cuBLAS (system or the Python environment's nvidia-*
#                            wheels), runs every test (GPU tests included) and then
#                            bench/gpu_bench.sh when present. Logs go to $OUT (or .gpu/out).
#
# With the device tool: run `scripts/gpu.sh bundle` here, then run
#   bash scripts/gpu.sh run        with carry [".gpu"].
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
bundle_dir=.gpu
archive="$bundle_dir/crema-gpu.tar.xz"

bundle() {
  CREMA_BUILD_DIR=build-gpu scripts/build.sh -DCREMA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
  local stage
  stage="$(mktemp -d)/crema-gpu"
  # build-gpu/ keeps its layout (tests find the crema binary and the example plugin there);
  # lib/ holds the shared libraries.
  mkdir -p "$stage/build-gpu/tests" "$stage/lib"
  cp build-gpu/crema "$stage/build-gpu/"
  cp -P build-gpu/libcrema.so* build-gpu/libcrema_example_plugin.so "$stage/build-gpu/"
  find build-gpu/tests -maxdepth 1 -type f -name '*_test' -perm -u+x -exec cp {} "$stage/build-gpu/tests/" \;
  # Shared libraries outside the C library and the CUDA driver/cuDNN/cuBLAS, which the GPU
  # machine provides itself.
  local libs
  libs=$( (ldd build-gpu/crema; for t in "$stage"/build-gpu/tests/*; do ldd "$t"; done) |
    awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    grep -v -E 'libcuda\.so|libcudnn|libcublas|libnvidia|/libcrema\.so' || true)
  for lib in $libs; do cp -L "$lib" "$stage/lib/"; done
  strip --strip-unneeded "$stage"/build-gpu/crema "$stage"/build-gpu/tests/* 2>/dev/null || true
  echo "$root" >"$stage/source_dir"
  mkdir -p "$bundle_dir"
  tar -C "$(dirname "$stage")" -cJf "$archive" crema-gpu
  rm -rf "$(dirname "$stage")"
  echo "bundle: $archive ($(du -h "$archive" | cut -f1)); on the GPU machine: bash scripts/gpu.sh run"
}

run() {
  [ -f "$archive" ] || { echo "no $archive: run scripts/gpu.sh bundle first (carry .gpu)" >&2; exit 1; }
  local out="${OUT:-$root/.gpu/out}"
  mkdir -p "$out"
  local unpack=/tmp/crema-gpu-run
  rm -rf "$unpack" && mkdir -p "$unpack" && tar -C "$unpack" -xJf "$archive"
  local home="$unpack/crema-gpu"
  # Tests find models/, fixtures, the crema binary and the example plugin under the source and
  # build directories they were built in: make those paths lead here.
  [ -e build-gpu ] || ln -s "$home/build-gpu" build-gpu
  local built_in
  built_in="$(cat "$home/source_dir")"
  if [ "$built_in" != "$root" ] && [ ! -e "$built_in" ]; then
    mkdir -p "$(dirname "$built_in")" && ln -s "$root" "$built_in"
  fi
  local extra=""
  for d in $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null); do
    [ -d "$d" ] && extra="$extra:$d"
  done
  export LD_LIBRARY_PATH="$home/build-gpu:$home/lib${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt" || true
  "$home/build-gpu/crema" device_query | tee -a "$out/gpu.txt"
  # Every test binary, several at a time; GPU tests run where a CUDA device is visible.
  local jobs
  jobs="$(nproc)"
  local logs="$unpack/logs"
  mkdir -p "$logs"
  ls "$home"/build-gpu/tests/*_test | xargs -P "$jobs" -I{} sh -c \
    'name=$(basename {}); if {} >"'"$logs"'/$name.log" 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi' |
    sort | tee "$out/summary.txt"
  # The device tool returns few files: one archive of the logs, and the failed and skipped tests.
  grep -h -E '^\[  (FAILED|SKIPPED) ' "$logs"/*.log | sort -u >"$out/failed_or_skipped.txt" || true
  # How many GPU test cases ran, were skipped or failed.
  grep -h -E '^\[ +(OK|SKIPPED|FAILED) +\] [^ ]*(Gpu|GPU|Cuda)' "$logs"/*.log |
    sed -E 's/^\[ +([A-Z]+) +\].*/\1/' | sort | uniq -c >"$out/gpu_cases.txt" || true
  tar -C "$logs" -czf "$out/logs.tar.gz" .
  echo "tests: $(grep -c PASS "$out/summary.txt") passed, $(grep -c FAIL "$out/summary.txt") failed"
  # CREMA_BENCH_NETS="alexnet vgg19" limits the benchmark; CREMA_BENCH_NETS=none skips it.
  if [ -x bench/gpu_bench.sh ] && [ "${CREMA_BENCH_NETS:-}" != none ]; then
    # shellcheck disable=SC2086
    CREMA="$home/build-gpu/crema" bench/gpu_bench.sh ${CREMA_BENCH_NETS:-} | tee "$out/bench.txt"
  fi
  grep -q FAIL "$out/summary.txt" && return 1 || return 0
}

case "${1:-}" in
  bundle) bundle ;;
  run) run ;;
  *) echo "usage: scripts/gpu.sh bundle|run" >&2; exit 2 ;;
esac
