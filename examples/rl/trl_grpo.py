#!/usr/bin/env python3
"""GRPO with TRL against kforge serve: a few steps on a tiny random causal LM, nothing downloaded.

    python3 examples/rl/trl_grpo.py                      # starts its own `kforge serve --device cpu`
    python3 examples/rl/trl_grpo.py --device cuda        # the same server judging on the GPU
    python3 examples/rl/trl_grpo.py --device cuda --hgemm 256x256x256   # and an HGEMM task (nvcc, GPU)
    python3 examples/rl/trl_grpo.py --url http://127.0.0.1:8000 --task-id 01_relu   # a running server

The policy is a 2-layer Llama built from a config (random weights). Its tokenizer is built here:
a word-level vocabulary whose tokens are whole snippets (an honest ModelNew answer, one the static
scan refuses, one without ModelNew, prose words), so that even random sampling produces completions
the server judges differently, and GRPO gets rewards that differ within a group. The rewards come
from the server (kforge_client.trl_reward), reach the trainer, and appear in its logs
(rewards/kforge/mean). Exits 0 when every logged step has a finite kforge reward.

With --hgemm MxNxK the server also serves the HGEMM problem hgemm:MxNxK, half of the prompts name
it, and the vocabulary gains two honest CUDA kernels of kforge's corpus (tiled_smem.cu and the
slower mma_sync.cu, each a whole token): those completions are compiled by nvcc and judged on the
GPU (so --hgemm needs a GPU), and the run must also get a kforge reward for an HGEMM prompt. The
rewards each task got are printed ("rewards by task").

Needs: torch, transformers, trl (scripts/install-deps.sh installs them with KFORGE_WITH_TRL=1), and
a built kforge (build/kforge, or --kforge PATH).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python", "kforge_client"))

import kforge_client  # noqa: E402

HONEST = (
    "\n```python\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n"
    "        return x.clamp_min(0.0)\n```\n"
)
THREADED = (
    "\n```python\nimport threading\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        threading.Thread(target=lambda: None).start()\n"
    "        return x.clamp_min(0.0)\n```\n"
)
NO_MODEL = "\n```python\nimport torch\nprint('no ModelNew here')\n```\n"
HGEMM_FILES = ["tiled_smem.cu", "mma_sync.cu"]  # honest kernels of tests/corpus/hgemm/honest
WORDS = ["Analysis:", "memory-bound", "fuse", "vectorise", "faster", "kernel", "clamp", "ReLU"]


def hgemm_snippets():
    out = []
    for f in HGEMM_FILES:
        with open(os.path.join(ROOT, "tests", "corpus", "hgemm", "honest", f), encoding="utf-8") as fh:
            out.append(f"\n```cuda\n{fh.read()}\n```\n")
    return out


def build_tokenizer(prompts, hgemm: bool):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<unk>"]
    snippets = [HONEST, THREADED, NO_MODEL] + (hgemm_snippets() if hgemm else [])
    vocab = {t: i for i, t in enumerate(specials + snippets + WORDS)}
    # Prompt words outside the vocabulary become <unk>; completions decode to the snippets.
    for w in " ".join(prompts).split():
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def build_model(vocab_size: int, pad_id: int, eos_id: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                      pad_token_id=pad_id, eos_token_id=eos_id, bos_token_id=eos_id)
    return LlamaForCausalLM(cfg)


def start_server(args, workdir: str):
    tasks = os.path.join(workdir, "tasks")
    os.makedirs(tasks)
    shutil.copy(os.path.join(ROOT, "tasks", "kforge", "01_relu.py"), tasks)
    port_file = os.path.join(workdir, "port")
    cmd = [args.kforge, "serve", "--tasks", tasks, "--device", args.device, "--samples", "3", "--trials", "1",
           "--store", os.path.join(workdir, "serve.db"), "--port", "0", "--port-file", port_file,
           "--no-auth", "--reuse-verdicts", "--atol", "0.001", "--work-dir", os.path.join(workdir, "work")]
    if args.hgemm:
        cmd += ["--hgemm-shapes", args.hgemm]
    log = open(os.path.join(workdir, "serve.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        if os.path.exists(port_file):
            return proc, f"http://127.0.0.1:{int(open(port_file).read())}"
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    log.close()
    raise SystemExit("kforge serve did not start:\n" + open(os.path.join(workdir, "serve.log")).read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="a running kforge serve (default: start one)")
    ap.add_argument("--token", default=os.environ.get("KFORGE_SERVE_TOKEN"), help="its bearer token")
    ap.add_argument("--task-id", default="01_relu")
    ap.add_argument("--kforge", default=os.path.join(ROOT, "build", "kforge"))
    ap.add_argument("--device", default="cpu", help="the started server's --device (cpu or cuda)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--hgemm", metavar="MxNxK", help="also an HGEMM task (hgemm:MxNxK) with CUDA completions (a GPU)")
    args = ap.parse_args()
    if args.hgemm and not re.fullmatch(r"[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*", args.hgemm):
        ap.error(f"--hgemm '{args.hgemm}': give the problem as MxNxK, e.g. 256x256x256")
    if args.hgemm and args.url:
        ap.error("--hgemm starts the server with that problem: leave out --url (or name the task with --task-id)")

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    workdir = tempfile.mkdtemp(prefix="kforge-trl-")
    proc = None
    try:
        url = args.url
        if not url:
            proc, url = start_server(args, workdir)
        prompt = "Make the ReLU task faster with a CUDA kernel : write ModelNew"
        rows = [(prompt, args.task_id)] * 8
        if args.hgemm:  # half the prompts name the HGEMM problem; two prompts per step
            hp = f"Make the HGEMM {args.hgemm} task faster with a CUDA kernel : write kforge_hgemm"
            rows = [(prompt, args.task_id), (hp, f"hgemm:{args.hgemm}")] * 4
        tok = build_tokenizer([p for p, _ in rows], bool(args.hgemm))
        model = build_model(len(tok), tok.pad_token_id, tok.eos_token_id)
        ds = Dataset.from_dict({"prompt": [p for p, _ in rows], "task_id": [t for _, t in rows]})
        per_step = 8 if args.hgemm else 4
        cfg = GRPOConfig(output_dir=os.path.join(workdir, "out"), max_steps=args.steps, per_device_train_batch_size=per_step,
                         num_generations=4, max_completion_length=4, logging_steps=1, learning_rate=1e-3,
                         use_cpu=args.device == "cpu", bf16=False, report_to="none", save_strategy="no",
                         seed=0, temperature=1.0,
                         # In order, so that every step's two prompts are one of each task.
                         **({"shuffle_dataset": False} if args.hgemm else {}))
        reward = kforge_client.trl_reward(url, args.token)
        by_task = {}  # task id -> the rewards the trainer was given for it

        def kforge(prompts=None, completions=None, **kwargs):  # trl_reward as TRL calls it, recorded
            out = reward(prompts=prompts, completions=completions, **kwargs)
            for t, r in zip(kwargs["task_id"], out):
                by_task.setdefault(t, []).append(r)
            return out

        trainer = GRPOTrainer(model=model, reward_funcs=[kforge], args=cfg, train_dataset=ds, processing_class=tok)
        trainer.train()
        logged = [h["rewards/kforge/mean"] for h in trainer.state.log_history if "rewards/kforge/mean" in h]
        print("kforge rewards per step:", ", ".join(f"{r:.3f}" for r in logged))
        print("rewards by task:", "; ".join(
            f"{t}: " + ", ".join("None" if r is None else f"{r:.3f}" for r in rs) for t, rs in sorted(by_task.items())))
        if len(logged) < args.steps or not all(math.isfinite(r) for r in logged):
            print("FAIL: the trainer did not log a finite kforge reward for every step", file=sys.stderr)
            return 1
        missing = [t for t in sorted({t for _, t in rows}) if not any(r is not None for r in by_task.get(t, []))]
        if missing:
            print(f"FAIL: no kforge reward reached the trainer for {', '.join(missing)}", file=sys.stderr)
            return 1
        if proc is not None:  # the server's own count of what it judged (the GPU's verdicts with --device cuda)
            import urllib.request
            with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
                verdicts = [ln for ln in r.read().decode().splitlines() if ln.startswith("kforge_serve_verdicts_total{")]
            print("server verdicts:", ", ".join(v.split("reason=")[1].replace('"}', ":").replace('"', "") for v in verdicts))
        health = kforge_client.Client(url, args.token).health()
        print(f"OK: {len(logged)} GRPO steps with kforge rewards; server: {health}")
        return 0
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
