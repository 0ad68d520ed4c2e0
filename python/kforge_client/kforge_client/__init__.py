"""Client of ``kforge serve`` (the reward server of kforge).

- :class:`Client`: ``POST /v1/score``, jobs, health; retries with the same request ids.
- :func:`trl_reward`: a reward function for TRL's ``GRPOTrainer(reward_funcs=[...])``.
- :func:`compute_score` / :func:`make_compute_score`: verl's ``custom_reward_function``.

No dependencies beyond the standard library.
"""
from .client import Client, KforgeError, request_id_for
from .trl import trl_reward
from .verl import compute_score, make_compute_score

__all__ = ["Client", "KforgeError", "request_id_for", "trl_reward", "compute_score", "make_compute_score"]
