"""kforge's evaluation service on a Ray cluster.

One Ray actor per GPU (``num_gpus=1``), or per unit of a custom resource for ``--device cpu`` tasks,
each owning one long-lived ``kforge serve`` process for its device with its own SQLite store; a router
that spreads requests by queue depth, hands a request whose actor died to another actor with the
same id and keeps its own record of answered ids (so nothing is scored twice); an HTTP ingress with
the endpoints of ``kforge serve`` (``/v1/score``, ``/v1/jobs``, ``/get_reward``, ...), so
``kforge_client``, TRL, verl and OpenRLHF do not change.

    kforge-ray serve --address auto --token-file token --store router.db -- --tasks tasks/kforge

or from Python, with Ray already initialised: ``svc = kforge_ray.start(["--tasks", "tasks/kforge"], ...)``.
"""
from .service import Service, start
from .router import PoolOptions, Router, ScoreError

__all__ = ["Service", "start", "PoolOptions", "Router", "ScoreError"]
