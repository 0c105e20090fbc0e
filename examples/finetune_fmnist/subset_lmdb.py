#!/usr/bin/env python3
"""Copies the records of chosen classes from a Caffe Datum LMDB into a new LMDB, relabelled.

usage: subset_lmdb.py SRC_LMDB DST_LMDB --classes 5,6,7,8,9 [--max N]

The i-th class of --classes gets label i (so 5..9 become 0..4). Records are taken in key
order; --max N stops after N records (0: all). Each Datum is copied field by field with only
its label (field 5) replaced, so image data, shape and encoding are kept byte for byte.
Needs python3-lmdb only (the protobuf wire format of Datum is decoded here).
"""
import argparse
import os
import sys

import lmdb

LABEL_FIELD = 5  # caffe.Datum.label (int32)


def read_varint(buf, pos):
    value = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def write_varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def split_fields(buf):
    """Yields (field_number, raw bytes of the whole field incl. its tag, varint value or None)."""
    pos = 0
    while pos < len(buf):
        start = pos
        tag, pos = read_varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        value = None
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            length, pos = read_varint(buf, pos)
            pos += length
        elif wire == 5:
            pos += 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
        if pos > len(buf):
            raise ValueError("truncated field %d" % field)
        yield field, buf[start:pos], value


def relabel(datum, mapping):
    """Returns the Datum with its label mapped, or None when the label is not in mapping."""
    kept = []
    label = 0  # proto2 default
    for field, raw, value in split_fields(datum):
        if field == LABEL_FIELD:
            label = value if value < (1 << 31) else value - (1 << 64)
        else:
            kept.append(raw)
    if label not in mapping:
        return None
    new_label = mapping[label]
    return b"".join(kept) + write_varint(LABEL_FIELD << 3) + write_varint(new_label)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--classes", required=True, help="comma-separated source labels")
    parser.add_argument("--max", type=int, default=0, help="at most N records (0: all)")
    args = parser.parse_args()
    try:
        classes = [int(c) for c in args.classes.split(",") if c.strip()]
    except ValueError:
        parser.error("--classes wants comma-separated integers, got %r" % args.classes)
    if not classes or len(set(classes)) != len(classes):
        parser.error("--classes wants distinct labels")
    if args.max < 0:
        parser.error("--max wants N >= 0")
    if not os.path.isdir(args.src):
        sys.exit("error: %s is not an LMDB folder" % args.src)
    if os.path.exists(args.dst):
        sys.exit("error: %s exists; remove it first" % args.dst)
    mapping = {c: i for i, c in enumerate(classes)}

    counts = [0] * len(classes)
    src = lmdb.open(args.src, readonly=True, lock=False)
    dst = lmdb.open(args.dst, map_size=1 << 32)
    written = 0
    with src.begin() as rtxn, dst.begin(write=True) as wtxn:
        for key, value in rtxn.cursor():
            try:
                out = relabel(bytes(value), mapping)
            except ValueError as err:
                sys.exit("error: record %r of %s is no Datum: %s" % (key, args.src, err))
            if out is None:
                continue
            wtxn.put(key, out)
            counts[mapping_label(out)] += 1
            written += 1
            if args.max and written >= args.max:
                break
    dst.close()
    src.close()
    per_class = ", ".join("%d->%d: %d" % (c, i, counts[i]) for i, c in enumerate(classes))
    print("wrote %d records to %s (%s)" % (written, args.dst, per_class))


def mapping_label(datum):
    for field, _, value in split_fields(datum):
        if field == LABEL_FIELD:
            return value
    return 0


if __name__ == "__main__":
    main()
