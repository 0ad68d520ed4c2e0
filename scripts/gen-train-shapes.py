#!/usr/bin/env python3
"""Writes data/shapes/decode-train.txt: the decode shapes kforge tunes into its shipped dispatch
table (`kforge hgemm tune --shapes data/shapes/decode-train.txt`), so that a decode problem off
that table is served by its nearest tuned neighbours (kernels/hgemm/dispatch.cpp) rather than by
the cost model alone, which ranks the decode family against the Hopper tiles worst.

A regular grid in (log M, log N, log K), disjoint from the benchmark set data/shapes/offgrid.txt
(its shapes are left out; the unit test GeneratedSources.DecodeTrainingShapesMatchTheirGenerator
checks), so that the off-grid benchmark keeps measuring shapes the tuner never saw:

1. Small M (the decode regime, M <= 32): M in {1, 2, 4, 8, 16, 32}, N in 1024..65536 and K in
   1024..32768 (powers of two), B at most 1 GiB (N x K <= 2^29).
2. Small N (the swapped regime, N <= 32): N in {1, 4, 8, 16, 32}, M in {1024, 4096, 16384}, K in
   {256, 1024, 4096, 16384}.

The order is shuffled with a fixed seed, so that a tune cut short by its budget leaves holes spread
over the grid rather than a missing corner. Run it again after changing this file:
    python3 scripts/gen-decode-shapes.py > data/shapes/decode-train.txt
"""
import os
import random


def benchmark_shapes():
    """The off-grid benchmark set's shapes: left out here."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "shapes", "offgrid.txt")
    with open(path) as f:
        return {tuple(int(x) for x in line.split("#")[0].strip().split("x")) for line in f if line[:1].isdigit()}


def shapes():
    out = []
    for m in (1, 2, 4, 8, 16, 32):
        for n in (1024, 2048, 4096, 8192, 16384, 32768, 65536):
            for k in (1024, 2048, 4096, 8192, 16384, 32768):
                if n * k <= 1 << 29:
                    out.append((m, n, k, "small M"))
    for n in (1, 4, 8, 16, 32):
        for m in (1024, 4096, 16384):
            for k in (256, 1024, 4096, 16384):
                out.append((m, n, k, "small N"))
    bench = benchmark_shapes()
    out = [s for s in out if s[:3] not in bench]
    random.Random(18).shuffle(out)
    return out


def main():
    rows = shapes()
    print("# Decode shapes tuned into the shipped dispatch table (issue 18): written by")
    print("# scripts/gen-decode-shapes.py, do not edit by hand. Disjoint from data/shapes/offgrid.txt.")
    print(f"# {len(rows)} shapes, MxNxK per line, the regime after '#'.")
    for m, n, k, what in rows:
        print(f"{m}x{n}x{k}  # {what}")


if __name__ == "__main__":
    main()
