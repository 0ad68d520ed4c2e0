"""A reward function for TRL's GRPOTrainer.

``GRPOTrainer(reward_funcs=[kforge_client.trl_reward(url, token)], train_dataset=ds)``, where the
dataset has a ``prompt`` column and a ``task_id`` column naming a task the server was started with.
TRL calls ``reward_func(prompts=..., completions=..., completion_ids=..., **columns)`` with one
entry per completion; completions are strings, or lists of chat messages in the conversational
format. The function returns one float per completion, or ``None`` for one whose request failed,
which TRL leaves out of the reward instead of training on a made-up number.
"""
from __future__ import annotations

import asyncio
import itertools
from typing import Any, Callable, List, Optional

from .client import Client, KforgeError, request_id_for


def _text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": "..."}]
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


def trl_reward(url: str, token: Optional[str] = None, task_column: str = "task_id", batch_size: int = 64,
               client: Optional[Client] = None, name: str = "kforge",
               asynchronous: bool = False) -> Callable[..., Any]:
    """Returns ``reward_func(prompts, completions, **kwargs) -> list[float | None]``.

    Each call gets a fresh salt in its request ids (so a completion sampled again at a later step is
    a new request), and the same ids on every retry of that call (so nothing is scored twice).
    ``asynchronous=True`` returns a coroutine function instead (TRL awaits those alongside its
    other async reward functions); the HTTP calls run in a worker thread.
    """
    cl = client or Client(url, token)
    calls = itertools.count()

    def reward_func(prompts=None, completions=None, **kwargs) -> List[Optional[float]]:
        completions = list(completions or [])
        tasks = kwargs.get(task_column)
        if tasks is None:
            raise KforgeError(f"the dataset has no '{task_column}' column: kforge needs a task id per prompt")
        tasks = list(tasks)
        if len(tasks) != len(completions):
            raise KforgeError(f"{len(tasks)} task ids for {len(completions)} completions")
        salt = f"trl-{id(reward_func):x}-{next(calls)}"
        texts = [_text(c) for c in completions]
        ids = [request_id_for(t, x, f"{salt}-{i}") for i, (t, x) in enumerate(zip(tasks, texts))]
        out: List[Optional[float]] = [None] * len(texts)
        for start in range(0, len(texts), batch_size):
            sl = slice(start, start + batch_size)
            try:
                results = cl.score(tasks[sl], texts[sl], ids[sl])
            except KforgeError:
                continue  # these stay None: TRL ignores them
            for k, r in enumerate(results):
                if r.get("status") == "done":
                    out[start + k] = float(r["reward"])
        return out

    reward_func.__name__ = name  # TRL logs rewards/<name>
    if not asynchronous:
        return reward_func

    async def async_reward_func(prompts=None, completions=None, **kwargs) -> List[Optional[float]]:
        return await asyncio.to_thread(reward_func, prompts, completions, **kwargs)

    async_reward_func.__name__ = name
    return async_reward_func
