#!/usr/bin/env python3
"""The router's overhead per verdict: the same requests to a plain ``kforge serve`` and to kforge-ray
(one actor owning an identical ``kforge serve``, on a local Ray instance), CPU task (the CPU corpus's
ReLU, ``--device cpu``), one client, one request at a time.

- fast items (answered without running a candidate: a completion with no code, and static-scan
  rejections) measure the request path itself: what kforge-ray adds is the difference of the two
  latencies (ingress HTTP, router, Ray call to the actor, the actor's HTTP call to its serve);
- honest candidates measure a CPU task's verdict time (about 12 s here) both ways.

The overhead is then the fast items' added latency over the honest verdict's time. Prints a table
and writes ``--out`` (JSON). Bad input: one line ``error: ...``, exit 2.

    scripts/ray-bench.py --kforge build/kforge --fast 200 --honest 3
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "bench-token-0123456789abcdef"
HONEST = ("```python\nimport torch\nimport torch.nn as nn\n# {tag}\n\n\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x):\n        return x.clamp_min(0.0)\n```\n")
THREADED = ("```python\nimport threading\nimport torch\nimport torch.nn as nn\n# {tag}\n\n\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        threading.Thread(target=lambda: None).start()\n        return x.clamp_min(0.0)\n```\n")


class Usage(Exception):
    pass


class P(argparse.ArgumentParser):
    def error(self, message):
        raise Usage(message)


def count(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number")
    if v < 1:
        raise argparse.ArgumentTypeError(f"'{text}' must be at least 1")
    return v


def score(url, items):
    body = json.dumps({"items": [{"task_id": "01_relu", "completion": c, "request_id": r} for c, r in items]}).encode()
    req = urllib.request.Request(url + "/v1/score", data=body, method="POST",
                                 headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=900) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t, out["results"]


def measure(url, tag, n_fast, n_honest):
    out = {}
    score(url, [("warm-up: no code", f"{tag}-warm")])
    lat = [score(url, [(f"no code {i}", f"{tag}-nc-{i}")])[0] for i in range(n_fast)]
    out["no_code_s"] = lat
    lat = [score(url, [(THREADED.format(tag=f"{tag}-{i}"), f"{tag}-th-{i}")])[0] for i in range(max(1, n_fast // 4))]
    out["scan_rejection_s"] = lat
    honest, judge = [], []
    for i in range(n_honest):
        dt, res = score(url, [(HONEST.format(tag=f"{tag}-{i}"), f"{tag}-ok-{i}")])
        if not res[0]["correct"]:
            raise RuntimeError(f"honest candidate rejected: {res[0]['reasons']} {res[0]['message']}")
        honest.append(dt)
        judge.append(res[0]["timings"]["judge_s"])
    out["honest_s"] = honest
    out["honest_judge_s"] = judge
    return out


def main():
    p = P(prog="ray-bench.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--kforge", default=os.path.join(ROOT, "build", "kforge"), help="the kforge binary (default build/kforge)")
    p.add_argument("--fast", type=count, default=200, help="requests with no code per side (default 200)")
    p.add_argument("--honest", type=count, default=3, help="honest candidates per side (default 3)")
    p.add_argument("--out", help="write the figures here as JSON")
    try:
        a = p.parse_args()
        if not os.access(a.kforge, os.X_OK) or os.path.isdir(a.kforge):
            raise Usage(f"--kforge {a.kforge} is not an executable file")
        if a.out and not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
            raise Usage(f"--out {a.out}: its folder does not exist")
        try:
            import ray  # noqa: F401
        except ImportError:
            raise Usage("ray is not installed (pip install ray, or KFORGE_WITH_RAY=1 scripts/install-deps.sh)")
    except Usage as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    sys.path.insert(0, os.path.join(ROOT, "python", "kforge_ray"))
    os.environ["PYTHONPATH"] = os.path.join(ROOT, "python", "kforge_ray") + os.pathsep + os.environ.get("PYTHONPATH", "")
    import ray
    import kforge_ray

    tmp = tempfile.mkdtemp(prefix="kforge-ray-bench-")
    tasks = os.path.join(tmp, "set")
    os.makedirs(tasks)
    shutil.copy(os.path.join(ROOT, "tests", "corpus", "torch", "tasks_cpu", "01_relu.py"), tasks)
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(TOKEN)
    args = ["--tasks", tasks, "--samples", "3", "--trials", "1", "--atol", "0.001"]
    plain = subprocess.Popen([a.kforge, "serve", *args, "--device", "cpu", "--port", "0", "--port-file",
                              os.path.join(tmp, "port"), "--token-file", os.path.join(tmp, "token"), "--store",
                              os.path.join(tmp, "plain.db"), "--work-dir", os.path.join(tmp, "pw")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ray.init(num_cpus=1, resources={"kforge_cpu": 1}, include_dashboard=False, logging_level="warning",
             log_to_driver=False)
    svc = None
    try:
        svc = kforge_ray.start(args, kforge=a.kforge, device="cpu", token=TOKEN, port=0,
                               store=os.path.join(tmp, "router.db"), work_root=os.path.join(tmp, "work"),
                               log=lambda m: None)
        while not os.path.exists(os.path.join(tmp, "port")):
            time.sleep(0.05)
        with open(os.path.join(tmp, "port")) as f:
            plain_url = f"http://127.0.0.1:{int(f.read())}"
        # Interleaved halves, so that a change in the machine's load falls on both sides alike.
        res = {"serve": {}, "ray": {}}
        for half in range(2):
            for side, url in (("serve", plain_url), ("ray", svc.url)):
                m = measure(url, f"{side}{half}", a.fast // 2 or 1, 1 if half == 0 else max(1, a.honest - 1))
                for k, v in m.items():
                    res[side].setdefault(k, []).extend(v)
        calls = svc.router.metrics
    finally:
        if svc:
            svc.stop()
        ray.shutdown()
        os.killpg(plain.pid, 15)
        plain.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    med = {s: {k: statistics.median(v) for k, v in d.items()} for s, d in res.items()}
    added_nc = med["ray"]["no_code_s"] - med["serve"]["no_code_s"]
    added_scan = med["ray"]["scan_rejection_s"] - med["serve"]["scan_rejection_s"]
    verdict = med["serve"]["honest_s"]
    ray_call = calls["overhead_s_sum"] / max(1, calls["overhead_n"])
    summary = {
        "fast_requests_per_side": len(res["serve"]["no_code_s"]), "honest_per_side": len(res["serve"]["honest_s"]),
        "median_s": med,
        "added_per_item_no_code_s": added_nc, "added_per_item_scan_rejection_s": added_scan,
        "ray_call_overhead_mean_s": ray_call,
        "honest_verdict_s": verdict, "overhead_fraction": max(added_nc, added_scan) / verdict,
        "honest_added_s": med["ray"]["honest_s"] - med["serve"]["honest_s"],
    }
    print(f"{'median seconds':28s} {'kforge serve':>14s} {'kforge-ray':>12s} {'added':>10s}")
    for k in ("no_code_s", "scan_rejection_s", "honest_s", "honest_judge_s"):
        print(f"{k:28s} {med['serve'][k]:14.4f} {med['ray'][k]:12.4f} {med['ray'][k] - med['serve'][k]:10.4f}")
    print(f"router's Ray call overhead (round trip less the actor's HTTP call), mean: {ray_call * 1000:.2f} ms")
    print(f"added per verdict: {max(added_nc, added_scan) * 1000:.1f} ms = {summary['overhead_fraction'] * 100:.3f}% of "
          f"an honest CPU verdict ({verdict:.2f} s)")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"summary": summary, "raw": res}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
