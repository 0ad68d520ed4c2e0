"""kforge_client against a running kforge serve (started by tests/unit/test_serve.cpp, which sets
KFORGE_SERVE_URL and KFORGE_SERVE_TOKEN and serves the task 01_relu on the CPU).

Checks the /v1/score client, the TRL reward function (called the way GRPOTrainer calls reward
functions: keyword arguments prompts, completions, completion_ids and the dataset's columns), the
verl adapter (called with verl's positional signature) and OpenRLHF's /get_reward request shape.
Only completions that are answered without running a candidate (no code; a static-scan rejection)
are used, so the script takes seconds. Prints OK and exits 0, or raises.
"""
import inspect
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "kforge_client"))

import kforge_client  # noqa: E402
from kforge_client import Client, KforgeError  # noqa: E402

URL = os.environ["KFORGE_SERVE_URL"]
TOKEN = os.environ["KFORGE_SERVE_TOKEN"]

THREADED = (
    "```python\nimport threading\nimport torch\nimport torch.nn as nn\n# {tag}\n\n\n"
    "class ModelNew(nn.Module):\n    def forward(self, x):\n"
    "        threading.Thread(target=lambda: None).start()\n        return x.clamp_min(0.0)\n```\n"
)

c = Client(URL, TOKEN, retries=2, backoff_s=0.2)
assert c.health()["status"] == "ok"
assert [t["id"] for t in c.tasks()] == ["01_relu"], c.tasks()

# /v1/score; the same request ids twice give the stored results.
res = c.score(["01_relu", "01_relu"], ["no code at all", THREADED.format(tag="py1")], ["py-a", "py-b"])
assert [r["request_id"] for r in res] == ["py-a", "py-b"], res
assert res[0]["reasons"] == ["invalid_completion"], res[0]
assert res[1]["reasons"][0] == "forbidden_call", res[1]
again = c.score(["01_relu"], [THREADED.format(tag="py1")], ["py-b"])
assert again[0].get("from_store") is True and again[0]["reward"] == res[1]["reward"], again

# Errors: a wrong token is refused at once (no retries of a 4xx), an unknown task is a 404.
try:
    Client(URL, "wrong-token-wrong-token", retries=0).score(["01_relu"], ["x"])
    raise AssertionError("a wrong token was accepted")
except KforgeError as e:
    assert e.status == 403, e
try:
    c.score(["nope"], ["x"])
    raise AssertionError("an unknown task was accepted")
except KforgeError as e:
    assert e.status == 404, e

# Jobs.
job = c.submit_job(["01_relu"], [THREADED.format(tag="job")])
done = c.wait_job(job, poll_s=0.2, timeout_s=120)
assert done[0]["reasons"][0] == "forbidden_call", done

# TRL: GRPOTrainer calls reward_func(prompts=..., completions=..., completion_ids=..., **columns).
reward = kforge_client.trl_reward(URL, TOKEN)
assert reward.__name__ == "kforge"
prompts = ["make relu fast"] * 3
completions = [THREADED.format(tag="trl1"), [{"role": "assistant", "content": "no code"}], THREADED.format(tag="trl2")]
r = reward(prompts=prompts, completions=completions, completion_ids=[[1], [2], [3]], task_id=["01_relu"] * 3,
           trainer_state=None)
assert isinstance(r, list) and len(r) == 3 and all(isinstance(x, float) for x in r), r
# The async form (TRL awaits coroutine reward functions).
import asyncio  # noqa: E402

areward = kforge_client.trl_reward(URL, TOKEN, asynchronous=True)
assert asyncio.iscoroutinefunction(areward) and areward.__name__ == "kforge"
ar = asyncio.run(areward(prompts=prompts[:2], completions=completions[:2], task_id=["01_relu"] * 2))
assert len(ar) == 2 and all(isinstance(x, float) for x in ar), ar
# A server that cannot be reached gives None for every completion (TRL ignores those).
dead = kforge_client.trl_reward("http://127.0.0.1:9", TOKEN, client=Client("http://127.0.0.1:9", TOKEN, retries=0))
assert dead(prompts=prompts[:1], completions=completions[:1], task_id=["01_relu"]) == [None]

# verl: compute_score(data_source, solution_str, ground_truth, extra_info), positionally.
os.environ["KFORGE_SERVE_URL"] = URL
from kforge_client.verl import compute_score  # noqa: E402

params = list(inspect.signature(compute_score).parameters)
assert params[:4] == ["data_source", "solution_str", "ground_truth", "extra_info"], params
s = compute_score("kforge", THREADED.format(tag="verl"), "01_relu", {"index": 7})
assert isinstance(s, dict) and isinstance(s["score"], float) and s["correct"] == 0.0, s
s2 = compute_score("kforge", "no code", {"task_id": "01_relu"}, None)
assert isinstance(s2["score"], float) and s2["correct"] == 0.0, s2
# verl's reward managers call it with keywords, extra_info carrying num_turns and rollout_reward_scores,
# and merge the config's reward_kwargs (here the url) into the call; every call returns the same keys.
s3 = compute_score(data_source="kforge", solution_str="no code", ground_truth="01_relu",
                   extra_info={"index": 3, "num_turns": None, "rollout_reward_scores": {}}, url=URL)
assert set(s3) == set(s) == {"score", "correct", "speedup"} and s3["score"] < 0, s3

# OpenRLHF: {"query": prompt + response, "prompts", "labels"} -> {"rewards", "scores", "extra_logs"}.
g = c.get_reward(["P:" + THREADED.format(tag="orl"), "P:no code"], ["P:", "P:"], ["01_relu", "01_relu"])
assert len(g["rewards"]) == 2 and len(g["scores"]) == 2 and g["scores"] == [0.0, 0.0], g
assert set(g["extra_logs"]) >= {"kforge_correct", "kforge_speedup"}, g
print("OK")
