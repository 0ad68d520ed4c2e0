"""``kforge-ray serve``: the evaluation service on a Ray cluster (see docs/scale-out.md).

    kforge-ray serve --address auto --token-file token --store router.db -- --tasks tasks/kforge --reuse-verdicts

Everything after ``--`` goes to every actor's ``kforge serve``. Bad input: one line ``error: ...``
on stderr and exit status 2, before anything starts.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import List, Optional


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse would print the usage first)
        raise UsageError(message)


def _positive(kind):
    def conv(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a {'number' if kind is float else 'whole number'}")
        if not (v > 0) or v != v or v in (float("inf"),):
            raise argparse.ArgumentTypeError(f"'{text}' must be positive and finite")
        return v
    return conv


def _non_negative(kind):
    def conv(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a {'number' if kind is float else 'whole number'}")
        if not (v >= 0) or v in (float("inf"),):
            raise argparse.ArgumentTypeError(f"'{text}' must be zero or more and finite")
        return v
    return conv


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number")
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port (0..65535)")
    return v


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kforge-ray", allow_abbrev=False, description="kforge's evaluation service on a Ray cluster: one kforge serve per "
                "GPU (a Ray actor each), a router, the endpoints of kforge serve.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    s = sub.add_parser("serve", allow_abbrev=False, help="start the router and its HTTP ingress (this process is a Ray driver)",
                       description="Start the router and its HTTP ingress. Arguments after '--' go to every actor's "
                       "kforge serve (--tasks, --hgemm-shapes, --reward, --reuse-verdicts, time-outs...); kforge-ray "
                       "sets --host, --port, --token-file, --store, --device and --work-dir of those itself.",
                       epilog="example: kforge-ray serve --address auto --token-file token -- --tasks tasks/kforge")
    s.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "auto"),
                   help="Ray cluster to join (default $RAY_ADDRESS, else 'auto': the cluster this node belongs to); "
                   "'local' starts a Ray instance of its own on this machine")
    s.add_argument("--local-actors", type=_positive(int), default=1,
                   help="with --address local and a custom --resource (--device cpu): how many actors this machine "
                   "offers (default 1)")
    s.add_argument("--kforge", default=os.environ.get("KFORGE_BINARY", "kforge"),
                   help="the kforge binary on every node (default $KFORGE_BINARY, else 'kforge' on PATH)")
    s.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="PyTorch tasks: cuda or cpu (default cuda)")
    s.add_argument("--resource", default=None,
                   help="Ray resource an actor takes: GPU (default for --device cuda: num_gpus) or a custom resource "
                   "(default for --device cpu: kforge_cpu, num_gpus=0; start nodes with "
                   "ray start --resources='{\"kforge_cpu\": N}')")
    s.add_argument("--per-actor", type=_positive(float), default=1.0, help="amount of --resource per actor (default 1)")
    s.add_argument("--actors-per-node", type=_non_negative(int), default=0,
                   help="at most this many actors on one node (default 0: as many as its resource allows)")
    s.add_argument("--node-resource", default="",
                   help="only nodes that have this custom resource host actors (e.g. reward nodes started with "
                   "ray start --resources='{\"kforge_node\": 1}', so a trainer's GPUs elsewhere stay its own)")
    s.add_argument("--actor-cpus", type=_non_negative(float), default=0.0,
                   help="CPUs each actor reserves in Ray's accounting (default 0)")
    s.add_argument("--work-root", default="/tmp/kforge-ray",
                   help="folder on each node for the actors' stores and candidate files (default /tmp/kforge-ray)")
    s.add_argument("--host", default="127.0.0.1", help="address the ingress binds (default 127.0.0.1)")
    s.add_argument("--port", type=_port, default=8000, help="ingress port (0: any free port; default 8000)")
    s.add_argument("--port-file", help="write the bound port to this file once listening")
    s.add_argument("--token-file", help="bearer token clients must send (else $KFORGE_SERVE_TOKEN), at least 16 characters")
    s.add_argument("--no-auth", action="store_true", help="accept requests without a token")
    s.add_argument("--store", default="kforge-ray.db",
                   help="the router's SQLite record of every request id and its verdict (default kforge-ray.db)")
    s.add_argument("--max-body-bytes", type=_positive(int), default=32 << 20, help="largest request body (413 beyond)")
    s.add_argument("--max-completion-bytes", type=_positive(int), default=256 * 1024, help="largest completion (413)")
    s.add_argument("--max-batch", type=_positive(int), default=256, help="most items per request (413 beyond)")
    s.add_argument("--max-queue", type=_positive(int), default=256,
                   help="most candidates waiting per actor (the router's limit is this times the live actors; 429)")
    s.add_argument("--request-timeout", type=_positive(float), default=3600.0,
                   help="seconds /v1/score and /get_reward wait before answering 504 (default 3600)")
    s.add_argument("--min-actors", type=_positive(int), default=1, help="actors ready before the ingress listens")
    s.add_argument("--start-timeout", type=_positive(float), default=600.0,
                   help="seconds to wait for --min-actors (default 600)")
    s.add_argument("--poll", type=_positive(float), default=1.0, help="seconds between looks for new nodes (default 1)")
    s.add_argument("serve_args", nargs=argparse.REMAINDER, help="-- then the arguments of kforge serve")
    return p


def _token(args) -> str:
    token = ""
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            raise UsageError(f"--token-file {args.token_file}: {e.strerror}")
        if not token:
            raise UsageError(f"the token file '{args.token_file}' is empty")
    elif os.environ.get("KFORGE_SERVE_TOKEN", "").strip():
        token = os.environ["KFORGE_SERVE_TOKEN"].strip()
    if not token and not args.no_auth:
        raise UsageError("kforge-ray serve needs a token: --token-file FILE or $KFORGE_SERVE_TOKEN (or --no-auth)")
    if token and args.no_auth:
        raise UsageError("--no-auth and a token exclude each other")
    if token and len(token) < 16:
        raise UsageError("the token is shorter than 16 characters")
    return token


def _writable(path: str, flag: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a folder")
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{flag} {path}: the folder {folder} is not writable")


def _serve(args) -> int:
    from .service import check_serve_args, start

    serve_args: List[str] = list(args.serve_args)
    if serve_args and serve_args[0] == "--":
        serve_args = serve_args[1:]
    elif serve_args:
        raise UsageError(f"unexpected argument '{serve_args[0]}' (the arguments of kforge serve come after '--')")
    try:
        check_serve_args(serve_args)
    except ValueError as e:
        raise UsageError(str(e))
    for flag in ("--max-batch", "--max-completion-bytes", "--max-queue", "--max-body-bytes"):
        if any(a.split("=", 1)[0] == flag for a in serve_args):
            raise UsageError(f"'{flag}' is a kforge-ray option (the router enforces it and passes it on); give it "
                             "before '--'")
    if args.resource is not None and not args.resource.strip():
        raise UsageError("--resource is empty")
    token = _token(args)
    if args.port != 0:  # the same check kforge serve makes, before anything starts
        import socket

        try:
            with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as sk:
                sk.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sk.bind((args.host, args.port))
        except OSError:
            raise UsageError(f"cannot bind {args.host}:{args.port} (in use, or not an address of this machine)")
    _writable(args.store, "--store")
    if args.port_file:
        _writable(args.port_file, "--port-file")
    try:
        import ray
    except ImportError:
        print("error: ray is not installed (pip install ray, or KFORGE_WITH_RAY=1 scripts/install-deps.sh)",
              file=sys.stderr)
        return 1
    resource = args.resource or ("GPU" if args.device == "cuda" else "kforge_cpu")
    if args.address == "local":
        extra = {} if resource == "GPU" else {"resources": {resource: args.local_actors * args.per_actor}}
        ray.init(logging_level="warning", include_dashboard=False, **extra)
    else:
        ray.init(address=args.address, logging_level="warning")
    try:
        svc = start(serve_args, kforge=args.kforge, device=args.device, resource=resource, amount=args.per_actor,
                    actor_cpus=args.actor_cpus, actors_per_node=args.actors_per_node, token=token, host=args.host,
                    port=args.port, store=args.store, work_root=args.work_root, max_body_bytes=args.max_body_bytes,
                    max_completion_bytes=args.max_completion_bytes, max_batch=args.max_batch,
                    max_queue=args.max_queue, request_timeout_s=args.request_timeout, min_actors=args.min_actors,
                    start_timeout_s=args.start_timeout, poll_s=args.poll, node_resource=args.node_resource)
    except (RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        ray.shutdown()
        return 1
    st = svc.router.stats()
    print(f"kforge-ray: {len(svc.router.tasks())} task(s), {st['actors']} actor(s), {st['slots']} slot(s), "
          f"record {args.store}", flush=True)
    print(f"kforge-ray: listening on {svc.url}", flush=True)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{svc.port}\n")
        os.replace(tmp, args.port_file)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    svc.stop()
    ray.shutdown()
    print("kforge-ray: stopped", flush=True)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = parser()
    try:
        args = p.parse_args(argv)
        if not args.command:
            raise UsageError("a command is needed: kforge-ray serve ... (kforge-ray --help)")
        return _serve(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
