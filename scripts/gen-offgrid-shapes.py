#!/usr/bin/env python3
"""Writes data/shapes/offgrid.txt: HGEMM shapes off CUDA-L2's 1,000-shape grid, for
`kforge hgemm bench --shapes data/shapes/offgrid.txt` (issue 18's off-grid benchmark set).

Two parts, both reproducible (a fixed seed; the same file on every run, checked by the unit test
GeneratedSources.OffgridShapesMatchTheirGenerator):

1. Layer shapes of public LLMs (hidden size 2048-8192). A linear layer y = x W^T over T tokens is
   C[M,N] = A[M,K] B[K,N] with M = T, K = in_features, N = out_features; per model: the fused
   QKV projection (N = hidden + 2 x kv width, grouped-query attention), the output projection,
   the fused gate+up projection of the MLP (N = 2 x intermediate) and the down projection
   (K = intermediate). Token counts: decode M drawn from 1..32 (two per layer) and prefill M
   from 128..8192 (two per layer, one of them not a multiple of 64).
2. Random shapes, log-uniform in [1, 16384]^3: a third rounded to multiples of 64, a third to
   multiples of 8, a third left as drawn (K or N not a multiple of 8 included). Shapes over
   2e12 FLOP are drawn again (the benchmark times every cuBLASLt algorithm per shape).

Shapes of the grid itself and duplicates are left out. Run it again after changing this file:
    python3 scripts/gen-offgrid-shapes.py > data/shapes/offgrid.txt
"""
import math
import random

GRID = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384}

# (name, hidden, intermediate, attention heads, kv heads): published configurations.
MODELS = [
    ("Llama-3.2-1B", 2048, 8192, 32, 8),
    ("Gemma-2B", 2048, 16384, 8, 1),
    ("Phi-3-mini", 3072, 8192, 32, 32),
    ("Llama-3.2-3B", 3072, 8192, 24, 8),
    ("Qwen2.5-7B", 3584, 18944, 28, 4),
    ("Llama-2-7B", 4096, 11008, 32, 32),
    ("Llama-3.1-8B", 4096, 14336, 32, 8),
    ("Llama-2-13B", 5120, 13824, 40, 40),
    ("Qwen2.5-32B", 5120, 27648, 40, 8),
    ("Llama-3.1-70B", 8192, 28672, 64, 8),
]

PREFILL = [128, 256, 512, 1024, 2048, 3072, 4096, 8192]
MAX_FLOP = 2e12


def flop(m, n, k):
    return 2.0 * m * n * k


def llm_shapes(rng):
    out = []
    for name, h, inter, heads, kv in MODELS:
        head_dim = h // heads
        layers = [
            ("qkv", h, h + 2 * kv * head_dim),
            ("o", h, h),
            ("gate_up", h, 2 * inter),
            ("down", inter, h),
        ]
        for layer, k, n in layers:
            ms = rng.sample(range(1, 33), 2)
            ms.append(rng.choice(PREFILL))
            ms.append(rng.choice(PREFILL) - rng.randrange(1, 64))  # a prompt of no round length
            for m in ms:
                if flop(m, n, k) > MAX_FLOP:  # the largest prefill: fewer tokens
                    m = max(1, int(MAX_FLOP / (2.0 * n * k)) // 64 * 64)
                out.append((m, n, k, f"{name} {layer}"))
    return out


def random_shapes(rng, count):
    out = []
    while len(out) < count:
        dims = [int(math.exp(rng.uniform(0, math.log(16384)))) for _ in range(3)]
        kind = len(out) % 3
        if kind == 0:
            dims = [max(64, round(d / 64) * 64) for d in dims]
        elif kind == 1:
            dims = [max(8, round(d / 8) * 8) for d in dims]
        dims = [min(16384, max(1, d)) for d in dims]
        m, n, k = dims
        if flop(m, n, k) > MAX_FLOP:
            continue
        out.append((m, n, k, ["random, multiples of 64", "random, multiples of 8", "random"][kind]))
    return out


def main():
    rng = random.Random(18)
    shapes = llm_shapes(rng) + random_shapes(rng, 90)
    seen = set()
    lines = [
        "# Off-grid HGEMM shapes (issue 18): written by scripts/gen-offgrid-shapes.py, do not edit by hand.",
        "# LLM layer shapes (decode M 1..32, prefill M up to 8192; hidden 2048-8192) and random shapes",
        "# log-uniform in [1, 16384]^3 (a third not multiples of 8). MxNxK per line, the origin after '#'.",
    ]
    for m, n, k, why in shapes:
        if (m, n, k) in seen or (m in GRID and n in GRID and k in GRID):
            continue
        seen.add((m, n, k))
        lines.append(f"{m}x{n}x{k}  # {why}")
    lines.append(f"# {len(seen)} shapes")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
