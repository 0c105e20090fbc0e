#!/usr/bin/env bash
# The three ways to install crema (README "Install"), each checked as a new user would use it.
# Too slow for every ctest run (a wheel rebuilds the library; the .deb is installed into the
# system), so run by hand or by a release job:
#   1. cmake --install into a temporary prefix; examples/embed finds it with find_package(crema)
#      and with pkg-config, trains LeNet and runs a forward (ctest's install_test).
#   2. pip wheel ./python, installed into a fresh venv outside the tree, where
#      python/tests/wheel_check.py imports crema quietly, runs a net, trains, checks zero-copy.
#   3. cpack -G DEB: crema and crema-dev packages; their files and dependencies are checked, then
#      (as root) `apt-get install ./crema*.deb`, `crema train` on the quickstart's LeNet solver,
#      examples/embed built against /usr, bash completion, `import crema` with Debian's python3;
#      the packages are removed again at the end.
# usage: scripts/package_test.sh [--no-install] [--no-wheel] [--no-deb] [--no-system]
#   --no-system: check the .deb's files and dependencies and run it unpacked (dpkg -x) instead of
#   installing it (the default when not root, or when a crema package is installed already).
# Builds what it needs in build/ (CREMA_BUILD_DIR); the wheel builds in build-wheel/ with
# CREMA_WHEEL_PYTHON (default: python3 on PATH), passing CREMA_WHEEL_ARGS to pip (e.g.
# "-Ccmake.define.CREMA_CUDA=OFF"). Needs Debian's dataset-fashion-mnist (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
build="${CREMA_BUILD_DIR:-build}"
do_install=1 do_wheel=1 do_deb=1 system=1
for arg in "$@"; do
  case "$arg" in
    --no-install) do_install=0 ;;
    --no-wheel) do_wheel=0 ;;
    --no-deb) do_deb=0 ;;
    --no-system) system=0 ;;
    *)
      echo "usage: scripts/package_test.sh [--no-install] [--no-wheel] [--no-deb] [--no-system]" >&2
      exit 2
      ;;
  esac
done
if [ "$(id -u)" != 0 ]; then system=0; fi
fmnist=/usr/share/datasets/fashion-mnist
if [ ! -f "$fmnist/t10k-images-idx3-ubyte.gz" ]; then
  echo "error: $fmnist is missing: apt-get install dataset-fashion-mnist (scripts/setup.sh)" >&2
  exit 2
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/crema_package_test.XXXXXX")"
installed_packages=""
cleanup() {
  if [ -n "$installed_packages" ]; then
    echo "package_test: removing $installed_packages"
    # shellcheck disable=SC2086
    apt-get purge -y -q $installed_packages >"$work/remove.log" 2>&1 || cat "$work/remove.log"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
passed=0
pass() {
  echo "package_test: ok: $*"
  passed=$((passed + 1))
}

targets="crema_cli crema_completion"
[ "$do_install" = 1 ] && targets="$targets install_test"
CREMA_BUILD_TARGETS="$targets" CREMA_BUILD_DIR="$build" scripts/build.sh

# ---- 1. cmake --install + find_package / pkg-config ----
if [ "$do_install" = 1 ]; then
  ctest --test-dir "$build" --output-on-failure -R '^install_test$'
  pass "cmake --install, find_package(crema) and pkg-config crema (install_test)"
fi

# ---- 2. the wheel ----
if [ "$do_wheel" = 1 ]; then
  rc=0
  # shellcheck disable=SC2086
  python/tests/wheel_test.sh ${CREMA_WHEEL_ARGS:-} || rc=$?
  if [ "$rc" = 77 ]; then
    echo "package_test: skipped: the wheel (see above)"
  elif [ "$rc" != 0 ]; then
    exit "$rc"
  else
    pass "pip wheel ./python, installed into a fresh venv"
  fi
fi

# ---- 3. the Debian packages ----
# LeNet's solver and net from the quickstart, on LMDBs converted by the crema under test, with
# their paths in $work and a short run: 200 iterations, one test of 10 batches at the end.
lenet_solver() {
  local crema="$1" dir="$work/lenet"
  mkdir -p "$dir"
  for set in train t10k; do
    [ -d "$dir/$set" ] || "$crema" convert-mnist "$fmnist/$set-images-idx3-ubyte.gz" \
      "$fmnist/$set-labels-idx1-ubyte.gz" "$dir/$set" >"$dir/convert.log" 2>&1 || {
      cat "$dir/convert.log" >&2
      return 1
    }
  done
  sed -e "s|data/fashion_mnist/fashion_mnist_train_lmdb|$dir/train|" \
    -e "s|data/fashion_mnist/fashion_mnist_test_lmdb|$dir/t10k|" \
    models/lenet/lenet_train_test.prototxt >"$dir/lenet_train_test.prototxt"
  sed -e "s|models/lenet/lenet_train_test.prototxt|$dir/lenet_train_test.prototxt|" \
    -e "s|models/lenet/snapshots/lenet|$dir/lenet|" -e "s|^max_iter:.*|max_iter: 200|" \
    -e "s|^test_iter:.*|test_iter: 10|" -e "s|^test_interval:.*|test_interval: 200|" \
    -e "s|^snapshot:.*|snapshot: 0|" \
    models/lenet/lenet_solver.prototxt >"$dir/lenet_solver.prototxt"
  echo "$dir/lenet_solver.prototxt"
}

# Trains with `crema` ($1) and checks the final test's accuracy.
train_lenet() {
  local solver log="$work/train.log"
  solver="$(lenet_solver "$1")"
  (cd "$work" && CREMA_OPENBLAS_FIX=0 "$1" train --solver "$solver" --progress=off) >"$log" 2>&1 || {
    cat "$log"
    return 1
  }
  local accuracy
  accuracy="$(grep -oE 'Test net output #[0-9]+: accuracy = [0-9.]+' "$log" | tail -1 | awk '{print $NF}')"
  echo "package_test: $1 train: 200 iterations, test accuracy $accuracy"
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.5) }' || {
    echo "FAIL: LeNet did not learn (accuracy '$accuracy'):" >&2
    tail -20 "$log" >&2
    return 1
  }
}

if [ "$do_deb" = 1 ]; then
  debs="$work/debs"
  cpack -G DEB --config "$build/CPackConfig.cmake" -B "$debs" >"$work/cpack.log" 2>&1 || {
    cat "$work/cpack.log"
    exit 1
  }
  runtime_deb="$(ls "$debs"/crema_*.deb)"
  dev_deb="$(ls "$debs"/crema-dev_*.deb)"
  ls -l "$runtime_deb" "$dev_deb"
  check_files() {  # package, then the paths it must hold
    local deb="$1" listing
    shift
    listing="$(dpkg-deb -c "$deb" | awk '{print $6}')"
    for path in "$@"; do
      grep -qx "\./usr/$path" <<<"$listing" || {
        echo "FAIL: $(basename "$deb") lacks /usr/$path" >&2
        exit 1
      }
    done
  }
  check_files "$runtime_deb" bin/crema share/bash-completion/completions/crema
  [ "$(dpkg-deb -c "$runtime_deb" | grep -c 'lib/libcrema\.so\.')" -ge 1 ] || {
    echo "FAIL: no libcrema.so.X in $runtime_deb" >&2
    exit 1
  }
  check_files "$dev_deb" include/crema/net.hpp include/crema/solver.hpp include/crema/crema.pb.h \
    share/crema/proto/crema.proto lib/cmake/crema/cremaConfig.cmake lib/pkgconfig/crema.pc
  depends="$(dpkg-deb -f "$runtime_deb" Depends)"
  for package in libprotobuf libgoogle-glog libgflags libopenblas liblmdb; do
    grep -q "$package" <<<"$depends" || {
      echo "FAIL: crema does not depend on $package: $depends" >&2
      exit 1
    }
  done
  grep -q 'crema (= ' <<<"$(dpkg-deb -f "$dev_deb" Depends)" || {
    echo "FAIL: crema-dev does not depend on crema" >&2
    exit 1
  }
  pass "cpack -G DEB: files and dependencies"

  if [ "$system" = 1 ] && dpkg -s crema >/dev/null 2>&1; then
    echo "package_test: a crema package is installed already; checking the .deb unpacked instead"
    system=0
  fi
  if [ "$system" = 1 ]; then
    installed_packages="crema-dev crema"
    apt-get install -y -q "$runtime_deb" "$dev_deb" >"$work/apt.log" 2>&1 || {
      cat "$work/apt.log"
      exit 1
    }
    crema=/usr/bin/crema
    [ "$(command -v crema)" = /usr/bin/crema ] || echo "note: crema on PATH is $(command -v crema)"
    "$crema" --version
    train_lenet "$crema"
    pass "apt-get install ./crema_*.deb, then crema train"

    cmake -S examples/embed -B "$work/embed" -DCMAKE_BUILD_TYPE=Release >"$work/embed.log" 2>&1 &&
      cmake --build "$work/embed" >>"$work/embed.log" 2>&1 || {
      cat "$work/embed.log"
      exit 1
    }
    (cd "$work" && CREMA_OPENBLAS_FIX=0 "$work/embed/crema-embed" lenet/lenet_solver.prototxt \
      "$root/models/lenet/lenet.prototxt" 20)
    pass "examples/embed built with find_package(crema) from crema-dev"

    completed="$(bash -c 'source /usr/share/bash-completion/completions/crema
      COMP_WORDS=(crema tra); COMP_CWORD=1; _crema; echo "${COMPREPLY[*]}"')"
    [ "$completed" = train ] || {
      echo "FAIL: bash completion of 'crema tra' gave '$completed'" >&2
      exit 1
    }
    pass "bash completion from /usr/share/bash-completion"

    if dpkg-deb -c "$runtime_deb" | grep 'dist-packages/crema/__init__.py' >/dev/null &&
      /usr/bin/python3 -c 'import numpy, google.protobuf' 2>/dev/null; then
      (cd "$work" && env -u PYTHONPATH /usr/bin/python3 -c "
import crema
assert crema.__file__.startswith('/usr/lib/python3/dist-packages/'), crema.__file__
net = crema.Net('$root/models/lenet/lenet.prototxt', crema.TEST)
print('package_test: import crema from', crema.__file__, '->', net.forward()['prob'].shape)")
      pass "import crema with Debian's python3"
    fi
  else
    unpacked="$work/unpacked"
    dpkg -x "$runtime_deb" "$unpacked"
    dpkg -x "$dev_deb" "$unpacked"
    "$unpacked/usr/bin/crema" --version
    train_lenet "$unpacked/usr/bin/crema"
    pass "the .deb unpacked (dpkg -x), then crema train"
  fi
fi
echo "package_test: $passed passed, 0 failed"
