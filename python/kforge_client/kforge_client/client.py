"""HTTP client of kforge serve, standard library only.

Every item carries a request id; a retry sends the same ids, so the server answers an item it has
already judged from its store instead of judging (and charging) it twice. The client's time-out is
longer than the server's (``--request-timeout``, default 3600 s), so a slow batch ends with the
server's 504 and a retry, not with the client giving up while the server keeps working.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Iterable, List, Optional, Sequence


class KforgeError(RuntimeError):
    """A request the server refused (4xx other than 429) or that failed after every retry."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


def request_id_for(task_id: str, completion: str, salt: str = "") -> str:
    """A deterministic request id: the same task, completion and salt give the same id."""
    h = hashlib.sha256()
    for part in (salt, task_id, completion):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return "py-" + h.hexdigest()[:32]


class Client:
    """``Client(url, token)``; ``url`` like ``http://127.0.0.1:8000``.

    ``token`` defaults to ``$KFORGE_SERVE_TOKEN``. ``timeout_s`` is per HTTP call and should exceed
    the server's ``--request-timeout``; ``retries`` counts further attempts after a connection
    error, a 429 (waiting ``Retry-After``), a 5xx or a 504.
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout_s: float = 3900.0, retries: int = 8,
                 backoff_s: float = 1.0):
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("KFORGE_SERVE_TOKEN", "")
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s

    # -- transport -------------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        last = "no attempt"
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            wait = self.backoff_s * (2 ** min(attempt, 6))
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return json.loads(resp.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                text = e.read().decode("utf-8", "replace")
                try:
                    why = json.loads(text).get("error", text)
                except ValueError:
                    why = text
                last = f"HTTP {e.code}: {why}"
                if e.code == 429:
                    try:
                        wait = max(wait, float(e.headers.get("Retry-After", "1")))
                    except ValueError:
                        pass
                elif e.code < 500:
                    raise KforgeError(last, e.code) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                last = f"{type(e).__name__}: {e}"
            if attempt < self.retries:
                time.sleep(wait)
        raise KforgeError(f"{method} {path} failed after {self.retries + 1} attempts: {last}")

    # -- endpoints -------------------------------------------------------------------------------
    def health(self) -> Dict[str, Any]:
        return self._call("GET", "/v1/health")

    def tasks(self) -> List[Dict[str, Any]]:
        return self._call("GET", "/v1/tasks")["tasks"]

    @staticmethod
    def _items(task_ids: Sequence[str], completions: Sequence[str],
               request_ids: Optional[Sequence[str]]) -> List[Dict[str, str]]:
        if len(task_ids) != len(completions):
            raise ValueError(f"{len(task_ids)} task ids for {len(completions)} completions")
        if request_ids is None:
            request_ids = [request_id_for(t, c) for t, c in zip(task_ids, completions)]
        if len(request_ids) != len(completions):
            raise ValueError(f"{len(request_ids)} request ids for {len(completions)} completions")
        return [{"task_id": t, "completion": c, "request_id": r}
                for t, c, r in zip(task_ids, completions, request_ids)]

    def score(self, task_ids: Sequence[str], completions: Sequence[str],
              request_ids: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
        """One result per completion (reward, correct, speedup per mode with p10/p90, reasons,
        flags, timings, code_sha256). Request ids default to :func:`request_id_for` of each item."""
        return self._call("POST", "/v1/score", {"items": self._items(task_ids, completions, request_ids)})["results"]

    def submit_job(self, task_ids: Sequence[str], completions: Sequence[str],
                   request_ids: Optional[Sequence[str]] = None) -> str:
        return self._call("POST", "/v1/jobs", {"items": self._items(task_ids, completions, request_ids)})["job_id"]

    def job(self, job_id: str) -> Dict[str, Any]:
        return self._call("GET", "/v1/jobs/" + job_id)

    def wait_job(self, job_id: str, poll_s: float = 1.0, timeout_s: float = 3600.0) -> List[Dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while True:
            j = self.job(job_id)
            if j["state"] == "done":
                return j["results"]
            if time.monotonic() > deadline:
                raise KforgeError(f"job {job_id} not done after {timeout_s:.0f} s ({j['done']}/{j['items']})")
            time.sleep(poll_s)

    def get_reward(self, queries: Sequence[str], prompts: Sequence[str], labels: Iterable[Any]) -> Dict[str, Any]:
        """OpenRLHF's remote reward-model call (what ``--remote_rm_url .../get_reward`` sends)."""
        return self._call("POST", "/get_reward", {"query": list(queries), "prompts": list(prompts),
                                                  "labels": list(labels)})
