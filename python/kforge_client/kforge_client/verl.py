"""verl's custom reward function: ``compute_score(data_source, solution_str, ground_truth, extra_info=None)``.

verl's reward managers (``verl/workers/reward_manager/naive.py`` and the others) call it with keyword
arguments, ``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)``,
after merging the config's ``reward_kwargs`` into them (``verl.trainer.ppo.reward.get_custom_reward_fn``).
In verl's config::

    reward:
      custom_reward_function:
        path: pkg://kforge_client.verl      # or the file's path: <site-packages>/kforge_client/verl.py
        name: compute_score
        reward_kwargs: {url: "http://127.0.0.1:8000"}   # optional; else $KFORGE_SERVE_URL

The token is ``reward_kwargs.token`` or ``$KFORGE_SERVE_TOKEN``. ``ground_truth`` (the dataset's
``reward_model.ground_truth``, as ``kforge data export --kind prompts`` writes it) is the task id, or
``extra_info`` holds ``task_id``. Returns a dict with ``score`` (the reward: verl reads
``score["score"]``), ``correct`` and ``speedup``, the same keys every call (verl logs each key's
values as a column). A failed request raises, since verl has no "no reward" value.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

try:
    from .client import Client, KforgeError, request_id_for
except ImportError:  # loaded by file path (verl's `path: .../kforge_client/verl.py`): no parent package
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from kforge_client.client import Client, KforgeError, request_id_for  # type: ignore[no-redef]

_clients: Dict[str, Client] = {}


def _client(url: Optional[str], token: Optional[str]) -> Client:
    url = url or os.environ.get("KFORGE_SERVE_URL", "")
    if not url:
        raise KforgeError("set KFORGE_SERVE_URL (e.g. http://127.0.0.1:8000) or reward_kwargs.url for "
                          "kforge_client.verl.compute_score")
    key = f"{url}\0{token or ''}"
    if key not in _clients:
        _clients[key] = Client(url, token)
    return _clients[key]


def make_compute_score(url: Optional[str] = None, token: Optional[str] = None):
    """A ``compute_score`` bound to a server (``url``, ``token``); the module's ``compute_score`` reads
    them from ``reward_kwargs`` or the environment."""

    def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Optional[dict] = None,
                      **kwargs: Any) -> Dict[str, Any]:
        task_id = None
        if isinstance(extra_info, dict):
            task_id = extra_info.get("task_id")
        if task_id is None:
            task_id = ground_truth.get("task_id") if isinstance(ground_truth, dict) else ground_truth
        if not isinstance(task_id, str) or not task_id:
            raise KforgeError("no task id: put it in ground_truth or in extra_info['task_id']")
        salt = ""
        if isinstance(extra_info, dict) and extra_info.get("index") is not None:
            salt = f"verl-{extra_info['index']}"
        rid = request_id_for(task_id, solution_str, salt)
        client = _client(kwargs.get("url") or url, kwargs.get("token") or token)
        r = client.score([task_id], [solution_str], [rid])[0]
        best = 0.0
        for s in (r.get("speedup") or {}).values():
            best = max(best, float(s.get("median", 0.0)))
        return {"score": float(r["reward"]), "correct": 1.0 if r["correct"] else 0.0,
                "speedup": best if r["correct"] else 0.0}

    return compute_score


compute_score = make_compute_score()
