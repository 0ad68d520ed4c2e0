#!/usr/bin/env python3
"""Writes the training shape sets that kforge tunes into its shipped dispatch table besides
CUDA-L2's 1,000-shape grid (`kforge hgemm tune --shapes FILE`), so that a problem off the table
is served by near tuned neighbours (kernels/hgemm/dispatch.cpp) rather than by the cost model
alone:

    python3 scripts/gen-train-shapes.py decode > data/shapes/decode-train.txt
    python3 scripts/gen-train-shapes.py fill > data/shapes/fill-train.txt
    python3 scripts/gen-train-shapes.py layers > data/shapes/layers-train.txt
    python3 scripts/gen-train-shapes.py thin > data/shapes/thin-train.txt

Each is disjoint from the benchmark set
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

layers: decode token counts on the linear layers of public LLMs other than the benchmark's (the
benchmark draws decode M from 1..32 on ten models' layers; users run others). Layer widths are
rarely powers of two (5120, 6144, 14336, 18944), and their tile counts differ from the decode
grid's, where neighbours were tuned with tiles that divide evenly. Per model: the fused QKV
projection, the output projection, the MLP's (gate+)up and down projections, with M in
{1, 2, 4, 8, 16, 24, 32}; a layer whose (N, K) is also a decode (N, K) of the benchmark set is
left out, so that the benchmark keeps measuring widths the tuner never saw.

thin: short K (8 to 64) under outputs of every size. The other sets' K starts at 96 (fill) or 256
(decode), so a problem such as 10568x160x32 or 10080x24x8, whose time is writing C, met only
neighbours with long K loops and took their tiles (H100: 1.4-1.8x the best kforge variant's time).
M and N each in {16, 64, 256, 1024, 4096, 16384}, K in {8, 16, 32, 64}: both decode regimes
(M or N <= 32) and the rest. Tuned in graph mode (TUNE_MODE=graph), where launch costs do not
hide the kernels' differences.

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


# (name, hidden, intermediate, attention heads, kv heads, head dim, gated MLP): published configurations,
# none of them one of scripts/gen-offgrid-shapes.py's MODELS.
LAYER_MODELS = [
    ("Qwen2-0.5B", 896, 4864, 14, 2, 64, True),
    ("Qwen2-1.5B", 1536, 8960, 12, 2, 128, True),
    ("Qwen2.5-3B", 2048, 11008, 16, 2, 128, True),
    ("Gemma-2-2B", 2304, 9216, 8, 4, 256, True),
    ("Phi-2", 2560, 10240, 32, 32, 80, False),
    ("Gemma-7B", 3072, 24576, 16, 16, 256, True),
    ("Gemma-2-9B", 3584, 14336, 16, 8, 256, True),
    ("Falcon-7B", 4544, 18176, 71, 1, 64, False),
    ("Gemma-2-27B", 4608, 36864, 32, 16, 128, True),
    ("Mistral-Nemo-12B", 5120, 14336, 32, 8, 128, True),
    ("Phi-3-medium", 5120, 17920, 40, 10, 128, True),
    ("Yi-34B", 7168, 20480, 56, 8, 128, True),
    ("Qwen2.5-72B", 8192, 29568, 64, 8, 128, True),
]


def layer_shapes():
    bench_decode = {(n, k) for m, n, k in benchmark_shapes() if m <= 32}
    out, seen = [], set()
    for name, h, inter, heads, kv, hd, gated in LAYER_MODELS:
        layers = [("qkv", h, heads * hd + 2 * kv * hd), ("o", heads * hd, h),
                  ("up", h, 2 * inter if gated else inter), ("down", inter, h)]
        for layer, k, n in layers:
            if (n, k) in bench_decode or (n, k) in seen:
                continue
            seen.add((n, k))
            for m in (1, 2, 4, 8, 16, 24, 32):
                out.append((m, n, k, f"{name} {layer}"))
    return out


def fill_shapes():
    sizes = (96, 192, 384, 768, 1536, 3072, 6144)
    return [(m, n, k, "cell centre") for m in sizes for n in sizes for k in sizes]


def thin_shapes():
    sizes = (16, 64, 256, 1024, 4096, 16384)
    return [(m, n, k, "short K") for m in sizes for n in sizes for k in (8, 16, 32, 64)]


SETS = {
    "decode": (decode_shapes, "Decode shapes (M or N <= 32)"),
    "fill": (fill_shapes, "Shapes between the grid's sizes"),
    "layers": (layer_shapes, "Decode token counts on other LLMs' layers"),
    "thin": (thin_shapes, "Short-K shapes (K 8 to 64, outputs of every size)"),
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
