"""The judge <-> executor channel: two pipes, length-prefixed frames.

Requests (judge -> executor) are pickled: the executor trusts the judge. Replies (executor ->
judge) are JSON only, at most MAX_REPLY bytes, and are never unpickled: the judge never runs
anything the candidate's process sends. Every request carries a fresh random nonce; a reply counts
only if it carries the nonce of the request being answered and its executor is still alive.
"""

import json
import os
import select
import struct
import time

MAX_REPLY = 4 << 20
MAX_REQUEST = 1 << 34


class ChannelError(Exception):
    """The other side is gone, or sent something that is not a frame."""


def write_frame(fd, data):
    header = struct.pack("<Q", len(data))
    view = memoryview(header + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd, n, deadline):
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                raise TimeoutError()
        b = os.read(fd, min(n - got, 1 << 20))
        if not b:
            raise ChannelError("the other side closed the channel")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_frame(fd, deadline=None, limit=MAX_REQUEST):
    (n,) = struct.unpack("<Q", _read_exact(fd, 8, deadline))
    if n > limit:
        raise ChannelError("a frame of %d bytes (the limit is %d)" % (n, limit))
    return _read_exact(fd, n, deadline)


def read_reply(fd, deadline):
    raw = read_frame(fd, deadline, MAX_REPLY)
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ChannelError("a reply that is not JSON (%s)" % e)
    if not isinstance(obj, dict):
        raise ChannelError("a reply that is not a JSON object")
    return obj


def pending(fd):
    """True when unread bytes wait on the channel (a reply nobody asked for)."""
    r, _, _ = select.select([fd], [], [], 0)
    return bool(r)
