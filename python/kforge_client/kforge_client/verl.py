"""verl's custom reward function: ``compute_score(data_source, solution_str, ground_truth, extra_info)``.

In verl's config::

    custom_reward_function:
      path: <site-packages>/kforge_client/verl.py
      name: compute_score

with ``KFORGE_SERVE_URL`` (and ``KFORGE_SERVE_TOKEN``) in the environment of the reward workers.
``ground_truth`` (the dataset's ``reward_model.ground_truth``) is the task id, or ``extra_info``
holds ``task_id``. Returns a dict with ``score`` (the reward) and the verdict's details, which verl
logs; a failed request raises, since verl has no "no reward" value.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

from .client import Client, KforgeError, request_id_for

_clients: Dict[str, Client] = {}


def _client(url: Optional[str], token: Optional[str]) -> Client:
    url = url or os.environ.get("KFORGE_SERVE_URL", "")
    if not url:
        raise KforgeError("set KFORGE_SERVE_URL (e.g. http://127.0.0.1:8000) for kforge_client.verl.compute_score")
    key = f"{url}\0{token or ''}"
    if key not in _clients:
        _clients[key] = Client(url, token)
    return _clients[key]


def make_compute_score(url: Optional[str] = None, token: Optional[str] = None):
    def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Optional[dict] = None,
                      **kwargs) -> Dict[str, Any]:
        task_id = None
        if isinstance(extra_info, dict):
            task_id = extra_info.get("task_id")
        if task_id is None:
            task_id = ground_truth.get("task_id") if isinstance(ground_truth, dict) else ground_truth
        if not isinstance(task_id, str) or not task_id:
            raise KforgeError("no task id: put it in ground_truth or in extra_info['task_id']")
        salt = ""
        if isinstance(extra_info, dict) and "index" in extra_info:
            salt = f"verl-{extra_info['index']}"
        rid = request_id_for(task_id, solution_str, salt)
        r = _client(url, token).score([task_id], [solution_str], [rid])[0]
        best = 0.0
        for s in (r.get("speedup") or {}).values():
            best = max(best, float(s.get("median", 0.0)))
        return {"score": float(r["reward"]), "correct": 1.0 if r["correct"] else 0.0,
                "speedup": best if r["correct"] else 0.0}

    return compute_score


compute_score = make_compute_score()
