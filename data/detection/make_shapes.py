#!/usr/bin/python3
"""A small synthetic object detection set: filled circles, squares and triangles (1 to 3 per
image, random colours, 20-60% of the image) on random textures (noise, stripes, gradients);
--classes picks other shapes (crosses too) or another order.

Writes, under --out: images/NNNNNN.png, annotations/NNNNNN.xml (Pascal VOC), train.txt and
test.txt ("images/N.png annotations/N.xml" lines for `crema convert-annoset`), labelmap.prototxt
(background 0, then the classes: circle 1, square 2, triangle 3 by default) and test_name_size.txt ("name height width").
Boxes are in pixels, edges of the shape's extent (xmax = xmin + width), so box / image size is the
normalized box. The same --seed gives the same files. Needs only python3 and numpy.
"""
import argparse
import os
import struct
import sys
import zlib

import numpy as np

SHAPES = ["circle", "square", "triangle", "cross"]
CLASSES = SHAPES[:3]  # --classes changes it


def png_bytes(image):
    """An 8-bit RGB PNG of an H x W x 3 uint8 array."""
    height, width, _ = image.shape
    raw = np.zeros((height, 1 + width * 3), dtype=np.uint8)  # filter byte 0 per row
    raw[:, 1:] = image.reshape(height, width * 3)

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
            chunk(b"IDAT", zlib.compress(raw.tobytes(), 1)) + chunk(b"IEND", b""))


def background(rng, size, yy, xx):
    kind = rng.integers(3)
    base = rng.integers(0, 256, size=3).astype(np.float32)
    if kind == 0:  # noise around a colour
        image = base + rng.normal(0, rng.uniform(10, 40), size=(size, size, 3))
    elif kind == 1:  # stripes of two colours at a random angle and period
        other = rng.integers(0, 256, size=3).astype(np.float32)
        angle = rng.uniform(0, np.pi)
        period = rng.uniform(6, 30)
        phase = (np.cos(angle) * xx + np.sin(angle) * yy) / period
        mix = (np.sin(2 * np.pi * phase) > 0).astype(np.float32)[..., None]
        image = base * mix + other * (1 - mix)
    else:  # a linear gradient between two colours
        other = rng.integers(0, 256, size=3).astype(np.float32)
        angle = rng.uniform(0, 2 * np.pi)
        t = np.cos(angle) * xx + np.sin(angle) * yy
        t = ((t - t.min()) / max(t.max() - t.min(), 1e-6))[..., None]
        image = base * (1 - t) + other * t
    return image


def overlap(a, b):
    """Intersection over union of two [xmin, ymin, xmax, ymax] boxes."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def make_image(rng, size, yy, xx):
    image = background(rng, size, yy, xx)
    objects = []
    for _ in range(rng.integers(1, 4)):
        for _ in range(20):  # a spot that overlaps the others little
            side = int(rng.uniform(0.2, 0.6) * size)
            x0 = int(rng.integers(0, size - side + 1))
            y0 = int(rng.integers(0, size - side + 1))
            box = [x0, y0, x0 + side, y0 + side]
            if all(overlap(box, o[1]) < 0.25 for o in objects):
                break
        else:
            continue
        label = int(rng.integers(len(CLASSES)))
        cx, cy, half = x0 + side / 2, y0 + side / 2, side / 2
        px, py = xx + 0.5, yy + 0.5  # pixel centres
        shape = CLASSES[label]
        inside = (px >= x0) & (px < x0 + side) & (py >= y0) & (py < y0 + side)
        if shape == "circle":
            mask = (px - cx) ** 2 + (py - cy) ** 2 <= half * half
        elif shape == "square":
            mask = inside
        elif shape == "triangle":  # apex at the top centre, base along the bottom
            rel = py - y0
            mask = (py < y0 + side) & (rel >= 0) & (np.abs(px - cx) <= rel / 2)
        else:  # cross: two bars a third of the side wide
            mask = inside & ((np.abs(px - cx) <= side / 6) | (np.abs(py - cy) <= side / 6))
        colour = rng.integers(0, 256, size=3).astype(np.float32)
        image[mask] = colour
        objects.append((label, box))
    return np.clip(image, 0, 255).astype(np.uint8), objects


def voc_xml(name, size, objects):
    parts = ["<annotation>\n  <folder>shapes</folder>\n  <filename>%s.png</filename>\n" % name,
             "  <size>\n    <width>%d</width>\n    <height>%d</height>\n    <depth>3</depth>\n"
             "  </size>\n" % (size, size)]
    for label, (xmin, ymin, xmax, ymax) in objects:
        parts.append("  <object>\n    <name>%s</name>\n    <difficult>0</difficult>\n"
                     "    <bndbox>\n      <xmin>%d</xmin>\n      <ymin>%d</ymin>\n"
                     "      <xmax>%d</xmax>\n      <ymax>%d</ymax>\n    </bndbox>\n  </object>\n"
                     % (CLASSES[label], xmin, ymin, xmax, ymax))
    parts.append("</annotation>\n")
    return "".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="shapes", help="output folder (created)")
    parser.add_argument("--num-train", type=int, default=1000)
    parser.add_argument("--num-test", type=int, default=200)
    parser.add_argument("--size", type=int, default=128, help="image width and height")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--classes", default=",".join(CLASSES),
                        help="comma list of shapes, labels 1.. in this order (of %s)"
                        % ",".join(SHAPES))
    args = parser.parse_args()
    CLASSES[:] = args.classes.split(",")
    if not CLASSES or any(c not in SHAPES for c in CLASSES) or len(set(CLASSES)) != len(CLASSES):
        sys.exit("make_shapes.py: --classes takes distinct shapes among " + ",".join(SHAPES))
    if args.num_train < 0 or args.num_test < 0 or args.size < 16:
        sys.exit("make_shapes.py: --num-train/--num-test must be >= 0 and --size >= 16")
    rng = np.random.default_rng(args.seed)
    os.makedirs(os.path.join(args.out, "images"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "annotations"), exist_ok=True)
    yy, xx = np.mgrid[0:args.size, 0:args.size].astype(np.float32)
    lists = {"train": [], "test": []}
    for i in range(args.num_train + args.num_test):
        name = "%06d" % (i + 1)
        image, objects = make_image(rng, args.size, yy, xx)
        with open(os.path.join(args.out, "images", name + ".png"), "wb") as f:
            f.write(png_bytes(image))
        with open(os.path.join(args.out, "annotations", name + ".xml"), "w") as f:
            f.write(voc_xml(name, args.size, objects))
        lists["train" if i < args.num_train else "test"].append(name)
    for split, names in lists.items():
        with open(os.path.join(args.out, split + ".txt"), "w") as f:
            f.writelines("images/%s.png annotations/%s.xml\n" % (n, n) for n in names)
    with open(os.path.join(args.out, "test_name_size.txt"), "w") as f:
        f.writelines("%s %d %d\n" % (n, args.size, args.size) for n in lists["test"])
    with open(os.path.join(args.out, "labelmap.prototxt"), "w") as f:
        for label, name in enumerate(["background"] + CLASSES):
            f.write('item {\n  name: "%s"\n  label: %d\n  display_name: "%s"\n}\n'
                    % (name, label, name))


if __name__ == "__main__":
    main()
