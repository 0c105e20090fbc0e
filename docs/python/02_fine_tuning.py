"""pycaffe's fine-tuning notebook as a script: start a net from trained weights (copied layer by
layer by name), give it a new classifier layer, freeze the feature layers (lr_mult 0), and
compare with the same net trained from scratch for the same few iterations.

    PYTHONPATH=build/python /usr/bin/python3 docs/python/02_fine_tuning.py \
        --weights /tmp/lenet/lenet_final.caffemodel --train ... --test ... --iters 50
"""
import argparse
import os

import numpy as np

import crema
from lenet_netspec import lenet, test_accuracy, write_solver


def train(args, name, weights, frozen):
    out = os.path.join(args.out, name)
    os.makedirs(out, exist_ok=True)
    train_net = os.path.join(out, 'train.prototxt')
    test_net = os.path.join(out, 'test.prototxt')
    with open(train_net, 'w') as f:
        f.write(str(lenet(args.train, 64, classifier='ip2_ft', frozen=frozen)))
    with open(test_net, 'w') as f:
        f.write(str(lenet(args.test, 100, classifier='ip2_ft')))
    solver_file = os.path.join(out, 'solver.prototxt')
    write_solver(solver_file, train_net, test_net, base_lr=0.005, max_iter=args.iters,
                 prefix=os.path.join(out, name))
    solver = crema.get_solver(solver_file)
    if weights:
        # Layers whose names match (conv1, conv2, fc1) take the trained weights; ip2_ft is new.
        solver.net.copy_from(weights)
        solver.test_nets[0].share_with(solver.net)
    before = solver.net.params['conv1'][0].data.copy()
    solver.step(args.iters)
    accuracy = test_accuracy(solver.test_nets[0], 5, classifier='ip2_ft')
    changed = float(np.abs(solver.net.params['conv1'][0].data - before).max())
    return accuracy, changed, solver


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--weights', required=True, help='a trained LeNet (01_learning_lenet)')
    parser.add_argument('--train', default='data/fashion_mnist/fashion_mnist_train_lmdb')
    parser.add_argument('--test', default='data/fashion_mnist/fashion_mnist_test_lmdb')
    parser.add_argument('--iters', type=int, default=50)
    parser.add_argument('--out', default='finetune_tutorial')
    args = parser.parse_args()
    pretrained = crema.Net(lenet_file(args), args.weights, crema.TEST)
    print('pretrained layers:', list(pretrained.params))
    ft_acc, ft_changed, solver = train(args, 'finetune', args.weights, frozen=True)
    trained_conv1 = pretrained.params['conv1'][0].data
    same = np.array_equal(solver.net.params['conv1'][0].data, trained_conv1)
    scratch_acc, _, _ = train(args, 'scratch', None, frozen=False)
    print('frozen conv1 kept the trained weights: %s (max change %g)' % (same, ft_changed))
    print('fine-tuned accuracy %.3f, from scratch %.3f' % (ft_acc, scratch_acc))


def lenet_file(args):
    path = os.path.join(args.out, 'pretrained_deploy.prototxt')
    os.makedirs(args.out, exist_ok=True)
    with open(path, 'w') as f:
        f.write(str(lenet(args.test, 1)))
    return path


if __name__ == '__main__':
    main()
