#!/usr/bin/env python3
"""Throughput of kforge serve: verdicts per GPU-hour and where the time goes.

    scripts/serve-bench.py --kforge build/kforge --out results/serve-bench.json \
        [--hgemm 4096x4096x4096,256x256x256] [--torch-tasks tasks/kforge --torch-ids 01_relu] \
        [--n 24] [--clients 8] [--device cuda] [--devices 0]

Starts `kforge serve` on a fresh store, sends --n candidates per task from --clients concurrent
clients (HGEMM: kforge's honest corpus candidates, each made unique by a comment so that every one
is compiled and judged; PyTorch: the honest relu solution likewise), and reports per task: verdicts,
accepted, wall time, verdicts per hour, and the mean of each timing the server reports (prepare =
compile, queue, judge, total), plus the slots' busy fraction from /metrics. Uses kforge_client.
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "kforge_client"))
from kforge_client import Client  # noqa: E402

HGEMM_HONEST = ["tiled_smem.cu", "mma_sync.cu", "wmma_f32acc.cu", "kforge_sm80.cu", "multi_launch.cu", "splitk_host.cu"]


def candidates_for(task_id: str, n: int):
    out = []
    if task_id.startswith("hgemm:"):
        srcs = [open(os.path.join(ROOT, "tests/corpus/hgemm/honest", f)).read() for f in HGEMM_HONEST]
        for i in range(n):
            out.append(f"```cuda\n// serve-bench {task_id} {i}\n{srcs[i % len(srcs)]}\n```\n")
    else:
        src = open(os.path.join(ROOT, "tests/corpus/torch/honest_cpu/relu_clamp.py")).read()
        for i in range(n):
            out.append(f"```python\n# serve-bench {task_id} {i}\n{src}\n```\n")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kforge", default=os.path.join(ROOT, "build", "kforge"))
    ap.add_argument("--out", default="serve-bench.json")
    ap.add_argument("--hgemm", default="4096x4096x4096,256x256x256")
    ap.add_argument("--torch-tasks", default="")
    ap.add_argument("--torch-ids", default="01_relu")
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--devices", default="")
    ap.add_argument("--samples", default="0")
    ap.add_argument("--extra", default="", help="more kforge serve flags, space separated")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="kforge-serve-bench-")
    port_file = os.path.join(work, "port")
    cmd = [args.kforge, "serve", "--no-auth", "--port", "0", "--port-file", port_file, "--store",
           os.path.join(work, "serve.db"), "--device", args.device, "--max-queue", "100000", "--samples", args.samples]
    if args.hgemm:
        cmd += ["--hgemm-shapes", args.hgemm]
    if args.torch_tasks:
        cmd += ["--tasks", args.torch_tasks]
    if args.devices:
        cmd += ["--devices", args.devices]
    cmd += [a for a in args.extra.split() if a]
    log = open(os.path.join(work, "serve.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(1200):
        if os.path.exists(port_file) or proc.poll() is not None:
            break
        time.sleep(0.1)
    if not os.path.exists(port_file):
        print(open(os.path.join(work, "serve.log")).read())
        return 1
    url = f"http://127.0.0.1:{int(open(port_file).read())}"
    c = Client(url, None, retries=3)
    tasks = [f"hgemm:{s}" for s in args.hgemm.split(",") if s] + \
            ([t for t in args.torch_ids.split(",") if t] if args.torch_tasks else [])
    report = {"command": cmd, "tasks": {}}
    try:
        for task in tasks:
            comps = candidates_for(task, args.n)
            t0 = time.time()
            with cf.ThreadPoolExecutor(args.clients) as pool:
                results = list(pool.map(lambda x: c.score([task], [x])[0], comps))
            wall = time.time() - t0
            metrics = subprocess.run(["curl", "-s", url + "/metrics"], capture_output=True, text=True).stdout
            busy = [float(m) for m in re.findall(r'kforge_serve_slot_busy_fraction\{slot="\d+"\} ([0-9.]+)', metrics)]
            timings = {}
            for key in ("prepare_s", "queue_s", "judge_s", "total_s", "compile_s", "build_s", "load_s"):
                vals = [r["timings"][key] for r in results if key in r.get("timings", {})]
                if vals:
                    timings[key] = {"mean": statistics.mean(vals), "median": statistics.median(vals)}
            reasons = {}
            for r in results:
                k = r["reasons"][0] if r["reasons"] else "accepted"
                reasons[k] = reasons.get(k, 0) + 1
            rep = {"verdicts": len(results), "accepted": sum(r["correct"] for r in results), "wall_s": wall,
                   "verdicts_per_hour": 3600 * len(results) / wall, "timings": timings, "reasons": reasons,
                   "slot_busy_fraction_since_start": busy,
                   "speedup_median": statistics.median([max((s["median"] for s in r["speedup"].values()), default=0)
                                                        for r in results if r["correct"]] or [0])}
            report["tasks"][task] = rep
            print(task, json.dumps(rep, indent=1), flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        report["serve_log_tail"] = open(os.path.join(work, "serve.log")).read()[-4000:]
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
