#!/usr/bin/env python3
"""PyTorch side of the GPU and CPU benchmarks: builds the net of a crema/Caffe prototxt (the
layer types bench/nets.py uses) as a torch.nn.Module and times training iterations (forward,
backward, SGD step) or inference passes (eval mode, forward only under torch.inference_mode).
Uses the python3 that has PyTorch (on the GPU machine: the default python3; on the CPU machine:
/usr/bin/python3, Debian's python3-torch).

    python3 bench/torch_train.py NET.prototxt [--iterations N] [--math fp32|tf32] [--cuda-graph]
    python3 bench/torch_train.py NET.prototxt --device cpu --threads T [--mode train|test]
        [--iterations N] [--seconds S] [--warmup W]

Prints one line: `torch <net> <math> ms_per_iter=<x> images_per_s=<y> peak_mib=<z>`; on the GPU
peak_mib is the peak of PyTorch's CUDA allocator, on the CPU the peak resident set size of the
process (run one case per process).

--cuda-graph (GPU, training): the whole step (forward, loss, backward, SGD step) captured into one
torch.cuda.CUDAGraph over static input and label tensors, as the PyTorch docs prescribe (warm-up
iterations on a side stream, gradients set to None before capture so that backward allocates them
from the graph's private pool), then timed as replays; the math tag reads e.g. `fp32+graph`, and
peak_mib covers the capture and the replays (their allocations live in the graph's pool).
"""
import argparse
import re
import resource
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
                # Caffe's softmax runs over axis 1; a N x C x 1 x 1 score is N x C.
                return F.cross_entropy(blobs[bottoms[0]].flatten(1), blobs[bottoms[1]])
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


def capture_train_step(model, opt, data, label, warmup):
    """Captures forward + loss + backward + opt.step() into one CUDA graph (the recipe of the
    torch.cuda.graph docs, "whole-network capture") and returns a function that replays it. data
    and label are the static inputs; the loss and the gradients are the graph's static outputs.
    Peak memory statistics are reset after the warm-up, so that the peak covers the capture."""
    # Warm-up on a side stream: cudnn.benchmark picks its algorithms, the optimizer creates its
    # momentum buffers, and nothing of that is captured.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            opt.zero_grad(set_to_none=True)
            model({"data": data, "label": label}).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    graph = torch.cuda.CUDAGraph()
    # None gradients: the captured backward allocates them from the graph's pool and each replay
    # writes them afresh (no zeroing kernel), as in the docs.
    opt.zero_grad(set_to_none=True)
    try:
        with torch.cuda.graph(graph):
            static_loss = model({"data": data, "label": label})
            static_loss.backward()
            opt.step()
    except RuntimeError as e:
        raise SystemExit(f"torch_train.py: CUDA graph capture failed: {e}")
    torch.cuda.synchronize()

    def replay():
        graph.replay()  # writes static_loss, the gradients, the weights and the momentum

    replay.static_loss = static_loss  # the graph's output, kept alive with it
    return replay


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prototxt")
    ap.add_argument("--iterations", type=int, default=20,
                    help="timed iterations (at least this many with --seconds)")
    ap.add_argument("--seconds", type=float, default=0,
                    help="keep timing until this many seconds have passed")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--math", choices=["fp32", "tf32", "fp16", "bf16"], default="fp32",
                    help="fp16/bf16: automatic mixed precision (torch.autocast; GradScaler for "
                         "fp16) with channels-last tensors and TF32 for what autocast leaves")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--threads", type=int, default=0, help="CPU: torch.set_num_threads (0: default)")
    ap.add_argument("--mode", choices=["train", "test"], default="train",
                    help="train: forward, backward, SGD step; test: eval-mode forward only")
    ap.add_argument("--momentum", type=float, default=0.0, help="SGD momentum")
    ap.add_argument("--weight_decay", type=float, default=0.0, help="SGD weight decay")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="capture the whole training step into one CUDA graph and time its replays")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    if args.cuda_graph:
        if not cuda:
            raise SystemExit("torch_train.py: --cuda-graph needs --device cuda (CUDA graphs exist "
                             "only on the GPU)")
        if args.mode != "train":
            raise SystemExit("torch_train.py: --cuda-graph captures a training step: it needs "
                             "--mode train")
        if not torch.cuda.is_available():
            raise SystemExit("torch_train.py: --cuda-graph: no CUDA device "
                             "(torch.cuda.is_available() is False)")
    amp = args.math in ("fp16", "bf16")
    if amp and (not cuda or args.cuda_graph or args.mode != "train"):
        raise SystemExit("torch_train.py: --math fp16|bf16 times GPU training (--device cuda, "
                         "--mode train, no --cuda-graph)")
    if cuda:
        tf32 = args.math != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True
    elif args.threads > 0:
        torch.set_num_threads(args.threads)
    net_def = parse_prototxt(open(args.prototxt).read())
    model = CaffeNet(net_def).to(args.device)
    data_shape = model.input_shapes["data"]
    batch = data_shape[0]
    data = torch.full(data_shape, 0.5, device=args.device)
    label = torch.ones(batch, dtype=torch.long, device=args.device)
    if amp:
        model = model.to(memory_format=torch.channels_last)
        if data.dim() == 4:
            data = data.contiguous(memory_format=torch.channels_last)
    amp_dtype = torch.float16 if args.math == "fp16" else torch.bfloat16
    # Only AMP runs (the GPU, PyTorch 2.x) build a scaler: Debian's PyTorch 1.13, which the CPU
    # bench runs, has no torch.amp.GradScaler.
    scaler = torch.amp.GradScaler("cuda", enabled=args.math == "fp16") if amp else None
    # Plain SGD is crema time --model's update (data -= diff, scaled); with momentum and weight
    # decay it does the arithmetic of Caffe's SGD solver (crema time --solver).
    opt = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=args.momentum,
                          weight_decay=args.weight_decay)

    def train_step():
        opt.zero_grad(set_to_none=False)
        loss = model({"data": data, "label": label})
        loss.backward()
        opt.step()

    def amp_train_step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=amp_dtype):
            loss = model({"data": data, "label": label})
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    def test_step():
        with torch.inference_mode():
            model({"data": data, "label": label})

    if args.mode == "test":
        model.eval()
        step = test_step
    else:
        step = amp_train_step if amp else train_step
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if args.cuda_graph:
        step = capture_train_step(model, opt, data, label, max(args.warmup, 3))
    for _ in range(args.warmup):
        step()
    sync()
    if cuda and not args.cuda_graph:
        torch.cuda.reset_peak_memory_stats()
    done = 0
    start = time.perf_counter()
    while done < args.iterations or time.perf_counter() - start < args.seconds:
        step()
        done += 1
    sync()
    ms = (time.perf_counter() - start) * 1000 / done
    if cuda:
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    name = first(net_def, "name", "net")
    tag = args.math if cuda else f"cpu-{args.mode}-{torch.get_num_threads()}t"
    if args.cuda_graph:
        tag += "+graph"
    print(f"torch {name} {tag} iterations={done} ms_per_iter={ms:.3f} "
          f"images_per_s={batch * 1000 / ms:.1f} peak_mib={peak:.0f}")


if __name__ == "__main__":
    main()
