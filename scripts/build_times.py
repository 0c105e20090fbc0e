#!/usr/bin/env python3
"""Where a build's time went, from ninja's log: steps and summed step seconds by kind, and the
build's wall time. Run it after a build from scratch (a warm ccache shows cache hits instead).
Usage: python3 scripts/build_times.py [BUILD_DIR...]   (default: build build-asan)"""
import os
import sys


def kind(output):
    if output.endswith((".gch", ".pch")):
        return "precompiled headers"
    if output.endswith(".cu.o"):
        return "CUDA objects"
    if output.endswith(".o"):
        if output.startswith("tests/"):
            return "test objects"
        if output.startswith("fuzz/"):
            return "fuzz objects"
        if "crema_cli.dir" in output:
            return "CLI objects"
        if output.startswith("python/"):
            return "Python module objects"
        return "library objects"
    if output.endswith((".pb.cc", ".pb.h")):
        return "protoc"
    if output.endswith(".so") or ".so." in output or "/" not in output or \
            output.startswith(("tests/", "fuzz/", "python/")) and "." not in os.path.basename(output):
        return "links"
    return "other"


def report(build_dir):
    path = os.path.join(build_dir, ".ninja_log")
    if not os.path.exists(path):
        print(f"{build_dir}: no .ninja_log")
        return
    steps = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            start, end, _, output, _ = line.rstrip("\n").split("\t")
            steps[output] = (int(start), int(end))  # the latest run of each output
    if not steps:
        return
    totals = {}
    for output, (start, end) in steps.items():
        k = kind(output)
        n, s = totals.get(k, (0, 0.0))
        totals[k] = (n + 1, s + (end - start) / 1000.0)
    wall = (max(e for _, e in steps.values()) - min(s for s, _ in steps.values())) / 1000.0
    summed = sum(s for _, s in totals.values())
    print(f"{build_dir}: {len(steps)} steps, {summed / 60:.1f} min of step time, "
          f"{wall / 60:.1f} min wall (from the first step's start to the last one's end)")
    for k, (n, s) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"  {k:24s} {n:4d} steps {s / 60:6.1f} min")


for d in sys.argv[1:] or ["build", "build-asan"]:
    report(d)
