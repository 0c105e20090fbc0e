#!/usr/bin/env python3
"""Checks an ONNX model with onnx.checker and runs it with onnxruntime (for onnx_test.cpp).

usage: onnx_check.py MODEL.onnx OUT_DIR [NAME=INPUT.npy ...]
Writes each graph output to OUT_DIR/<name>.npy (characters outside [A-Za-z0-9_.-] become '~',
as `crema forward` names its files). Exit 77 when onnx or onnxruntime is not installed.
"""
import os
import re
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
except ImportError as e:  # the test skips
    print("missing python package:", e)
    sys.exit(77)


def main():
    model_path, out_dir = sys.argv[1], sys.argv[2]
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    feeds = {}
    for pair in sys.argv[3:]:
        name, path = pair.split("=", 1)
        feeds[name] = np.load(path).astype(np.float32)
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    outputs = session.run(None, feeds)
    os.makedirs(out_dir, exist_ok=True)
    for info, value in zip(session.get_outputs(), outputs):
        name = re.sub(r"[^A-Za-z0-9_.-]", "~", info.name)
        np.save(os.path.join(out_dir, name + ".npy"), value.astype(np.float32))
        print(info.name, value.shape)


if __name__ == "__main__":
    main()
