#!/usr/bin/env python3
"""Writes the training shape sets that kforge tunes into its shipped dispatch table besides
CUDA-L2's 1,000-shape grid (`kforge hgemm tune --shapes FILE`), so that a problem off the table
is served by near tuned neighbours (kernels/hgemm/dispatch.cpp) rather than by the cost model
alone:

    python3 scripts/gen-train-shapes.py decode > data/shapes/decode-train.txt
    python3 scripts/gen-train-shapes.py fill > data/shapes/fill-train.txt

Both are regular grids in (log M, log N, log K), disjoint from the benchmark set
data/shapes/offgrid.txt (its shapes are left out; the unit tests
GeneratedSources.*TrainingShapesMatchTheirGenerator check), so that the off-grid benchmark keeps
measuring shapes the tuner never saw.

decode: the grid starts at 64, so the decode regimes had no entries, and the cost model ranks the
decode family against the Hopper tiles worst.
1. Small M (M <= 32): M in {1, 2, 4, 8, 16, 32}, N in 1024..65536 and K in 1024..32768 (powers of
   two), B at most 1 GiB (N x K <= 2^29).
2. Small N (N <= 32): N in {1, 4, 8, 16, 32}, M in {1024, 4096, 16384}, K in {256, 1024, 4096,
   16384}.

fill: the grid's sizes are powers of two (and 12288), where tile counts divide evenly; sizes
between them (a prompt of 480 tokens, an MLP of 9216) meet other wave counts. M, N and K each in
{96, 192, 384, 768, 1536, 3072, 6144}: the centres of the grid's cells, half an octave from
their corners.

The order is shuffled with a fixed seed, so that a tune cut short by its budget leaves holes spread
over the set rather than a missing corner.
"""
import os
import random
import sys


def benchmark_shapes():
    """The off-grid benchmark set's shapes: left out here."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "shapes", "offgrid.txt")
    with open(path) as f:
        return {tuple(int(x) for x in line.split("#")[0].strip().split("x")) for line in f if line[:1].isdigit()}


def decode_shapes():
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
    return out


def fill_shapes():
    sizes = (96, 192, 384, 768, 1536, 3072, 6144)
    return [(m, n, k, "cell centre") for m in sizes for n in sizes for k in sizes]


SETS = {
    "decode": (decode_shapes, "Decode shapes (M or N <= 32)"),
    "fill": (fill_shapes, "Shapes between the grid's sizes"),
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in SETS:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(SETS)}")
    name = sys.argv[1]
    make, title = SETS[name]
    bench = benchmark_shapes()
    rows = [s for s in make() if s[:3] not in bench]
    random.Random(18).shuffle(rows)
    print(f"# {title} tuned into the shipped dispatch table (issue 18): written by")
    print(f"# scripts/gen-train-shapes.py {name}, do not edit by hand. Disjoint from data/shapes/offgrid.txt.")
    print(f"# {len(rows)} shapes, MxNxK per line, the set after '#'.")
    for m, n, k, what in rows:
        print(f"{m}x{n}x{k}  # {what}")


if __name__ == "__main__":
    main()
