#!/usr/bin/env python3
"""PyTorch side of the GPU benchmark: builds the net of a crema/Caffe prototxt (the layer types
bench/nets.py uses) as a torch.nn.Module and times training iterations (forward, backward, SGD
step) on the GPU. Uses the python3 that has PyTorch (on the GPU machine: the default python3).

    python3 bench/torch_train.py NET.prototxt [--iterations N] [--math fp32|tf32]

Prints one line: `torch <net> <math> ms_per_iter=<x> images_per_s=<y> peak_mib=<z>`.
"""
import argparse
import re
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_prototxt(text):
    """A small text-format parser: returns nested dicts, repeated fields as lists."""
    tokens = re.findall(r'"[^"]*"|[{}:]|[^\s{}:"]+', re.sub(r"#.*", "", text))
    pos = 0

    def block():
        nonlocal pos
        out = {}
        while pos < len(tokens) and tokens[pos] != "}":
            key = tokens[pos]
            pos += 1
            if tokens[pos] == ":":
                pos += 1
            if tokens[pos] == "{":
                pos += 1
                value = block()
                pos += 1
            else:
                value = tokens[pos].strip('"')
                pos += 1
            out.setdefault(key, []).append(value)
        return out

    return block()


def first(d, key, default=None, cast=str):
    return cast(d[key][0]) if key in d else default


class CaffeNet(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.steps = []
        self.mods = nn.ModuleDict()
        shapes = {}
        for layer in net["layer"]:
            t, name = first(layer, "type"), first(layer, "name")
            bottoms, tops = layer.get("bottom", []), layer.get("top", [])
            if t == "DummyData":
                p = layer["dummy_data_param"][0]
                shapes = {top: [int(x) for x in s["dim"]] for top, s in zip(tops, p["shape"])}
                self.input_shapes = shapes
                continue
            c = shapes[bottoms[0]][1] if bottoms and bottoms[0] in shapes and len(shapes[bottoms[0]]) > 1 else None
            mod = None
            if t == "Convolution":
                p = layer["convolution_param"][0]
                k, s, pd = first(p, "kernel_size", 1, int), first(p, "stride", 1, int), first(p, "pad", 0, int)
                out = first(p, "num_output", cast=int)
                mod = nn.Conv2d(c, out, k, s, pd, groups=first(p, "group", 1, int),
                                bias=first(p, "bias_term", "true") == "true")
                h = (shapes[bottoms[0]][2] + 2 * pd - k) // s + 1
                shapes[tops[0]] = [shapes[bottoms[0]][0], out, h, h]
            elif t == "Pooling":
                p = layer["pooling_param"][0]
                n, _, h, _ = shapes[bottoms[0]]
                if first(p, "global_pooling", "false") == "true":
                    mod = nn.AdaptiveAvgPool2d(1)
                    oh = 1
                else:
                    k, s, pd = first(p, "kernel_size", cast=int), first(p, "stride", 1, int), first(p, "pad", 0, int)
                    # Caffe rounds the output size up (ceil_mode), as PyTorch with ceil_mode=True.
                    mod = (nn.MaxPool2d(k, s, pd, ceil_mode=True) if first(p, "pool", "MAX") == "MAX"
                           else nn.AvgPool2d(k, s, pd, ceil_mode=True, count_include_pad=True))
                    oh = -(-(h + 2 * pd - k) // s) + 1
                    if pd > 0 and (oh - 1) * s >= h + pd:
                        oh -= 1
                shapes[tops[0]] = [n, c, oh, oh]
            elif t == "ReLU":
                mod = nn.ReLU(inplace=True)
                shapes[tops[0]] = shapes[bottoms[0]]
            elif t == "LRN":
                p = layer["lrn_param"][0]
                mod = nn.LocalResponseNorm(first(p, "local_size", 5, int), first(p, "alpha", 1.0, float),
                                           first(p, "beta", 0.75, float), first(p, "k", 1.0, float))
                shapes[tops[0]] = shapes[bottoms[0]]
            elif t == "InnerProduct":
                p = layer["inner_product_param"][0]
                size = 1
                for d in shapes[bottoms[0]][1:]:
                    size *= d
                out = first(p, "num_output", cast=int)
                mod = nn.Sequential(nn.Flatten(), nn.Linear(size, out))
                shapes[tops[0]] = [shapes[bottoms[0]][0], out]
            elif t == "Dropout":
                mod = nn.Dropout(first(layer["dropout_param"][0], "dropout_ratio", 0.5, float))
                shapes[tops[0]] = shapes[bottoms[0]]
            elif t == "BatchNorm":
                mod = nn.BatchNorm2d(c, affine=False, eps=1e-5, momentum=0.001)
                shapes[tops[0]] = shapes[bottoms[0]]
            elif t == "Scale":
                mod = _Scale(c)
                shapes[tops[0]] = shapes[bottoms[0]]
            elif t == "Eltwise":
                shapes[tops[0]] = shapes[bottoms[0]]
            elif t == "Concat":
                s = list(shapes[bottoms[0]])
                s[1] = sum(shapes[b][1] for b in bottoms)
                shapes[tops[0]] = s
            elif t == "SoftmaxWithLoss":
                pass
            else:
                raise SystemExit(f"torch_train.py: layer type {t} is not supported")
            if mod is not None:
                self.mods[name.replace(".", "_")] = mod
            self.steps.append((t, name.replace(".", "_"), bottoms, tops))

    def forward(self, blobs):
        for t, name, bottoms, tops in self.steps:
            if t == "Eltwise":
                blobs[tops[0]] = blobs[bottoms[0]] + blobs[bottoms[1]]
            elif t == "Concat":
                blobs[tops[0]] = torch.cat([blobs[b] for b in bottoms], 1)
            elif t == "SoftmaxWithLoss":
                return F.cross_entropy(blobs[bottoms[0]], blobs[bottoms[1]])
            else:
                blobs[tops[0]] = self.mods[name](blobs[bottoms[0]])
        raise SystemExit("torch_train.py: the net has no SoftmaxWithLoss")


class _Scale(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1, c, 1, 1))
        self.bias = nn.Parameter(torch.zeros(1, c, 1, 1))

    def forward(self, x):
        return x * self.weight + self.bias


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prototxt")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--math", choices=["fp32", "tf32"], default="fp32")
    args = ap.parse_args()
    tf32 = args.math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    net_def = parse_prototxt(open(args.prototxt).read())
    model = CaffeNet(net_def).cuda()
    data_shape = model.input_shapes["data"]
    batch = data_shape[0]
    data = torch.full(data_shape, 0.5, device="cuda")
    label = torch.ones(batch, dtype=torch.long, device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = model({"data": data, "label": label})
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.iterations):
        step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) * 1000 / args.iterations
    peak = torch.cuda.max_memory_allocated() / 2**20
    name = first(net_def, "name", "net")
    print(f"torch {name} {args.math} ms_per_iter={ms:.3f} images_per_s={batch * 1000 / ms:.1f} "
          f"peak_mib={peak:.0f}")


if __name__ == "__main__":
    main()
