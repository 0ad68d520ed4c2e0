"""torch.ops.kforge.hgemm against torch.matmul from Python, as CUDA-L2 compares them (offline mode).

    python3 -m @NAME@_torch.bench [--shapes 4096x4096x4096,...] [--csv FILE] [--repeats 15] [--iters N]

Both sides are called the way a user calls them (through the PyTorch dispatcher, on the current
stream, output allocated per call), on the same fp16 CUDA inputs, for B row-major (nn: b is a
(K, N) tensor) and column-major (tn: b = w.t() of an (N, K) weight, as F.linear passes it).
Per shape and layout: a warm-up, then `--repeats` rounds, each ours and torch in a random order,
each timed with CUDA events around `iters` back-to-back calls (iters chosen so a round lasts about
2 ms, at least 3); the result is the median per-call time of each side. Back-to-back calls keep the
inputs in L2 where they fit (offline mode); host dispatch is included, as a user sees it.
ratio = torch / ours: above 1, kforge is faster. Every shape's output is checked against
torch.matmul first (relative Frobenius error below 1e-2), and a wrong one fails the run.
"""
import argparse
import csv
import math
import random
import statistics
import sys

import torch

DEFAULT_SHAPES = ("128x128x128,256x256x256,512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,"
                  "8192x8192x8192,16x4096x4096,1x4096x4096,64x12288x4096,4096x11008x4096,1000x1001x1003,"
                  "2048x768x3072,12288x128x16384")


def parse_shapes(text):
    shapes = []
    for part in text.split(","):
        try:
            m, n, k = (int(x) for x in part.strip().lower().split("x"))
        except ValueError:
            raise ValueError(f"--shapes: '{part}' is not MxNxK (e.g. 4096x4096x4096)")
        if min(m, n, k) < 1:
            raise ValueError(f"--shapes: '{part}': sizes must be >= 1")
        shapes.append((m, n, k))
    return shapes


def time_calls(fn, iters):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3 / iters  # us per call


def bench_one(a, b, repeats, iters):
    ours = lambda: torch.ops.kforge.hgemm(a, b)
    ref = lambda: torch.matmul(a, b)
    for f in (ours, ref):  # warm-up: first-call set-up (descriptors, cuBLAS handles), clocks
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    if iters is None:
        per = max(time_calls(ours, 3), time_calls(ref, 3))
        iters = max(3, min(2000, int(2000 / max(per, 1e-3))))
    t_ours, t_ref = [], []
    for _ in range(repeats):
        pair = [(ours, t_ours), (ref, t_ref)]
        random.shuffle(pair)
        for f, sink in pair:
            sink.append(time_calls(f, iters))
    return statistics.median(t_ours), statistics.median(t_ref), iters


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m @NAME@_torch.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated MxNxK (default: a mix of grid, "
                    "decode-like and off-grid shapes)")
    ap.add_argument("--layouts", default="nn,tn", help="nn (b row-major), tn (b = w.t()), or both (default)")
    ap.add_argument("--repeats", type=int, default=15, help="timed rounds per side (median of these)")
    ap.add_argument("--iters", type=int, default=None, help="calls per timed round (default: ~2 ms a round)")
    ap.add_argument("--csv", default=None, help="also write the rows to this CSV file")
    ap.add_argument("--seed", type=int, default=0, help="seed of the inputs and of the rounds' order")
    ap.add_argument("--prefix", default=None, help="an installed @NAME@ prefix for load() (default: see load())")
    args = ap.parse_args(argv)
    layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    if not layouts or any(x not in ("nn", "tn") for x in layouts):
        ap.error(f"--layouts '{args.layouts}': use nn, tn or nn,tn")
    if args.repeats < 3:
        ap.error("--repeats must be at least 3 (a median of fewer is noise)")
    if args.iters is not None and args.iters < 1:
        ap.error("--iters must be at least 1")
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as e:
        ap.error(str(e))  # exit 2, one line
    if not torch.cuda.is_available():
        print("bench: no CUDA device (torch.cuda.is_available() is False): nothing to measure", file=sys.stderr)
        return 2

    from . import load
    load(prefix=args.prefix)
    random.seed(args.seed)
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    dev = torch.cuda.get_device_name()
    print(f"# torch {torch.__version__} (CUDA {torch.version.cuda}) on {dev}; {torch.ops.kforge.hgemm_version()}")
    print(f"{'shape':>20} {'layout':>6} {'ours_us':>10} {'torch_us':>10} {'ratio':>7} {'TFLOP/s':>8}  variant")
    rows, failed = [], []
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen)
        for layout in layouts:
            if layout == "nn":
                b = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=gen)
            else:
                b = torch.randn(n, k, device="cuda", dtype=torch.float16, generator=gen).t()
            want = torch.matmul(a.float(), b.float())
            got = torch.ops.kforge.hgemm(a, b).float()
            err = ((got - want).norm() / want.norm().clamp_min(1e-30)).item()
            shape = f"{m}x{n}x{k}"
            if not err < 1e-2:
                failed.append(f"{shape} {layout}: relative error {err:.3g}")
            t_ours, t_ref, iters = bench_one(a, b, args.repeats, args.iters)
            var = torch.ops.kforge.hgemm_variant(m, n, k, layout == "tn")
            tflops = 2.0 * m * n * k / (t_ours * 1e-6) / 1e12
            rows.append(dict(m=m, n=n, k=k, layout=layout, ours_us=t_ours, torch_us=t_ref, ratio=t_ref / t_ours,
                             ours_tflops=tflops, iters=iters, repeats=args.repeats, rel_err=err, variant=var))
            print(f"{shape:>20} {layout:>6} {t_ours:10.2f} {t_ref:10.2f} {t_ref / t_ours:7.3f} {tflops:8.1f}  {var}",
                  flush=True)
            del b, want, got
        del a
    ratios = [r["ratio"] for r in rows]
    best = {}
    for r in rows:  # each side at its faster layout, as kforge hgemm compare reports
        key = (r["m"], r["n"], r["k"])
        o, t = best.get(key, (math.inf, math.inf))
        best[key] = (min(o, r["ours_us"]), min(t, r["torch_us"]))
    best_ratios = [t / o for o, t in best.values()]
    geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    print(f"geomean ratio (torch/ours) over {len(rows)} rows: {geo(ratios):.3f}; each side at its faster layout "
          f"over {len(best)} shapes: {geo(best_ratios):.3f}; ours faster on {sum(x > 1 for x in ratios)} rows")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
        print(f"wrote {args.csv}")
    if failed:
        print("WRONG outputs: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
