"""kforge_client.verl.compute_score called by verl itself (needs verl installed; tests/unit/test_serve.cpp
runs this with $KFORGE_VERL_PYTHON or python3 where `import verl` works, else skips).

verl's own loader (verl.trainer.ppo.reward.get_custom_reward_fn, with `path` given both as
pkg://kforge_client.verl and as the file's path, and reward_kwargs carrying the server's url and
token) and verl's NaiveRewardManager over a DataProto of two responses (a char-level stand-in
tokenizer): the rewards the server gives land on each response's last token, and the dict's keys
reach reward_extra_info. Needs KFORGE_SERVE_URL and KFORGE_SERVE_TOKEN (a server with 01_relu).
Prints OK and exits 0, or raises.
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python", "kforge_client"))

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.workers.reward_manager.naive import NaiveRewardManager  # noqa: E402

URL = os.environ["KFORGE_SERVE_URL"]
TOKEN = os.environ["KFORGE_SERVE_TOKEN"]
os.environ.pop("KFORGE_SERVE_URL")  # the url must come from reward_kwargs
os.environ.pop("KFORGE_SERVE_TOKEN")

THREADED = (
    "```python\nimport threading\nimport torch\nimport torch.nn as nn\n# verl\n\n\n"
    "class ModelNew(nn.Module):\n    def forward(self, x):\n"
    "        threading.Thread(target=lambda: None).start()\n        return x.clamp_min(0.0)\n```\n"
)


class CharTokenizer:
    eos_token = ""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(int(i)) for i in ids if int(i) != 0)


def batch(prompts, responses, task_ids):
    plen = max(len(p) for p in prompts)
    rlen = max(len(r) for r in responses)
    p_ids = torch.zeros(len(prompts), plen, dtype=torch.long)
    r_ids = torch.zeros(len(responses), rlen, dtype=torch.long)
    mask = torch.zeros(len(prompts), plen + rlen, dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        p_ids[i, plen - len(p):] = torch.tensor([ord(c) for c in p])  # prompts are left-padded
        r_ids[i, : len(r)] = torch.tensor([ord(c) for c in r])
        mask[i, plen - len(p): plen + len(r)] = 1
    import numpy as np

    return DataProto.from_dict(
        tensors={"prompts": p_ids, "responses": r_ids, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["kforge"] * len(prompts), dtype=object),
            "reward_model": np.array([{"style": "rule", "ground_truth": t} for t in task_ids], dtype=object),
            "extra_info": np.array([{"task_id": t, "index": i} for i, t in enumerate(task_ids)], dtype=object),
        },
    )


module_file = os.path.join(ROOT, "python", "kforge_client", "kforge_client", "verl.py")
for path in ("pkg://kforge_client.verl", os.path.abspath(module_file)):
    fn_cfg = {"path": path, "name": "compute_score", "reward_kwargs": {"url": URL, "token": TOKEN}}
    config = OmegaConf.create({"reward": {"custom_reward_function": fn_cfg}, "custom_reward_function": fn_cfg})
    fn = get_custom_reward_fn(config)
    assert fn is not None, path
    manager = NaiveRewardManager(tokenizer=CharTokenizer(), num_examine=0, compute_score=fn)
    data = batch(["Make relu fast: ", "P: "], [THREADED, "no code at all"], ["01_relu", "01_relu"])
    out = manager(data, return_dict=True)
    rewards = out["reward_tensor"]
    extra = out["reward_extra_info"]
    assert list(extra) == ["score", "correct", "speedup"] or set(extra) >= {"score", "correct", "speedup"}, extra
    assert extra["correct"] == [0.0, 0.0], extra
    lengths = data.batch["attention_mask"][:, data.batch["prompts"].shape[-1]:].sum(-1)
    for i in range(2):
        last = int(lengths[i]) - 1
        assert rewards[i, last].item() == extra["score"][i], (path, i, rewards[i], extra)
        assert rewards[i].abs().sum().item() == abs(extra["score"][i]), "the reward sits on the last token only"
        assert extra["score"][i] < 0, extra  # both are rejections: the reward floor
print("OK")
