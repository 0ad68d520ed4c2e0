"""kforge_ray on a simulated Ray cluster (ray.cluster_utils.Cluster: a head node without the actors'
resource and worker nodes with {"kforge_cpu": 1} each), a real kforge serve per actor judging the
CPU corpus's ReLU (--device cpu), real HTTP on loopback. Run by tests/unit/test_serve_ray.cpp as
``python3 test_kforge_ray.py KFORGE_BINARY``; prints SKIPPED (exit 0) where ray or torch is missing.

1. The endpoints answer as kforge serve does: the same requests to a plain kforge serve and to the
   ingress get the same statuses and bodies (less timings and placement); then the client tests
   (tests/python/test_kforge_client.py) pass against the ingress unchanged.
2. Requests spread over the nodes.
3. One node removed while both nodes judge honest candidates: every request answered, each exactly
   once, the dead node's items on the other node; the same ids asked again come from the record.
4. A node that joins later gets an actor and receives work.
5. ``kforge-ray serve`` as a process: it answers, stops on SIGTERM; a usage error is one line, exit 2.
6. That process killed (-9) mid-verdict and started again on its record: the pending id is judged
   and the client's retry with the same id gets it; asked again, it comes from the record.
"""
import importlib.util
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RAY_PKG = os.path.join(ROOT, "python", "kforge_ray")
sys.path.insert(0, RAY_PKG)
sys.path.insert(0, os.path.join(ROOT, "python", "kforge_client"))

if importlib.util.find_spec("ray") is None:
    print("SKIPPED: ray is not installed (KFORGE_WITH_RAY=1 scripts/install-deps.sh)")
    sys.exit(0)
if importlib.util.find_spec("torch") is None:
    print("SKIPPED: torch is not installed for " + sys.executable + " (the CPU task's candidates are judged with it)")
    sys.exit(0)
if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
    print("usage: test_kforge_ray.py KFORGE_BINARY", file=sys.stderr)
    sys.exit(2)
KFORGE = sys.argv[1]

# Ray's workers (the actors) import kforge_ray from here: the nodes inherit this environment.
os.environ["PYTHONPATH"] = RAY_PKG + os.pathsep + os.environ.get("PYTHONPATH", "")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import kforge_ray  # noqa: E402
from kforge_client import Client  # noqa: E402

TOKEN = "test-token-0123456789abcdef"
T0 = time.monotonic()
# A time-out's SIGTERM still runs the clean-up below (the nodes, the actors, the plain serve).
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def say(msg):
    print(f"[{time.monotonic() - T0:6.1f} s] {msg}", flush=True)


HONEST = ("## Performance Analysis\nReLU is memory-bound.\n```python\nimport torch\nimport torch.nn as nn\n# {tag}\n\n\n"
          "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n"
          "        return x.clamp_min(0.0)\n```\n")
THREADED = ("```python\nimport threading\nimport torch\nimport torch.nn as nn\n# {tag}\n\n\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        threading.Thread(target=lambda: None).start()\n        return x.clamp_min(0.0)\n```\n")

tmp = tempfile.mkdtemp(prefix="kforge-ray-test-")
task_dir = os.path.join(tmp, "set")
os.makedirs(task_dir)
shutil.copy(os.path.join(ROOT, "tests", "corpus", "torch", "tasks_cpu", "01_relu.py"), task_dir)
with open(os.path.join(tmp, "token"), "w") as f:
    f.write(TOKEN + "\n")
os.chmod(os.path.join(tmp, "token"), 0o600)
SERVE_ARGS = ["--tasks", task_dir, "--samples", "3", "--trials", "1", "--compile-timeout", "120", "--run-timeout", "300",
              "--atol", "0.001"]


def call(url, method, path, body=None, token=TOKEN, raw=None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            text = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        status = e.code
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


VOLATILE = ("timings", "placement")


def scrub(x):
    if isinstance(x, dict):
        return {k: scrub(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [scrub(v) for v in x]
    return x


def items(*triples):
    return {"items": [{"task_id": t, "completion": c, "request_id": r} for t, c, r in triples]}


# -- a plain kforge serve, the reference ---------------------------------------------------------------
plain_dir = os.path.join(tmp, "plain")
os.makedirs(plain_dir)
plain = subprocess.Popen([KFORGE, "serve", *SERVE_ARGS, "--device", "cpu", "--port", "0", "--port-file",
                          os.path.join(plain_dir, "port"), "--token-file", os.path.join(tmp, "token"), "--store",
                          os.path.join(plain_dir, "s.db"), "--work-dir", os.path.join(plain_dir, "work")],
                         stdout=open(os.path.join(plain_dir, "log"), "w"), stderr=subprocess.STDOUT,
                         start_new_session=True)

cluster = Cluster(initialize_head=True, head_node_args={
    "num_cpus": 1, "include_dashboard": False,
    # Node death noticed within about 5 s (Ray's defaults take longer); not tighter, so that a node of
    # a loaded machine (CI runs tests in parallel) is not taken for dead.
    "_system_config": {"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000,
                       "health_check_failure_threshold": 5}})
nodes = [cluster.add_node(num_cpus=1, resources={"kforge_cpu": 1}) for _ in range(2)]
ray.init(address=cluster.address, logging_level="warning", log_to_driver=False)
say(f"cluster up: head + {len(nodes)} nodes")
svc = kforge_ray.start(SERVE_ARGS, kforge=KFORGE, device="cpu", token=TOKEN, port=0, store=os.path.join(tmp, "router.db"),
                       work_root=os.path.join(tmp, "work"), min_actors=2, start_timeout_s=180, poll_s=0.5)
URL = svc.url
say(f"ingress on {URL}: {svc.router.stats()}")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        say("FAIL: " + what)


try:
    for _ in range(200):
        if os.path.exists(os.path.join(plain_dir, "port")):
            break
        time.sleep(0.05)
    with open(os.path.join(plain_dir, "port")) as f:
        PLAIN = f"http://127.0.0.1:{int(f.read())}"

    # 1. The same requests to both: the same statuses and bodies.
    big = "x" * (256 * 1024 + 1)
    cases = [
        ("GET", "/v1/tasks", None, None, TOKEN),
        ("GET", "/v1/tasks", None, None, ""),
        ("GET", "/v1/tasks", None, None, "wrong-token-wrong-token"),
        ("GET", "/nothing", None, None, TOKEN),
        ("GET", "/v1/score", None, None, TOKEN),
        ("POST", "/v1/tasks", {}, None, TOKEN),
        ("DELETE", "/v1/tasks", None, None, TOKEN),
        ("DELETE", "/v1/tasks", None, None, ""),
        ("GET", "/v1/jobs/nope", None, None, TOKEN),
        ("POST", "/v1/score", None, b"[1, 2]", TOKEN),
        ("POST", "/v1/score", {"items": 3}, None, TOKEN),
        ("POST", "/v1/score", {"items": [5]}, None, TOKEN),
        ("POST", "/v1/score", {"items": [{"completion": "x"}]}, None, TOKEN),
        ("POST", "/v1/score", {"items": [{"task_id": "01_relu", "completion": 7}]}, None, TOKEN),
        ("POST", "/v1/score", {"items": []}, None, TOKEN),
        ("POST", "/v1/score", items(("nope", "x", "ex-0")), None, TOKEN),
        ("POST", "/v1/score", items(("01_relu", big, "ex-big")), None, TOKEN),
        ("POST", "/v1/score", items(("01_relu", "x", "r" * 257)), None, TOKEN),
        ("POST", "/v1/score", items(("01_relu", "no code at all", "ex-1"), ("01_relu", THREADED.format(tag="ex"), "ex-2")),
         None, TOKEN),
        ("POST", "/v1/score", items(("01_relu", THREADED.format(tag="ex"), "ex-2")), None, TOKEN),
        ("POST", "/v1/score", items(("01_relu", "another text", "ex-2")), None, TOKEN),
        ("POST", "/v1/score", items(("01_relu", "a", "ex-3"), ("01_relu", "b", "ex-3")), None, TOKEN),
        ("POST", "/get_reward", {"query": ["P:" + THREADED.format(tag="orl"), "P:no code"], "prompts": ["P:", "P:"],
                                 "labels": ["01_relu", json.dumps({"task_id": "01_relu"})]}, None, TOKEN),
        ("POST", "/get_reward", {"query": ["a"], "prompts": [], "labels": []}, None, TOKEN),
        ("POST", "/get_reward", {"query": ["a"], "labels": [3]}, None, TOKEN),
    ]
    for method, path, body, raw, tok in cases:
        a = call(PLAIN, method, path, body, tok, raw)
        b = call(URL, method, path, body, tok, raw)
        what = f"{method} {path} {json.dumps(body)[:80] if body else raw}"
        check(a[0] == b[0], f"{what}: status {a[0]} from kforge serve, {b[0]} from kforge-ray ({b[1]})")
        check(scrub(a[1]) == scrub(b[1]), f"{what}: bodies differ:\n  serve: {json.dumps(a[1])[:600]}\n  ray:   "
                                          f"{json.dumps(b[1])[:600]}")
    a = call(PLAIN, "POST", "/v1/score", None, TOKEN, b"{not json")
    b = call(URL, "POST", "/v1/score", None, TOKEN, b"{not json")
    check(a[0] == b[0] == 400 and b[1]["error"].startswith("the body is not JSON: "), f"bad JSON: {a} {b}")
    h_plain, h_ray = call(PLAIN, "GET", "/v1/health", token=""), call(URL, "GET", "/v1/health", token="")
    check(h_ray[0] == 200 and set(h_plain[1]) <= set(h_ray[1]) and h_ray[1]["status"] == "ok", f"health {h_ray}")
    check(h_ray[1]["slots"] == 2 and len(h_ray[1]["actors"]) == 2, f"health lists 2 actors: {h_ray}")
    t = urllib.request.Request(URL + "/get_reward?token=" + TOKEN, method="POST", headers={"Content-Type": "x"},
                               data=json.dumps({"query": ["no code"], "labels": ["01_relu"]}).encode())
    with urllib.request.urlopen(t, timeout=60) as r:
        check(r.status == 200, "/get_reward?token= is accepted")
    say(f"1. {len(cases) + 2} requests answered alike by kforge serve and kforge-ray")

    env = dict(os.environ, KFORGE_SERVE_URL=URL, KFORGE_SERVE_TOKEN=TOKEN)
    p = subprocess.run([sys.executable, os.path.join(HERE, "test_kforge_client.py")], env=env, capture_output=True,
                       text=True, timeout=300)
    check(p.returncode == 0 and "OK" in p.stdout, f"the client tests against kforge-ray: {p.stdout[-2000:]} {p.stderr[-3000:]}")
    say("1. tests/python/test_kforge_client.py passes against the ingress")

    # 2. Spread: one batch of 8 quick verdicts (static-scan rejections) lands on both nodes.
    c = Client(URL, TOKEN, retries=2, backoff_s=0.5)
    res = c.score(["01_relu"] * 8, [THREADED.format(tag=f"spread-{i}") for i in range(8)], [f"sp-{i}" for i in range(8)])
    where = [r["placement"]["node_id"] for r in res]
    per_node = {n: where.count(n) for n in set(where)}
    check(set(where) == {n.node_id for n in nodes}, f"spread over both worker nodes: {per_node}")
    check(all(r["reasons"][:1] == ["forbidden_call"] for r in res), f"scan rejections: {[r['reasons'] for r in res]}")
    check(all("device" in r["placement"] and r["placement"]["device"]["kind"] == "cpu" for r in res), "placement.device")
    say(f"2. 8 items over the nodes: {sorted(per_node.values())}")

    # 2b. 16 clients at once, 4 items each, every one of them also asking for one shared id: all
    # answered, the shared id handed to one actor once and answered alike for all.
    answers, errors = {}, []

    def client(k):
        try:
            ids_k = [f"cc-{k}-{i}" for i in range(4)] + ["cc-shared"]
            texts = [f"no code {k} {i}" for i in range(4)] + [THREADED.format(tag="shared")]
            for r in Client(URL, TOKEN, retries=2, backoff_s=0.5).score(["01_relu"] * 5, texts, ids_k):
                answers.setdefault(r["request_id"], []).append(r)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    for t_ in threads:
        t_.start()
    for t_ in threads:
        t_.join(timeout=120)
    check(not errors and len(answers) == 16 * 4 + 1, f"16 clients answered: {errors} {len(answers)}")
    shared = answers.get("cc-shared", [])
    check(len(shared) == 16 and len({json.dumps(scrub(r), sort_keys=True) for r in
                                      [{k: v for k, v in x.items() if k != "from_store"} for x in shared]}) == 1,
          f"the shared id answered alike 16 times: {len(shared)}")
    row = sqlite3.connect(os.path.join(tmp, "router.db")).execute(
        "SELECT handed, state FROM requests WHERE request_id = 'cc-shared'").fetchone()
    check(row == (1, "done"), f"the shared id was handed to one actor once: {row}")
    say("2. 16 concurrent clients: all answered; an id asked by all of them was judged once")

    # 3. Remove one node while both judge honest candidates (about 12 s each here).
    victim = nodes[0]
    ids = [f"kill-{i}" for i in range(2)]
    out = {}

    def batch():
        try:
            out["res"] = Client(URL, TOKEN, retries=3, backoff_s=1).score(
                ["01_relu"] * 2, [HONEST.format(tag=i) for i in ids], ids)
        except Exception as e:  # noqa: BLE001
            out["err"] = e

    th = threading.Thread(target=batch)
    th.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        depth = {a["node_id"]: a["depth"] for a in svc.router.actors()}
        if depth.get(victim.node_id, 0) > 0 and len([d for d in depth.values() if d > 0]) == 2:
            break
        time.sleep(0.05)
    time.sleep(3)  # its serve is judging now
    victim_actor = [a for a in svc.router.actors() if a["node_id"] == victim.node_id][0]
    cluster.remove_node(victim, allow_graceful=False)
    say("3. removed node " + victim.node_id[:12] + " mid-batch")
    th.join(timeout=240)
    check(not th.is_alive() and "res" in out, f"the batch was answered: {out.get('err')}")
    res = out.get("res") or []
    check([r["request_id"] for r in res] == ids, f"one result per item, in order: {[r.get('request_id') for r in res]}")
    check(all(r["status"] == "done" and r["correct"] is True for r in res), f"all judged correct: {scrub(res)}")
    check(all(r["placement"]["node_id"] != victim.node_id for r in res), "every verdict is from a live node")
    check(svc.router.metrics["handoffs"] >= 1, f"at least one item handed on: {svc.router.metrics}")
    rows = sqlite3.connect(os.path.join(tmp, "router.db")).execute(
        "SELECT request_id, state, handed, actor_id FROM requests WHERE request_id LIKE 'kill-%'").fetchall()
    check(len(rows) == 2 and all(r[1] == "done" for r in rows), f"the record holds each id once, done: {rows}")
    check(max(r[2] for r in rows) == 2 and min(r[2] for r in rows) == 1, f"handed: once, and twice for the retried: {rows}")
    again = c.score(["01_relu"] * 2, [HONEST.format(tag=i) for i in ids], ids)
    check(all(r.get("from_store") is True for r in again), "asked again: answered from the record")
    check([r["reward"] for r in again] == [r["reward"] for r in res], "the same rewards")
    # The actors' own stores: each id judged (done) by exactly one live actor, the one its result names.
    live = {a["actor_id"]: a for a in svc.router.actors()}
    stores = {}
    for aid in live:
        db = os.path.join(tmp, "work", "actor-" + aid[:16], "store.db")
        stores[aid] = {r[0] for r in sqlite3.connect(db).execute("SELECT request_id FROM requests WHERE state = 'done'")}
    for r in res:
        holders = [aid for aid, done in stores.items() if r["request_id"] in done]
        check(holders == [r["placement"]["actor_id"]], f"{r['request_id']} done in the stores of {holders}")
    dead_db = os.path.join(tmp, "work", "actor-" + victim_actor["actor_id"][:16], "store.db")
    dead_done = {r[0] for r in sqlite3.connect(dead_db).execute("SELECT request_id FROM requests WHERE state = 'done'")
                 if r[0].startswith("kill-")}
    say(f"3. both answered once ({[r['placement']['node_id'][:8] for r in res]}), handoffs "
        f"{svc.router.metrics['handoffs']}; done in the dead node's store: {sorted(dead_done) or 'none'}")

    # 4. A node joining later gets an actor and work.
    newcomer = cluster.add_node(num_cpus=1, resources={"kforge_cpu": 1})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and newcomer.node_id not in {a["node_id"] for a in svc.router.actors()}:
        time.sleep(0.2)
    check(newcomer.node_id in {a["node_id"] for a in svc.router.actors()}, "the new node has an actor")
    res = c.score(["01_relu"] * 6, [THREADED.format(tag=f"join-{i}") for i in range(6)], [f"jn-{i}" for i in range(6)])
    where = [r["placement"]["node_id"] for r in res]
    check(newcomer.node_id in where, f"the new node received work: {[w[:8] for w in where]}")
    check(victim.node_id not in where, "nothing went to the removed node")
    say(f"4. node {newcomer.node_id[:12]} joined; 6 items: {where.count(newcomer.node_id)} there")

    # 4b. The actor of a live node killed (ray.kill) mid-verdict: its item goes to the other actor,
    # answered once; the node gets a new actor.
    out = {}

    def one():
        try:
            out["res"] = Client(URL, TOKEN, retries=3, backoff_s=1).score(["01_relu"], [HONEST.format(tag="akill")],
                                                                          ["akill"])
        except Exception as e:  # noqa: BLE001
            out["err"] = e

    th = threading.Thread(target=one)
    th.start()
    deadline = time.monotonic() + 60
    busy = []
    while time.monotonic() < deadline and not busy:
        busy = [a for a in svc.router._actors if a.alive and a.depth > 0]
        time.sleep(0.05)
    time.sleep(3)
    doomed_id, doomed_node = (busy[0].actor_id, busy[0].node_id) if busy else ("", "")
    for a in busy:
        ray.kill(a.handle, no_restart=True)
    th.join(timeout=240)
    res = out.get("res") or []
    check(len(res) == 1 and res[0]["status"] == "done" and res[0]["correct"], f"answered: {out.get('err')}")
    check(all(r["placement"]["actor_id"] != doomed_id for r in res), "no verdict from the killed actor")
    row = sqlite3.connect(os.path.join(tmp, "router.db")).execute(
        "SELECT handed, state FROM requests WHERE request_id = 'akill'").fetchone()
    check(row == (2, "done"), f"done once, handed twice: {row}")
    deadline = time.monotonic() + 60

    def replaced():
        return any(a["node_id"] == doomed_node and a["actor_id"] != doomed_id for a in svc.router.actors())

    while time.monotonic() < deadline and not replaced():
        time.sleep(0.2)
    check(replaced(), "the node got a new actor")
    say("4. an actor killed mid-verdict: its item answered once by another actor; its node got a new actor")

    m = call(URL, "GET", "/metrics")[1]
    check("kforge_ray_handoffs_total" in m and "kforge_ray_actors 2" in m, "metrics: " + m[:400])

    # 5. The entry point: kforge-ray serve as its own process (a second driver on this cluster, its
    # actor on a node of its own: one GPU), answering, then SIGTERM; and a usage error.
    cli_env = dict(os.environ)
    bad = subprocess.run([sys.executable, "-m", "kforge_ray", "serve", "--no-auth", "--", "--tasks", task_dir,
                          "--store", "x.db"], env=cli_env, capture_output=True, text=True, timeout=60)
    check(bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("error: '--store' is set"),
          f"a usage error is one line and exit 2: {bad.returncode} {bad.stderr!r}")
    # Its node has one (simulated) GPU: the actor takes num_gpus=1 and Ray sets CUDA_VISIBLE_DEVICES
    # (the CPU task is still judged on the CPU: --device cpu --resource GPU).
    cluster.add_node(num_cpus=1, num_gpus=1)
    port_file = os.path.join(tmp, "cli-port")
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        cli_port = sk.getsockname()[1]
    cli_url = f"http://127.0.0.1:{cli_port}"
    cli_db = os.path.join(tmp, "cli.db")

    def start_cli():
        if os.path.exists(port_file):
            os.unlink(port_file)
        proc = subprocess.Popen([sys.executable, "-m", "kforge_ray", "serve", "--address", cluster.address, "--device",
                                 "cpu", "--resource", "GPU", "--kforge", KFORGE, "--token-file",
                                 os.path.join(tmp, "token"), "--store", cli_db, "--port", str(cli_port), "--port-file",
                                 port_file, "--work-root", os.path.join(tmp, "cli-work"), "--", *SERVE_ARGS],
                                env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not os.path.exists(port_file) and proc.poll() is None:
            time.sleep(0.1)
        check(os.path.exists(port_file), "kforge-ray serve listens")
        return proc

    def stop_cli(proc):
        proc.send_signal(15)
        try:
            out_ = proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            out_ = proc.communicate()[0]
        check(proc.returncode == 0 and "kforge-ray: listening on" in out_ and "kforge-ray: stopped" in out_,
              f"kforge-ray serve stops on SIGTERM with 0: {proc.returncode} {out_[-1500:]}")

    cli = start_cli()
    r = Client(cli_url, TOKEN, retries=1).score(["01_relu"], ["no code"], ["cli-1"])[0]
    check(r["reasons"] == ["invalid_completion"] and r["placement"]["device"]["kind"] == "cpu", f"cli: {r}")
    acts = call(cli_url, "GET", "/v1/health", token="")[1]["actors"]
    check(len(acts) == 1 and acts[0]["cuda_visible_devices"] == "0", f"a num_gpus=1 actor sees its GPU: {acts}")
    stop_cli(cli)
    say("5. kforge-ray serve as a process: answered, stopped on SIGTERM; a usage error is one line, exit 2")

    # 6. The router killed (-9) while an honest candidate is judged: started again on the same record,
    # it hands the pending id to an actor again; the client's retry (same id) gets the one verdict.
    cli = start_cli()
    got = {}

    def ask():
        try:
            got["r"] = Client(cli_url, TOKEN, retries=8, backoff_s=1).score(["01_relu"], [HONEST.format(tag="restart")],
                                                                            ["cli-restart"])[0]
        except Exception as e:  # noqa: BLE001
            got["err"] = e

    th = threading.Thread(target=ask)
    th.start()
    deadline = time.monotonic() + 60
    row = None
    while time.monotonic() < deadline:
        row = sqlite3.connect(cli_db).execute("SELECT handed FROM requests WHERE request_id = 'cli-restart'").fetchone()
        if row and row[0] >= 1:
            break
        time.sleep(0.1)
    time.sleep(2)
    cli.kill()
    cli.communicate()
    cli = start_cli()
    th.join(timeout=240)
    check("r" in got and got["r"]["correct"] is True, f"the retried request was answered after the restart: {got}")
    row = sqlite3.connect(cli_db).execute("SELECT handed, state FROM requests WHERE request_id = 'cli-restart'").fetchone()
    check(row == (2, "done"), f"handed once before the kill and once after: {row}")
    again = Client(cli_url, TOKEN, retries=1).score(["01_relu"], [HONEST.format(tag="restart")], ["cli-restart"])[0]
    check(again.get("from_store") is True and again["reward"] == got.get("r", {}).get("reward"), "then from the record")
    stop_cli(cli)
    say("6. the router killed mid-verdict and restarted on its record: the pending id judged, answered once")
finally:
    try:
        svc.stop()
        say("stopped the service")
    finally:
        ray.shutdown()
        cluster.shutdown()
        os.killpg(plain.pid, 15)
        plain.wait()
        say("stopped the cluster")
if failures:
    print(f"{len(failures)} check(s) failed", flush=True)
    sys.exit(1)
shutil.rmtree(tmp, ignore_errors=True)
say("OK")
