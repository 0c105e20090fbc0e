#!/usr/bin/env bash
# From a fresh checkout to a trained LeNet: installs dependencies, builds crema, converts
# Fashion-MNIST (from Debian's dataset-fashion-mnist package) to LMDB, trains LeNet with Caffe's
# solver settings (10,000 iterations, batch 64) and prints the test accuracy of the final
# snapshot with `crema test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
CREMA_BUILD_TARGETS="crema_cli" scripts/build.sh
crema=build/crema
data/fashion_mnist/get_fashion_mnist.sh "$crema"
mkdir -p models/lenet/snapshots
start=$(date +%s)
"$crema" train --solver models/lenet/lenet_solver.prototxt
end=$(date +%s)
echo "quickstart: training took $((end - start)) s"
"$crema" test --model models/lenet/lenet_train_test.prototxt \
  --weights models/lenet/snapshots/lenet_iter_10000.caffemodel --iterations 100 2>/dev/null |
  tee models/lenet/snapshots/test_scores.txt
accuracy=$(grep -E '^accuracy = ' models/lenet/snapshots/test_scores.txt | awk '{print $3}')
echo "quickstart: LeNet Fashion-MNIST test accuracy: ${accuracy}"
