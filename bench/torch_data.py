#!/usr/bin/python3
"""PyTorch's side of bench/data_bench.sh: a DataLoader over the same Caffe LMDB of encoded JPEGs.

    /usr/bin/python3 bench/torch_data.py LMDB --batch 64 --crop 227 --mean 104,117,123 \
        --workers 2 --batches 100

Each item is what crema's Data layer makes of a record in TRAIN phase: the Datum is parsed (a
small protobuf decoder below, fields channels/height/width/data/label/encoded), the JPEG decoded
with OpenCV (BGR, as Caffe), a random crop x crop window taken, flipped horizontally with
probability 1/2, the per-channel mean subtracted, and the result made a float32 C x H x W tensor;
the DataLoader collates batches. Records are read in key order, as crema's Data layer reads them.
Prints one line: images_per_s=... after --warmup batches (not timed).
Runs with Debian's /usr/bin/python3, which has torch, lmdb, cv2 and numpy.
"""
import argparse
import time

import cv2
import lmdb
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def parse_datum(buf):
    """Caffe's Datum: 1 channels, 2 height, 3 width, 4 data, 5 label, 6 float_data, 7 encoded."""
    datum = {"channels": 0, "height": 0, "width": 0, "data": b"", "label": 0, "encoded": False}
    names = {1: "channels", 2: "height", 3: "width", 5: "label"}
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
            if field in names:
                datum[names[field]] = value
            elif field == 7:
                datum["encoded"] = bool(value)
        elif wire == 2:
            size, pos = varint(buf, pos)
            if field == 4:
                datum["data"] = buf[pos:pos + size]
            pos += size
        elif wire == 5:
            pos += 4
        elif wire == 1:
            pos += 8
        else:
            raise ValueError(f"unexpected wire type {wire}")
    if datum["label"] >= 1 << 31:
        datum["label"] -= 1 << 64
    return datum


class LmdbImages(Dataset):
    def __init__(self, path, crop, mean):
        self.path, self.crop = path, crop
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1, 1, 1)
        with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
            self.keys = [key for key, _ in txn.cursor()]
        self.txn = None

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, index):
        if self.txn is None:  # opened in each worker process
            self.txn = lmdb.open(self.path, readonly=True, lock=False, readahead=False).begin()
        datum = parse_datum(self.txn.get(self.keys[index]))
        if datum["encoded"]:
            image = cv2.imdecode(np.frombuffer(datum["data"], np.uint8), cv2.IMREAD_COLOR)
        else:
            image = np.frombuffer(datum["data"], np.uint8).reshape(
                datum["channels"], datum["height"], datum["width"]).transpose(1, 2, 0)
        h, w = image.shape[:2]
        y = np.random.randint(0, h - self.crop + 1)
        x = np.random.randint(0, w - self.crop + 1)
        image = image[y:y + self.crop, x:x + self.crop]
        if np.random.randint(2):
            image = image[:, ::-1]
        tensor = image.transpose(2, 0, 1).astype(np.float32) - self.mean
        return torch.from_numpy(tensor), datum["label"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("lmdb")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--crop", type=int, default=227)
    parser.add_argument("--mean", default="104,117,123")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    cv2.setNumThreads(1)
    dataset = LmdbImages(args.lmdb, args.crop, [float(v) for v in args.mean.split(",")])
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=False, num_workers=args.workers,
                        drop_last=True, persistent_workers=args.workers > 0,
                        worker_init_fn=lambda _: cv2.setNumThreads(1))
    done, start, images = 0, None, 0
    while done < args.warmup + args.batches:
        for data, _ in loader:
            if done == args.warmup:
                start = time.perf_counter()
            elif done > args.warmup:
                images += data.shape[0]
            done += 1
            if done == args.warmup + args.batches:
                break
    seconds = time.perf_counter() - start
    print(f"images_per_s={images / seconds:.1f} batches={args.batches} batch={args.batch} "
          f"workers={args.workers}")


if __name__ == "__main__":
    main()
