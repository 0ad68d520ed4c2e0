#!/usr/bin/env python3
"""GRPO with TRL against kforge serve: a few steps on a tiny random causal LM, nothing downloaded.

    python3 examples/rl/trl_grpo.py                      # starts its own `kforge serve --device cpu`
    python3 examples/rl/trl_grpo.py --device cuda        # the same server judging on the GPU
    python3 examples/rl/trl_grpo.py --url http://127.0.0.1:8000 --task-id 01_relu   # a running server

The policy is a 2-layer Llama built from a config (random weights). Its tokenizer is built here:
a word-level vocabulary whose tokens are whole snippets (an honest ModelNew answer, one the static
scan refuses, one without ModelNew, prose words), so that even random sampling produces completions
the server judges differently, and GRPO gets rewards that differ within a group. The rewards come
from the server (kforge_client.trl_reward), reach the trainer, and appear in its logs
(rewards/kforge/mean). Exits 0 when every logged step has a finite kforge reward.

Needs: torch, transformers, trl (scripts/install-deps.sh installs them with KFORGE_WITH_TRL=1), and
a built kforge (build/kforge, or --kforge PATH).
"""
from __future__ import annotations

import argparse
import math
import os
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
WORDS = ["Analysis:", "memory-bound", "fuse", "vectorise", "faster", "kernel", "clamp", "ReLU"]


def build_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials + [HONEST, THREADED, NO_MODEL] + WORDS)}
    # Prompt words outside the vocabulary become <unk>; completions decode to the snippets.
    for w in "Make the ReLU task faster with a CUDA kernel : write ModelNew".split():
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
    args = ap.parse_args()

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    workdir = tempfile.mkdtemp(prefix="kforge-trl-")
    proc = None
    try:
        url = args.url
        if not url:
            proc, url = start_server(args, workdir)
        tok = build_tokenizer()
        model = build_model(len(tok), tok.pad_token_id, tok.eos_token_id)
        prompt = "Make the ReLU task faster with a CUDA kernel : write ModelNew"
        ds = Dataset.from_dict({"prompt": [prompt] * 8, "task_id": [args.task_id] * 8})
        cfg = GRPOConfig(output_dir=os.path.join(workdir, "out"), max_steps=args.steps, per_device_train_batch_size=4,
                         num_generations=4, max_completion_length=4, logging_steps=1, learning_rate=1e-3,
                         use_cpu=args.device == "cpu", bf16=False, report_to="none", save_strategy="no",
                         seed=0, temperature=1.0)
        reward = kforge_client.trl_reward(url, args.token)
        trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=cfg, train_dataset=ds, processing_class=tok)
        trainer.train()
        logged = [h["rewards/kforge/mean"] for h in trainer.state.log_history if "rewards/kforge/mean" in h]
        print("kforge rewards per step:", ", ".join(f"{r:.3f}" for r in logged))
        if len(logged) < args.steps or not all(math.isfinite(r) for r in logged):
            print("FAIL: the trainer did not log a finite kforge reward for every step", file=sys.stderr)
            return 1
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
