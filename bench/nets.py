#!/usr/bin/env python3
"""Writes the benchmark nets as crema/Caffe prototxts (plain Python 3, no packages).

    python3 bench/nets.py OUTDIR [--cpu | --small] [--batch NAME=B ...]

AlexNet (batch 128), VGG-19, ResNet-50, MobileNet v1 and GoogLeNet (batch 64) for the GPU bench;
LeNet (1x28x28), CIFAR-10 quick (3x32x32), CaffeNet (227) and SqueezeNet v1.1 (227) besides. With
--cpu the batch sizes are those of the CPU bench (CPU_BATCH). With --small only the GPU bench's
small-batch nets, at SMALL_BATCH: LeNet 64, CIFAR-10 quick 100, MobileNet v1 8, ResNet-50 8
(whole-iteration CUDA graphs, bench/gpu_bench.sh). --batch NAME=B (repeatable, any mode) writes net
NAME (a file name, without .prototxt) at batch B, besides or instead of the mode's. Each net is fed
by a DummyData layer (3x224x224 unless said otherwise, and a label; constant, so that no time goes
to generating inputs) and ends in SoftmaxWithLoss, with the layer structure of the published Caffe
definitions. bench/torch_train.py builds the PyTorch equivalent of each file, so both frameworks
run the same net. Beside each NAME.prototxt, NAME.solver.prototxt trains it with plain SGD (SOLVER).
"""
import os
import sys


class Net:
    def __init__(self, name, batch, size, channels=3):
        self.lines = [f'name: "{name}"']
        self.layer("data", "DummyData", [], ["data", "label"],
                   f"dummy_data_param {{ shape {{ dim: {batch} dim: {channels} dim: {size} dim: {size} }} "
                   f"shape {{ dim: {batch} }} data_filler {{ type: \"constant\" value: 0.5 }} "
                   f"data_filler {{ type: \"constant\" value: 1 }} }}")

    def layer(self, name, type_, bottoms, tops, params=""):
        b = " ".join(f'bottom: "{x}"' for x in bottoms)
        t = " ".join(f'top: "{x}"' for x in tops)
        self.lines.append(f'layer {{ name: "{name}" type: "{type_}" {b} {t} {params} }}')
        return tops[0] if tops else None

    def conv(self, name, bottom, num, k, stride=1, pad=0, group=1, bias=True):
        p = (f"convolution_param {{ num_output: {num} kernel_size: {k} stride: {stride} pad: {pad} "
             f"group: {group} bias_term: {'true' if bias else 'false'} "
             f"weight_filler {{ type: \"msra\" }} }}")
        return self.layer(name, "Convolution", [bottom], [name], p)

    def relu(self, name, x):
        return self.layer(name, "ReLU", [x], [x])

    def pool(self, name, x, method, k, stride, pad=0):
        return self.layer(name, "Pooling", [x], [name],
                          f"pooling_param {{ pool: {method} kernel_size: {k} stride: {stride} pad: {pad} }}")

    def global_ave(self, name, x):
        return self.layer(name, "Pooling", [x], [name], "pooling_param { pool: AVE global_pooling: true }")

    def lrn(self, name, x):
        return self.layer(name, "LRN", [x], [name],
                          "lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 }")

    def fc(self, name, x, num):
        return self.layer(name, "InnerProduct", [x], [name],
                          f"inner_product_param {{ num_output: {num} weight_filler {{ type: \"xavier\" }} }}")

    def dropout(self, name, x):
        return self.layer(name, "Dropout", [x], [x], "dropout_param { dropout_ratio: 0.5 }")

    def bn_scale(self, name, x, relu=True):
        self.layer("bn_" + name, "BatchNorm", [x], [x])
        self.layer("scale_" + name, "Scale", [x], [x], "scale_param { bias_term: true }")
        return self.relu("relu_" + name, x) if relu else x

    def loss(self, x):
        self.layer("loss", "SoftmaxWithLoss", [x, "label"], ["loss"])

    def text(self):
        return "\n".join(self.lines) + "\n"


def alexnet(batch=128, name="AlexNet", pool_before_norm=False):
    # CaffeNet (pool_before_norm) is AlexNet with each pooling before its normalisation.
    n = Net(name, batch, 227)

    def pool_norm(i, x):
        if pool_before_norm:
            return n.lrn(f"norm{i}", n.pool(f"pool{i}", x, "MAX", 3, 2))
        return n.pool(f"pool{i}", n.lrn(f"norm{i}", x), "MAX", 3, 2)

    x = pool_norm(1, n.relu("relu1", n.conv("conv1", "data", 96, 11, stride=4)))
    x = pool_norm(2, n.relu("relu2", n.conv("conv2", x, 256, 5, pad=2, group=2)))
    x = n.relu("relu3", n.conv("conv3", x, 384, 3, pad=1))
    x = n.relu("relu4", n.conv("conv4", x, 384, 3, pad=1, group=2))
    x = n.relu("relu5", n.conv("conv5", x, 256, 3, pad=1, group=2))
    x = n.pool("pool5", x, "MAX", 3, 2)
    x = n.dropout("drop6", n.relu("relu6", n.fc("fc6", x, 4096)))
    x = n.dropout("drop7", n.relu("relu7", n.fc("fc7", x, 4096)))
    n.loss(n.fc("fc8", x, 1000))
    return n


def vgg19(batch=64):
    n = Net("VGG19", batch, 224)
    x = "data"
    for stage, (num, reps) in enumerate([(64, 2), (128, 2), (256, 4), (512, 4), (512, 4)], 1):
        for r in range(1, reps + 1):
            x = n.relu(f"relu{stage}_{r}", n.conv(f"conv{stage}_{r}", x, num, 3, pad=1))
        x = n.pool(f"pool{stage}", x, "MAX", 2, 2)
    x = n.dropout("drop6", n.relu("relu6", n.fc("fc6", x, 4096)))
    x = n.dropout("drop7", n.relu("relu7", n.fc("fc7", x, 4096)))
    n.loss(n.fc("fc8", x, 1000))
    return n


def resnet50(batch=64):
    n = Net("ResNet-50", batch, 224)
    x = n.bn_scale("conv1", n.conv("conv1", "data", 64, 7, stride=2, pad=3, bias=False))
    x = n.pool("pool1", x, "MAX", 3, 2)
    for stage, (mid, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)], 2):
        for b in range(blocks):
            name = f"res{stage}{chr(ord('a') + b)}"
            stride = 2 if (b == 0 and stage > 2) else 1
            if b == 0:
                shortcut = n.bn_scale(name + "_branch1", n.conv(name + "_branch1", x, mid * 4, 1,
                                                                stride=stride, bias=False), relu=False)
            else:
                shortcut = x
            y = n.bn_scale(name + "_branch2a", n.conv(name + "_branch2a", x, mid, 1, stride=stride, bias=False))
            y = n.bn_scale(name + "_branch2b", n.conv(name + "_branch2b", y, mid, 3, pad=1, bias=False))
            y = n.bn_scale(name + "_branch2c", n.conv(name + "_branch2c", y, mid * 4, 1, bias=False), relu=False)
            x = n.layer(name, "Eltwise", [shortcut, y], [name])
            x = n.relu(name + "_relu", x)
    x = n.global_ave("pool5", x)
    n.loss(n.fc("fc1000", x, 1000))
    return n


def mobilenet_v1(batch=64):
    n = Net("MobileNet", batch, 224)
    x = n.bn_scale("conv1", n.conv("conv1", "data", 32, 3, stride=2, pad=1, bias=False))
    channels = 32
    for i, (out, stride) in enumerate([(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                                       (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2),
                                       (1024, 1)], 2):
        x = n.bn_scale(f"conv{i}_dw", n.conv(f"conv{i}_dw", x, channels, 3, stride=stride, pad=1,
                                             group=channels, bias=False))
        x = n.bn_scale(f"conv{i}_pw", n.conv(f"conv{i}_pw", x, out, 1, bias=False))
        channels = out
    x = n.global_ave("pool6", x)
    n.loss(n.fc("fc7", x, 1000))
    return n


def googlenet(batch=64):
    n = Net("GoogLeNet", batch, 224)
    x = n.relu("conv1_relu", n.conv("conv1", "data", 64, 7, stride=2, pad=3))
    x = n.lrn("pool1_norm1", n.pool("pool1", x, "MAX", 3, 2))
    x = n.relu("conv2_relu_reduce", n.conv("conv2_reduce", x, 64, 1))
    x = n.relu("conv2_relu", n.conv("conv2", x, 192, 3, pad=1))
    x = n.pool("pool2", n.lrn("conv2_norm2", x), "MAX", 3, 2)

    def inception(name, x, c1, c3r, c3, c5r, c5, cp):
        a = n.relu(name + "_relu_1x1", n.conv(name + "_1x1", x, c1, 1))
        b = n.relu(name + "_relu_3x3_reduce", n.conv(name + "_3x3_reduce", x, c3r, 1))
        b = n.relu(name + "_relu_3x3", n.conv(name + "_3x3", b, c3, 3, pad=1))
        c = n.relu(name + "_relu_5x5_reduce", n.conv(name + "_5x5_reduce", x, c5r, 1))
        c = n.relu(name + "_relu_5x5", n.conv(name + "_5x5", c, c5, 5, pad=2))
        d = n.pool(name + "_pool", x, "MAX", 3, 1, pad=1)
        d = n.relu(name + "_relu_pool_proj", n.conv(name + "_pool_proj", d, cp, 1))
        return n.layer(name + "_output", "Concat", [a, b, c, d], [name + "_output"])

    x = inception("inception_3a", x, 64, 96, 128, 16, 32, 32)
    x = inception("inception_3b", x, 128, 128, 192, 32, 96, 64)
    x = n.pool("pool3", x, "MAX", 3, 2)
    for name, cfg in [("4a", (192, 96, 208, 16, 48, 64)), ("4b", (160, 112, 224, 24, 64, 64)),
                      ("4c", (128, 128, 256, 24, 64, 64)), ("4d", (112, 144, 288, 32, 64, 64)),
                      ("4e", (256, 160, 320, 32, 128, 128))]:
        x = inception("inception_" + name, x, *cfg)
    x = n.pool("pool4", x, "MAX", 3, 2)
    x = inception("inception_5a", x, 256, 160, 320, 32, 128, 128)
    x = inception("inception_5b", x, 384, 192, 384, 48, 128, 128)
    x = n.dropout("pool5_drop", n.global_ave("pool5", x))
    n.loss(n.fc("loss3_classifier", x, 1000))
    return n


def lenet(batch=64):
    # models/lenet (Caffe's examples/mnist/lenet_train_test.prototxt).
    n = Net("LeNet", batch, 28, channels=1)
    x = n.pool("pool1", n.conv("conv1", "data", 20, 5), "MAX", 2, 2)
    x = n.pool("pool2", n.conv("conv2", x, 50, 5), "MAX", 2, 2)
    x = n.relu("relu1", n.fc("ip1", x, 500))
    n.loss(n.fc("ip2", x, 10))
    return n


def cifar10_quick(batch=100):
    # Caffe's examples/cifar10/cifar10_quick_train_test.prototxt.
    n = Net("CIFAR10_quick", batch, 32)
    x = n.relu("relu1", n.pool("pool1", n.conv("conv1", "data", 32, 5, pad=2), "MAX", 3, 2))
    x = n.pool("pool2", n.relu("relu2", n.conv("conv2", x, 32, 5, pad=2)), "AVE", 3, 2)
    x = n.pool("pool3", n.relu("relu3", n.conv("conv3", x, 64, 5, pad=2)), "AVE", 3, 2)
    n.loss(n.fc("ip2", n.fc("ip1", x, 64), 10))
    return n


def caffenet(batch=16):
    # Caffe's models/bvlc_reference_caffenet.
    return alexnet(batch, "CaffeNet", pool_before_norm=True)


def squeezenet_v1_1(batch=16):
    # DeepScale's SqueezeNet_v1.1/train_val.prototxt.
    n = Net("SqueezeNet_v1.1", batch, 227)
    x = n.pool("pool1", n.relu("relu_conv1", n.conv("conv1", "data", 64, 3, stride=2)), "MAX", 3, 2)

    def fire(name, x, squeeze, expand):
        s = n.relu(name + "/relu_squeeze1x1", n.conv(name + "/squeeze1x1", x, squeeze, 1))
        a = n.relu(name + "/relu_expand1x1", n.conv(name + "/expand1x1", s, expand, 1))
        b = n.relu(name + "/relu_expand3x3", n.conv(name + "/expand3x3", s, expand, 3, pad=1))
        return n.layer(name + "/concat", "Concat", [a, b], [name + "/concat"])

    x = fire("fire3", fire("fire2", x, 16, 64), 16, 64)
    x = n.pool("pool3", x, "MAX", 3, 2)
    x = fire("fire5", fire("fire4", x, 32, 128), 32, 128)
    x = n.pool("pool5", x, "MAX", 3, 2)
    for i, (squeeze, expand) in enumerate([(48, 192), (48, 192), (64, 256), (64, 256)], 6):
        x = fire(f"fire{i}", x, squeeze, expand)
    x = n.dropout("drop9", x)
    x = n.relu("relu_conv10", n.conv("conv10", x, 1000, 1))
    n.loss(n.global_ave("pool10", x))
    return n


NETS = {"alexnet": alexnet, "vgg19": vgg19, "resnet50": resnet50, "mobilenet_v1": mobilenet_v1,
        "googlenet": googlenet, "lenet": lenet, "cifar10_quick": cifar10_quick,
        "bvlc_reference_caffenet": caffenet, "squeezenet_v1.1": squeezenet_v1_1}
# The CPU bench's batch sizes (bench/cpu_bench.sh).
CPU_BATCH = {"lenet": 64, "cifar10_quick": 100, "bvlc_reference_caffenet": 16, "bvlc_googlenet": 8,
             "squeezenet_v1.1": 16, "mobilenet_v1": 16, "resnet50": 8}
CPU_NETS = {"bvlc_googlenet": googlenet}

# The GPU bench's small-batch rows (bench/gpu_bench.sh, CUDA graphs on and off).
SMALL_BATCH = {"lenet": 64, "cifar10_quick": 100, "mobilenet_v1": 8, "resnet50": 8}


# Caffe's SGD with the update PyTorch's torch.optim.SGD(lr, momentum, weight_decay) does (the
# settings bench/torch_train.py is given), for `crema time --solver` and `caffe time`.
SOLVER = """net: "{net}"
base_lr: 0.000001
momentum: 0.9
weight_decay: 0.0005
lr_policy: "fixed"
max_iter: 2000000000
"""


def main(argv):
    usage = "usage: nets.py OUTDIR [--cpu | --small] [--batch NAME=B ...]"
    outdir, mode, batch = None, None, {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--cpu", "--small"):
            if mode and mode != a:
                sys.exit(f"nets.py: --cpu and --small exclude each other\n{usage}")
            mode = a
        elif a == "--batch" or a.startswith("--batch="):
            if a == "--batch":
                i += 1
                if i == len(argv):
                    sys.exit(f"nets.py: --batch needs NAME=B\n{usage}")
                a = argv[i]
            else:
                a = a[len("--batch="):]
            name, _, b = a.partition("=")
            if name not in NETS and name not in CPU_NETS:
                sys.exit(f"nets.py: --batch: unknown net \"{name}\" (known: "
                         f"{', '.join(sorted(list(NETS) + list(CPU_NETS)))})")
            if not b.isdigit() or int(b) < 1:
                sys.exit(f"nets.py: --batch {a}: B must be a positive integer")
            batch[name] = int(b)
        elif a.startswith("-") or outdir is not None:
            sys.exit(usage)
        else:
            outdir = a
        i += 1
    if outdir is None:
        sys.exit(usage)
    if mode == "--cpu":
        sizes = dict(CPU_BATCH)
    elif mode == "--small":
        sizes = dict(SMALL_BATCH)
    else:
        sizes = {name: None for name in NETS}  # None: each net's default batch
    sizes.update(batch)
    os.makedirs(outdir, exist_ok=True)
    for name, b in sizes.items():
        make = NETS.get(name) or CPU_NETS[name]
        net = os.path.abspath(os.path.join(outdir, name + ".prototxt"))
        with open(net, "w") as f:
            f.write((make() if b is None else make(b)).text())
        with open(os.path.join(outdir, name + ".solver.prototxt"), "w") as f:
            f.write(SOLVER.format(net=net))


if __name__ == "__main__":
    main(sys.argv[1:])
