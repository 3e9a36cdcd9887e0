"""Connections that never become requests, and a log that stays readable when the process runs short.

- **Head timeout.** uvicorn waits forever for a request's head: a client can
  open sockets, send half a request line and hold a file descriptor each until
  the process has none left (then `/health` and every new session fail).
  `H11WithHeadTimeout` closes a connection that has not completed a request
  head `limits.HTTP_HEAD_TIMEOUT_S` after it opened. `releaseops-serve` runs
  uvicorn with it (`http=`); a WebSocket is past its head once upgraded.
- **Rate-limited resource errors.** When descriptors run out anyway, asyncio
  logs "socket.accept() out of system resource" with a traceback at every
  retry: 51,082 tracebacks in 7 s in one measurement. `RepeatFilter` lets one
  such record through per `REPEAT_WINDOW_S`, with the count it held back.
"""

from __future__ import annotations

import logging
import time

from uvicorn.protocols.http.h11_impl import H11Protocol

from . import limits

REPEAT_WINDOW_S = 10.0
REPEATED = ("socket.accept() out of system resource", "socket.send() raised exception.")


class H11WithHeadTimeout(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose first request head does not arrive in time."""

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(limits.HTTP_HEAD_TIMEOUT_S, self._head_timeout)

    def _head_timeout(self) -> None:
        transport = self.transport
        # A request under way, or a socket upgraded to a WebSocket (another protocol now), is not ours to close.
        if self.cycle is None and not transport.is_closing() and transport.get_protocol() is self:
            transport.close()

    def connection_lost(self, exc) -> None:
        self._head_timer.cancel()
        super().connection_lost(exc)


class RepeatFilter(logging.Filter):
    """Lets one record of each message in REPEATED through per REPEAT_WINDOW_S, then says how many it held."""

    def __init__(self):
        super().__init__()
        self.last: dict[str, float] = {}
        self.held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        key = next((m for m in REPEATED if message.startswith(m)), None)
        if key is None:
            return True
        now = time.monotonic()
        if now - self.last.get(key, -REPEAT_WINDOW_S) < REPEAT_WINDOW_S:
            self.held[key] = self.held.get(key, 0) + 1
            return False
        self.last[key] = now
        held = self.held.pop(key, 0)
        record.msg = f"{key} (and {held} more in the last {REPEAT_WINDOW_S:g} s)" if held else key
        record.args, record.exc_info, record.exc_text = (), None, None  # one line, not a traceback each time
        return True


def quiet_repeats() -> None:
    """Install RepeatFilter on asyncio's logger (once)."""
    logger = logging.getLogger("asyncio")
    if not any(isinstance(f, RepeatFilter) for f in logger.filters):
        logger.addFilter(RepeatFilter())
