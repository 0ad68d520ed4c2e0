"""The router's own record of requests: which request ids were answered, with what.

Each actor's ``kforge serve`` has its own store, and a request retried after its actor died lands on
another actor whose store has never seen it, so the actors' stores cannot tell whether an id was
answered. The router's record can: a request id is a row (task, completion and its hash, state,
the verdict once done, the actor that judged it, how many actors it was handed to). A done row is
never judged again and never changes; the same id asked again is answered from it
(``from_store: true``), the same id with another completion is a 409, as ``kforge serve`` does.
Rows still pending when the router starts (it was killed) are handed to an actor again.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple


def completion_sha(task_id: str, completion: str) -> str:
    """The same hash kforge serve keys a request's content on (task id, NUL, completion)."""
    return hashlib.sha256((task_id + "\0" + completion).encode("utf-8", "surrogatepass")).hexdigest()


class Record:
    def __init__(self, path: str):
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS requests (request_id TEXT PRIMARY KEY, task_id TEXT NOT NULL, "
                "completion TEXT NOT NULL, completion_sha TEXT NOT NULL, state TEXT NOT NULL, result TEXT, "
                "actor_id TEXT, node_id TEXT, handed INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, done REAL)")
            self._db.execute("CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, request_ids TEXT NOT NULL, "
                             "created REAL NOT NULL)")

    def get(self, request_id: str) -> Optional[Dict[str, Any]]:
        with self._lock:
            row = self._db.execute("SELECT request_id, task_id, completion, completion_sha, state, result, actor_id, "
                                   "node_id, handed FROM requests WHERE request_id = ?", (request_id,)).fetchone()
        return None if row is None else self._row(row)

    @staticmethod
    def _row(row: Sequence[Any]) -> Dict[str, Any]:
        keys = ["request_id", "task_id", "completion", "completion_sha", "state", "result", "actor_id", "node_id",
                "handed"]
        d = dict(zip(keys, row))
        d["result"] = json.loads(d["result"]) if d["result"] else None
        return d

    def admit(self, rows: Iterable[Tuple[str, str, str, str]]) -> None:
        """New pending rows (request id, task id, completion, completion sha), committed at once."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR IGNORE INTO requests (request_id, task_id, completion, completion_sha, "
                                 "state, created) VALUES (?, ?, ?, ?, 'pending', ?)",
                                 [(r, t, c, s, now) for r, t, c, s in rows])
            self._db.execute("COMMIT")

    def handed(self, request_ids: List[str], actor_id: str) -> None:
        with self._lock:
            self._db.executemany("UPDATE requests SET handed = handed + 1, actor_id = ? WHERE request_id = ? "
                                 "AND state = 'pending'", [(actor_id, r) for r in request_ids])

    def complete(self, request_id: str, result: Dict[str, Any]) -> bool:
        """Stores the verdict of a pending row; False (and nothing changes) when it was done already."""
        where = result.get("placement") or {}
        with self._lock:
            cur = self._db.execute("UPDATE requests SET state = 'done', result = ?, actor_id = ?, node_id = ?, done = ? "
                                   "WHERE request_id = ? AND state = 'pending'",
                                   (json.dumps(result), where.get("actor_id"), where.get("node_id"), time.time(),
                                    request_id))
            return cur.rowcount == 1

    def pending(self) -> List[Dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT request_id, task_id, completion, completion_sha, state, result, actor_id, "
                                    "node_id, handed FROM requests WHERE state = 'pending' ORDER BY created").fetchall()
        return [self._row(r) for r in rows]

    def create_job(self, job_id: str, request_ids: List[str]) -> None:
        with self._lock:
            self._db.execute("INSERT INTO jobs (job_id, request_ids, created) VALUES (?, ?, ?)",
                             (job_id, json.dumps(request_ids), time.time()))

    def job(self, job_id: str) -> Optional[List[str]]:
        with self._lock:
            row = self._db.execute("SELECT request_ids FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return None if row is None else json.loads(row[0])

    def counts(self) -> Dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM requests GROUP BY state").fetchall()
        out = {"pending": 0, "done": 0}
        out.update({s: n for s, n in rows})
        return out

    def close(self) -> None:
        with self._lock:
            self._db.close()
