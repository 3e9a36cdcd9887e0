"""Every remote session this process opened, so that all of them can be closed.

TRL never closes its environments, so sessions are tracked here (weakly: a
collected session closes its own socket in the background) and `close_all()`
frees their server slots, also at interpreter exit. A forked child leaves its
parent's sockets alone.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
import weakref
from typing import Any, Callable

from .errors import CLIENT_CLOSED
from .loop import LOOP

CLOSE_TIMEOUT_S = 30.0

_LOCK = threading.Lock()
_SESSIONS: "weakref.WeakSet[Any]" = weakref.WeakSet()
_PENDING_CLOSES: set[concurrent.futures.Future] = set()


def track(session: Any) -> None:
    """Remember an open session (anything with `pid`, `group`, `alive` and `async close(code, reason)`)."""
    with _LOCK:
        _SESSIONS.add(session)


def close_in_background(close: Callable[..., Any], *args: Any, pid: int) -> None:
    """Run `close(*args)` on the shared loop without waiting (a finalizer); `close_all` waits for it."""
    if pid != os.getpid() or LOOP.running() is None:
        return
    try:
        future = LOOP.submit(close(*args))
    except RuntimeError:  # loop already stopped (interpreter shutdown)
        return
    with _LOCK:
        _PENDING_CLOSES.add(future)
    future.add_done_callback(_PENDING_CLOSES.discard)


def close_sessions(group: object = None, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
    """Close the open sessions of this process (of one factory when `group` is given); returns how many."""
    with _LOCK:
        sessions = [
            s for s in list(_SESSIONS) if s.pid == os.getpid() and s.alive and (group is None or s.group is group)
        ]
        pending = list(_PENDING_CLOSES)
    if sessions and LOOP.running() is not None:

        async def close_many() -> None:
            reason = "closed by close_all()" if group is None else "closed by its factory's close()"
            await asyncio.gather(*(s.close(CLIENT_CLOSED, reason) for s in sessions), return_exceptions=True)

        with contextlib.suppress(concurrent.futures.TimeoutError):
            LOOP.run(close_many(), timeout=timeout_s)
    if pending:
        concurrent.futures.wait(pending, timeout=timeout_s)
    return len(sessions)


def close_all(timeout_s: float = CLOSE_TIMEOUT_S) -> int:
    """Close every remote session this process opened; returns how many were open.

    Instances stay usable: a tool call on a closed session raises
    `SessionLostError` (code `CLIENT_CLOSED`), and the next `reset()` opens a
    new session. Also runs at interpreter exit.
    """
    return close_sessions(None, timeout_s)


@atexit.register
def _close_all_at_exit() -> None:
    with contextlib.suppress(Exception):
        close_all(timeout_s=5.0)
