#!/usr/bin/env bash
# The GPU kit: crema built here for a GPU machine that has no package registry, carried there in
# one run of the device tool (at most 64 MiB with the working tree), run there in one command.
#
#   scripts/gpu.sh bundle    here (Debian 12 with /usr/local/cuda): builds a lean crema with CUDA
#                            (sm_90 + PTX) in build-gpu/: no OpenCV, oneDNN, MPI or Python, whose
#                            libraries (GDAL, ICU, ...) would not fit; what needs them skips. Packs
#                            the crema binary, libcrema, the test executables, the example plugin
#                            and the shared libraries they need that the GPU machine lacks into
#                            .gpu/crema-gpu.tar.xz: not the driver, cuDNN, cuBLAS or NCCL, which
#                            it has. Fails when the kit and the working tree come to more than
#                            64 MiB (CREMA_KIT_LIMIT_MIB), saying what is large.
#   scripts/gpu.sh run       on the GPU machine, from the repository root: unpacks the kit, finds
#                            cuDNN/cuBLAS/NCCL (system or the Python environment's nvidia-*
#                            wheels), runs every test (GPU cases included; several at a time, each
#                            under a time limit), then bench/gpu_bench.sh. Results in $OUT (or
#                            .gpu/out), at most 8 files: summary.txt (every test's result, the
#                            GPU cases' counts, failures, the times), bench.txt (the benchmark),
#                            gpu.txt (the device) and logs.tar.gz (every log).
#     CREMA_KIT_TESTS=REGEX runs only the matching test executables; CREMA_KIT_TESTS=none none.
#     CREMA_BENCH_NETS="alexnet vgg19" limits the benchmark's big-batch table;
#     CREMA_BENCH_NETS=none skips it. CREMA_BENCH_SMALL="lenet resnet50" limits its small-batch
#     CUDA-graph rows; CREMA_BENCH_SMALL=none skips them (both none: no benchmark).
#
# With the device tool: run `scripts/gpu.sh bundle` here, then `bash scripts/gpu.sh run` there
# with carry [".gpu"].
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
bundle_dir=.gpu
archive="$bundle_dir/crema-gpu.tar.xz"

# Bytes of the working tree the device tool carries: tracked files and untracked ones git does
# not ignore.
tree_bytes() {
  git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
    awk '{s += $1} END {print s + 0}'
}

bundle() {
  CREMA_BUILD_DIR=build-gpu scripts/build.sh -DCREMA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCREMA_OPENCV=OFF -DCREMA_DNNL=OFF -DCREMA_MPI=OFF -DCREMA_PYTHON=OFF
  local stage
  stage="$(mktemp -d)/crema-gpu"
  # build-gpu/ keeps its layout (tests find the crema binary and the example plugin there);
  # lib/ holds the shared libraries.
  mkdir -p "$stage/build-gpu/tests" "$stage/lib"
  cp build-gpu/crema "$stage/build-gpu/"
  cp -P build-gpu/libcrema.so* build-gpu/libcrema_example_plugin.so "$stage/build-gpu/"
  # The test executables ctest knows (not stale ones of an earlier configuration), but for
  # install_test, which installs from the build tree (cmake --install) that the kit does not carry.
  local name
  for name in $(ctest --test-dir build-gpu -N | sed -n 's/^ *Test *#[0-9]*: //p' |
    grep -v -x install_test); do
    cp "build-gpu/tests/$name" "$stage/build-gpu/tests/"
  done
  # Shared libraries outside the C and C++ runtimes and the CUDA libraries the GPU machine
  # provides itself (driver, cuDNN, cuBLAS, NCCL).
  local libs
  libs=$( (ldd build-gpu/crema; for t in "$stage"/build-gpu/tests/*; do ldd "$t"; done) |
    awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    grep -v -E 'libcuda\.so|libcudnn|libcublas|libnvidia|libnccl|/libcrema\.so' || true)
  for lib in $libs; do cp -L "$lib" "$stage/lib/"; done
  strip --strip-unneeded "$stage"/build-gpu/crema "$stage"/build-gpu/libcrema.so* \
    "$stage"/build-gpu/tests/* 2>/dev/null || true
  echo "$root" >"$stage/source_dir"
  mkdir -p "$bundle_dir"
  rm -f "$archive"
  tar -C "$(dirname "$stage")" -cf - crema-gpu | xz -6 -T"$(nproc)" >"$archive"
  local kit_bytes tree limit_mib
  kit_bytes=$(stat -c %s "$archive")
  tree=$(tree_bytes)
  limit_mib="${CREMA_KIT_LIMIT_MIB:-64}"
  echo "bundle: $archive $((kit_bytes / 1048576)) MiB + working tree $((tree / 1048576)) MiB" \
    "= $(((kit_bytes + tree) / 1048576)) MiB of $limit_mib MiB"
  if [ $((kit_bytes + tree)) -gt $((limit_mib * 1048576)) ]; then
    echo "bundle: TOO LARGE for one run of the device tool; the largest parts:" >&2
    du -ab "$stage" | sort -n -r | head -15 | sed "s|$(dirname "$stage")/||" >&2
    rm -rf "$(dirname "$stage")" "$archive"
    exit 1
  fi
  rm -rf "$(dirname "$stage")"
  echo "bundle: on the GPU machine: bash scripts/gpu.sh run (carry .gpu)"
}

run() {
  [ -f "$archive" ] || { echo "no $archive: run scripts/gpu.sh bundle first (carry .gpu)" >&2; exit 1; }
  local started=$SECONDS
  local out="${OUT:-$root/.gpu/out}"
  mkdir -p "$out"
  local unpack=/tmp/crema-gpu-run
  rm -rf "$unpack" && mkdir -p "$unpack" && xz -dc -T0 "$archive" | tar -C "$unpack" -xf -
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
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/gpu.txt" 2>&1 || true
  "$home/build-gpu/crema" device_query >>"$out/gpu.txt" 2>&1 || true
  cat "$out/gpu.txt"
  local logs="$unpack/logs"
  mkdir -p "$logs"
  local summary="$out/summary.txt"
  : >"$summary"
  local filter="${CREMA_KIT_TESTS:-.}"
  if [ "$filter" != none ]; then
    # Every test binary, several at a time, each under a time limit; GPU cases run where a CUDA
    # device is visible.
    ls "$home"/build-gpu/tests/*_test | grep -E "$filter" | xargs -P "$(nproc)" -I{} sh -c \
      'name=$(basename {}); start=$(date +%s); timeout 240 {} >"'"$logs"'/$name.log" 2>&1; rc=$?;
       t=$(( $(date +%s) - start )); if [ $rc -eq 0 ]; then echo "PASS $name ${t}s";
       else echo "FAIL $name ${t}s (exit $rc)"; fi' | sort >"$summary.tests"
    {
      echo "tests: $(grep -c '^PASS' "$summary.tests") passed, $(grep -c '^FAIL' "$summary.tests") failed ($((SECONDS - started)) s)"
      echo "GPU test cases:"
      grep -h -E '^\[ +(OK|SKIPPED|FAILED) +\] [^ ]*(Gpu|GPU|Cuda)' "$logs"/*.log |
        sed -E 's/^\[ +([A-Z]+) +\].*/\1/' | sort | uniq -c
      echo "failed and skipped cases:"
      grep -h -E "^\[  (FAILED|SKIPPED) " "$logs"/*.log | sort -u | sed -n "1,400p" || true
      echo "results:"
      cat "$summary.tests"
    } >>"$summary"
    rm -f "$summary.tests"
    head -3 "$summary"
    # Packed now too, so that the tests' logs come back even if the benchmark runs out of time.
    tar -C "$logs" -czf "$out/logs.tar.gz" .
  fi
  if [ -x bench/gpu_bench.sh ] &&
    { [ "${CREMA_BENCH_NETS:-}" != none ] || [ "${CREMA_BENCH_SMALL:-}" != none ]; }; then
    # CREMA_BENCH_NETS=none reaches gpu_bench.sh as its argument `none` (no big-batch table);
    # CREMA_BENCH_SMALL and BENCH_SMALL_ITERATIONS through the environment.
    # shellcheck disable=SC2086
    CREMA="$home/build-gpu/crema" CREMA_BENCH_LOGS="$logs/bench" \
      BENCH_ITERATIONS="${BENCH_ITERATIONS:-15}" bench/gpu_bench.sh ${CREMA_BENCH_NETS:-} |
      tee "$out/bench.txt"
  fi
  echo "kit run: $((SECONDS - started)) s" | tee -a "$summary"
  tar -C "$logs" -czf "$out/logs.tar.gz" .
  grep -q '^FAIL' "$summary" && return 1 || return 0
}

case "${1:-}" in
  bundle) bundle ;;
  run) run ;;
  *) echo "usage: scripts/gpu.sh bundle|run" >&2; exit 2 ;;
esac
