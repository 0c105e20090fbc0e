"""pycaffe's 01-learning-lenet notebook as a script: NetSpec writes the nets, a solver trains
them step by step, and we read blobs and params and compute test accuracy in Python.

    PYTHONPATH=build/python /usr/bin/python3 docs/python/01_learning_lenet.py \
        --train ../shared/reference/bvlc/fmnist_small/train_lmdb \
        --test ../shared/reference/bvlc/fmnist_small/test_lmdb --iters 200 --out /tmp/lenet
"""
import argparse
import os

import numpy as np

import crema
from lenet_netspec import lenet, test_accuracy, write_solver


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--train', default='data/fashion_mnist/fashion_mnist_train_lmdb')
    parser.add_argument('--test', default='data/fashion_mnist/fashion_mnist_test_lmdb')
    parser.add_argument('--iters', type=int, default=200)
    parser.add_argument('--out', default='lenet_tutorial')
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    # 1. The nets, written with NetSpec.
    train_net = os.path.join(args.out, 'lenet_auto_train.prototxt')
    test_net = os.path.join(args.out, 'lenet_auto_test.prototxt')
    with open(train_net, 'w') as f:
        f.write(str(lenet(args.train, 64)))
    with open(test_net, 'w') as f:
        f.write(str(lenet(args.test, 100)))
    solver_file = os.path.join(args.out, 'lenet_auto_solver.prototxt')
    write_solver(solver_file, train_net, test_net, max_iter=args.iters,
                 prefix=os.path.join(args.out, 'lenet'))

    # 2. The solver; the blobs and params of its nets.
    crema.set_mode_cpu()
    solver = crema.SGDSolver(solver_file)
    print('blobs:', [(k, v.data.shape) for k, v in solver.net.blobs.items()])
    print('params:', [(k, v[0].data.shape) for k, v in solver.net.params.items()])

    # 3. One forward pass on each net, then one step.
    solver.net.forward()
    solver.test_nets[0].forward()
    print('train labels:', solver.net.blobs['label'].data[:8])
    solver.step(1)
    print('conv1 weight diff, first filter:', solver.net.params['conv1'][0].diff[0, 0, 0])

    # 4. Training, recording the loss and, every 25 iterations, the test accuracy.
    train_loss = np.zeros(args.iters)
    accuracies = []
    for it in range(args.iters):
        solver.step(1)
        train_loss[it] = solver.net.blobs['loss'].data
        if it % 25 == 0 or it == args.iters - 1:
            accuracies.append((it, test_accuracy(solver.test_nets[0], 5)))
            print('iteration %d: loss %.4f, test accuracy %.3f' % (it, train_loss[it],
                                                                 accuracies[-1][1]))
    model = os.path.join(args.out, 'lenet_final.caffemodel')
    solver.net.save(model)
    print('first loss %.4f, last loss %.4f' % (train_loss[0], train_loss[-1]))
    print('final test accuracy %.3f' % accuracies[-1][1])
    print('weights: %s' % model)


if __name__ == '__main__':
    main()
