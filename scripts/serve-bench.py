#!/usr/bin/env python3
"""Throughput of kforge serve: verdicts per GPU-hour and where the time goes.

    scripts/serve-bench.py --kforge build/kforge --out results/serve-bench.json \
        [--hgemm 4096x4096x4096,256x256x256] [--torch-tasks tasks/kforge --torch-ids 01_relu,04_softmax] \
        [--n 24] [--torch-n 12] [--clients 16] [--device cuda] [--devices 0] [--budget-s 210]

Starts `kforge serve` on a fresh store, sends up to --n candidates per HGEMM task (--torch-n per
PyTorch task) from --clients concurrent clients, and reports per task: verdicts, accepted, wall
time, verdicts per hour and per GPU-hour (per slot), the GPU busy fraction (the slots' judging
seconds over the wall time, from /metrics, and nvidia-smi's utilization sampled every 200 ms where
nvidia-smi exists), and where the time goes: prepare (the compile on a CPU core before queueing),
queue, judge, and the judge's own phases (setup: the baseline's executor; load: the candidate's
load or import; verify; time), as sums and per-verdict means.

Candidates: HGEMM, kforge's honest corpus (tests/corpus/hgemm/honest, the ones that need no extra
include folder), each made unique by a comment so that every one is compiled and judged; PyTorch,
each task's own code as ModelNew (correct by construction, about 1x), likewise made unique.
--budget-s bounds the whole run (each task gets an equal share of what is left; a task stops
submitting once the candidates in flight, at most --clients, would take the rest of its share to
judge at the rate seen so far, and its figures count what was answered, those in flight included).
Two throughputs per task: the observed one (verdicts over the task's wall time, its ramp-up
included: the first compile, the judge's start) and the capacity (3600 over the slots' judging
seconds per verdict: what a slot gives when its queue never runs dry). Each task's figures are written as soon as they
exist; SIGTERM (a time-out) stops the server and keeps them. Uses kforge_client. Also writes
OUT with .md instead of .json: the table.
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "kforge_client"))
from kforge_client import Client  # noqa: E402

HGEMM_HONEST = ["tiled_smem.cu", "mma_sync.cu", "wmma_f32acc.cu", "multi_launch.cu", "splitk_host.cu"]
PHASES = ("setup", "load", "verify", "time")
SERVER = []  # the kforge serve process, for the SIGTERM handler


def torch_seed(task_file: str) -> str:
    src = open(task_file, encoding="utf-8", errors="replace").read()
    return re.sub(r"\bModel\b", "ModelNew", src)


def candidates_for(task_id: str, n: int, torch_dir: str):
    out = []
    if task_id.startswith("hgemm:"):
        srcs = [open(os.path.join(ROOT, "tests/corpus/hgemm/honest", f)).read() for f in HGEMM_HONEST]
        for i in range(n):
            out.append(f"```cuda\n// serve-bench {task_id} {i}\n{srcs[i % len(srcs)]}\n```\n")
    else:
        src = torch_seed(os.path.join(torch_dir, task_id + ".py"))
        for i in range(n):
            out.append(f"```python\n# serve-bench {task_id} {i}\n{src}\n```\n")
    return out


def device_name() -> str:
    if not shutil.which("nvidia-smi"):
        return "cpu"
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=30).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "?"


def metrics(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        return r.read().decode()


def busy_seconds(text: str):
    return [float(m) for m in re.findall(r'kforge_serve_slot_busy_seconds_total\{slot="\d+"\} ([0-9.eE+-]+)', text)]


class GpuSampler:
    """nvidia-smi's utilization.gpu every 200 ms (absent: no samples)."""

    def __init__(self):
        self.samples = []  # (time, [util per GPU])
        self.proc = None
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                          "-lms", "200"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.thread = threading.Thread(target=self._read, daemon=True)
            self.thread.start()

    def _read(self):
        batch = []
        for line in self.proc.stdout:
            try:
                batch.append(float(line.strip()))
            except ValueError:
                continue
            if len(batch) >= self.gpus():
                self.samples.append((time.time(), batch))
                batch = []

    @staticmethod
    def gpus():
        return int(os.environ.get("SERVE_BENCH_GPUS", "1"))

    def mean_between(self, t0: float, t1: float):
        xs = [sum(u) / len(u) for t, u in list(self.samples) if t0 <= t <= t1]
        return (statistics.mean(xs) / 100.0, len(xs)) if xs else (None, 0)

    def stop(self):
        if self.proc:
            self.proc.terminate()


def summarize(results, wall, slots, busy_delta, gpu_util):
    busy = sum(busy_delta)
    timings = {}
    for key in ("prepare_s", "queue_s", "judge_s", "total_s", "compile_s", "build_s", "load_s"):
        vals = [r["timings"][key] for r in results if key in r.get("timings", {})]
        if vals:
            timings[key] = {"mean": statistics.mean(vals), "median": statistics.median(vals), "sum": sum(vals)}
    phases = {}
    for p in PHASES:
        vals = [r["timings"]["phases_s"].get(p, 0.0) for r in results if isinstance(r.get("timings", {}).get("phases_s"), dict)]
        if vals:
            phases[p] = {"mean": statistics.mean(vals), "sum": sum(vals)}
    # Judging time the four phases do not cover (the verdict's own checks, the channel, the
    # service's bookkeeping): judge_s less the phases, per verdict.
    if "judge_s" in timings and phases:
        timings["judge_other_s"] = {"mean": timings["judge_s"]["mean"] - sum(v["mean"] for v in phases.values())}
    reasons = {}
    for r in results:
        k = r["reasons"][0] if r["reasons"] else "accepted"
        reasons[k] = reasons.get(k, 0) + 1
    # Each rejection in short (reasons, message), so that an honest candidate's rejection can be read
    # from the report (every candidate here is honest: a rejection is the evaluator's fault).
    rejections = [{k: (v[:300] if isinstance(v, str) else v) for k, v in r.items()
                   if k in ("id", "request_id", "reasons", "message", "flags", "code_sha256")}
                  for r in results if not r["correct"]]
    vph = 3600 * len(results) / wall if wall > 0 else 0.0
    return {"verdicts": len(results), "accepted": sum(bool(r["correct"]) for r in results), "wall_s": wall,
            "verdicts_per_hour": vph, "slots": slots, "verdicts_per_gpu_hour": vph / max(1, slots),
            "slot_busy_fraction": [b / wall for b in busy_delta] if wall > 0 else [],
            "slot_seconds_per_verdict": busy / len(results) if results else None,
            "capacity_verdicts_per_gpu_hour": 3600 * len(results) / busy if results and busy > 0 else None,
            "gpu_utilization_mean": gpu_util[0], "gpu_utilization_samples": gpu_util[1],
            "timings": timings, "judge_phases_s": phases, "reasons": reasons, "rejections": rejections,
            "speedup_median": statistics.median([max((s["median"] for s in r["speedup"].values()), default=0)
                                                 for r in results if r["correct"]] or [0])}


def table(report):
    lines = [f"kforge serve on {report.get('device_name', '?')}, {report.get('cpu_cores', '?')} CPU cores (compile jobs), "
             f"{report['slots']} slot(s), {report.get('clients', '?')} HGEMM and {report.get('torch_clients', '?')} PyTorch "
             f"clients; seconds per verdict are means", "",
             "| task | verdicts | accepted | wall s | verdicts/GPU-hour (observed) | capacity /GPU-hour | slot busy | GPU util | "
             "prepare (compile) s | queue s | judge s (median) | setup | load | verify | time | other | reasons |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for task, r in report["tasks"].items():
        t, ph = r["timings"], r["judge_phases_s"]
        f = lambda d, k: f"{d[k]['mean']:.2f}" if k in d else "-"  # noqa: E731
        busy = ",".join(f"{b:.0%}" for b in r["slot_busy_fraction"]) or "-"
        util = f"{r['gpu_utilization_mean']:.0%}" if r["gpu_utilization_mean"] is not None else "-"
        cap = f"{r['capacity_verdicts_per_gpu_hour']:.0f}" if r.get("capacity_verdicts_per_gpu_hour") else "-"
        lines.append(f"| {task} | {r['verdicts']} | {r['accepted']} | {r['wall_s']:.1f} | {r['verdicts_per_gpu_hour']:.0f} | "
                     f"{cap} | {busy} | {util} | {f(t, 'prepare_s')} | {f(t, 'queue_s')} | {f(t, 'judge_s')}"
                     f"{' (%.2f)' % t['judge_s']['median'] if 'judge_s' in t else ''} | {f(ph, 'setup')} | "
                     f"{f(ph, 'load')} | {f(ph, 'verify')} | {f(ph, 'time')} | {f(t, 'judge_other_s')} | "
                     f"{json.dumps(r['reasons'])} |")
    # Every candidate here is honest: each rejection is the evaluator's to explain.
    rej = [(task, x) for task, r in report["tasks"].items() for x in r.get("rejections", [])]
    if rej:
        lines += ["", "Rejections (every candidate is honest):"]
        lines += [f"- {task}: {','.join(x.get('reasons', []))}: {x.get('message', '')[:200]}" for task, x in rej]
    return "\n".join(lines) + "\n"


def write_report(report, out):
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.splitext(out)[0] + ".md", "w") as f:
        f.write(table(report))


def main():
    # A time-out's SIGTERM ends the run like Ctrl-C: the server is stopped at once (the requests in
    # flight fail) and what was measured is written.
    def on_term(*_):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # `timeout` signals the process and then its group
        if SERVER:
            SERVER[0].terminate()
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)
    ap = argparse.ArgumentParser()
    ap.add_argument("--kforge", default=os.path.join(ROOT, "build", "kforge"))
    ap.add_argument("--out", default="serve-bench.json")
    ap.add_argument("--hgemm", default="4096x4096x4096,256x256x256")
    ap.add_argument("--torch-tasks", default="")
    ap.add_argument("--torch-ids", default="01_relu")
    ap.add_argument("--n", type=int, default=24, help="candidates per HGEMM task")
    ap.add_argument("--torch-n", type=int, default=0, help="candidates per PyTorch task (default: --n)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--torch-clients", type=int, default=0, help="clients for PyTorch tasks (default: --clients)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--devices", default="")
    ap.add_argument("--samples", default="0")
    ap.add_argument("--budget-s", type=float, default=0, help="seconds for all submissions (0: no bound)")
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
    t_start = time.time()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    SERVER.append(proc)
    for _ in range(1200):
        if os.path.exists(port_file) or proc.poll() is not None:
            break
        time.sleep(0.1)
    if not os.path.exists(port_file):
        print(open(os.path.join(work, "serve.log")).read())
        return 1
    url = f"http://127.0.0.1:{int(open(port_file).read())}"
    c = Client(url, None, retries=3)
    slots = int(c.health().get("slots", 1))
    torch_dir = args.torch_tasks if os.path.isdir(args.torch_tasks) else os.path.dirname(args.torch_tasks)
    tasks = [f"hgemm:{s}" for s in args.hgemm.split(",") if s] + \
            ([t for t in args.torch_ids.split(",") if t] if args.torch_tasks else [])
    sampler = GpuSampler()
    report = {"command": cmd, "startup_s": time.time() - t_start, "slots": slots, "tasks": {},
              "cpu_cores": os.cpu_count(), "clients": args.clients, "torch_clients": args.torch_clients or args.clients,
              "device_name": device_name()}
    try:
        for ti, task in enumerate(tasks):
            hg = task.startswith("hgemm:")
            n = args.n if hg or not args.torch_n else args.torch_n
            clients = args.clients if hg or not args.torch_clients else args.torch_clients
            comps = candidates_for(task, n, torch_dir)
            # This task's share of what is left of the budget.
            deadline = None
            if args.budget_s > 0:
                left = args.budget_s - (time.time() - t_start)
                deadline = time.time() + max(5.0, left / (len(tasks) - ti))
            before = busy_seconds(metrics(url))
            t0 = time.time()
            skipped = [0]
            judged = []  # judge_s of this task's answers so far

            def one(x):
                # Stop once what is in flight (at most `clients`) would take the rest of the share.
                if deadline is not None:
                    per = statistics.mean(judged) if judged else 0.0
                    if time.time() + clients * per / max(1, slots) > deadline:
                        skipped[0] += 1
                        return None
                r = c.score([task], [x])[0]
                if "judge_s" in r.get("timings", {}):
                    judged.append(r["timings"]["judge_s"])
                return r

            pool = cf.ThreadPoolExecutor(clients)
            try:
                results = [r for r in pool.map(one, comps) if r is not None]
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
            wall = time.time() - t0
            # A slot adds a batch's seconds to its busy total just after the batch's last verdict:
            # wait until nothing is judged or queued, then a moment more, so that this task's last
            # batch is counted here and not in the next task's figures.
            for _ in range(50):
                text = metrics(url)
                if re.search(r"^kforge_serve_judging 0$", text, re.M) and re.search(r"^kforge_serve_queue_depth 0$", text, re.M):
                    break
                time.sleep(0.1)
            time.sleep(0.2)
            after = busy_seconds(metrics(url))
            delta = [a - b for a, b in zip(after, before)]
            rep = summarize(results, wall, slots, delta, sampler.mean_between(t0, t0 + wall))
            rep["not_submitted"] = skipped[0]
            rep["clients"] = clients
            report["tasks"][task] = rep
            print(task, json.dumps(rep, indent=1), flush=True)
            write_report(report, args.out)  # each task's figures as soon as they exist
    except KeyboardInterrupt:
        report["interrupted"] = True
        print("serve-bench: stopped (SIGTERM or Ctrl-C); the tasks measured so far are written", flush=True)
    finally:
        sampler.stop()
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        report["serve_log_tail"] = open(os.path.join(work, "serve.log")).read()[-4000:]
        report["total_s"] = time.time() - t_start
        write_report(report, args.out)
        print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
