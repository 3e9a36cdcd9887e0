"""Connections that never become requests, and a log that stays readable when the process runs short.

- **Head timeout.** uvicorn waits forever for a request's head: a client can
  open sockets, send half a request line and hold a file descriptor each until
  the process has none left (then `/health` and every new session fail).
  `H11WithHeadTimeout` closes a connection that has not completed a request
  head `limits.HTTP_HEAD_TIMEOUT_S` after it opened. `releaseops-serve` runs
  uvicorn with it (`http=`); a WebSocket is past its head once upgraded.
- **Rate-limited resource errors.** When descriptors run out anyway, asyncio
  logs "socket.accept() out of system resource" with a traceback at every
  retry: 51,082 tracebacks in 7 s in one measurement (and a server stopped
  soon after logged one per pending retry, 27,008). `RepeatFilter` lets one
  such record through per `REPEAT_WINDOW_S`, with the count it held back.
- **The same wire under any launcher.** uvicorn's own defaults negotiate
  permessage-deflate and read messages of up to 16 MiB: under a bare
  `uvicorn server.app:app`, 16 compressed 16 MiB frames took the server from
  214 to 742 MB before the frame guard could refuse them. The negotiation
  happens in uvicorn's protocol layer before the app sees the handshake, so no
  middleware can take the offer out of it. `LaunchLimits` instead sets
  `limits.py`'s wire settings (no permessage-deflate, 64 KiB messages, 4
  frames read ahead, the keepalive) and `H11WithHeadTimeout` on the uvicorn
  that serves the app, at start-up (the lifespan), before it accepts a
  connection: bare `uvicorn server.app:app`, `releaseops-serve` and the image
  all serve the same wire. Started with `--lifespan off`, uvicorn never tells
  the app it starts, so its WebSockets are refused with a message saying why.
"""

from __future__ import annotations

import logging
import time

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol

from . import limits

REPEAT_WINDOW_S = 10.0
REPEATED = (
    "socket.accept() out of system resource",
    "socket.send() raised exception.",
    # After running out of descriptors, asyncio retries the accept with one timer per backlog slot; a server
    # stopped before they fire logged a traceback for each (27,008 in one measurement).
    "Exception in callback BaseSelectorEventLoop._start_serving",
)


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


class Throttle:
    """One event of each key per REPEAT_WINDOW_S: `passes(key)` is None for an event held back, else how
    many of that key it held since the last one let through."""

    def __init__(self):
        self.last: dict[str, float] = {}
        self.held: dict[str, int] = {}

    def passes(self, key: str) -> int | None:
        now = time.monotonic()
        if now - self.last.get(key, -REPEAT_WINDOW_S) < REPEAT_WINDOW_S:
            self.held[key] = self.held.get(key, 0) + 1
            return None
        self.last[key] = now
        return self.held.pop(key, 0)


def and_more(held: int) -> str:
    """The tail of a line that stands for `held` more held back."""
    return f" (and {held} more in the last {REPEAT_WINDOW_S:g} s)" if held else ""


class RepeatFilter(logging.Filter):
    """Lets one record of each message in REPEATED through per REPEAT_WINDOW_S, then says how many it held."""

    def __init__(self):
        super().__init__()
        self.throttle = Throttle()

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        key = next((m for m in REPEATED if message.startswith(m)), None)
        if key is None:
            return True
        held = self.throttle.passes(key)
        if held is None:
            return False
        record.msg = key + and_more(held)
        record.args, record.exc_info, record.exc_text = (), None, None  # one line, not a traceback each time
        return True


def quiet_repeats() -> None:
    """Install RepeatFilter on asyncio's logger (once)."""
    logger = logging.getLogger("asyncio")
    if not any(isinstance(f, RepeatFilter) for f in logger.filters):
        logger.addFilter(RepeatFilter())


# --- The same wire under any launcher ---------------------------------------------------------------------
log = logging.getLogger("uvicorn.error")


def _http1_protocols() -> tuple[type, ...]:
    """uvicorn's own HTTP/1.1 protocols (what `--http auto|h11|httptools` picks): H11WithHeadTimeout replaces them."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        return (H11Protocol,)
    return (H11Protocol, HttpToolsProtocol)


def uvicorn_config(callable_, depth: int = 0) -> Config | None:
    """The uvicorn `Config` of the server calling the app, or None under another server.

    uvicorn passes its lifespan's and its WebSocket protocol's own bound methods as `receive`, and both
    objects hold the config; a wrapper (uvicorn's trace logger) keeps the original in its closure."""
    config = getattr(getattr(callable_, "__self__", None), "config", None)
    if isinstance(config, Config):
        return config
    if depth < 3:
        for cell in getattr(callable_, "__closure__", None) or ():
            try:
                inner = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(inner) and (found := uvicorn_config(inner, depth + 1)) is not None:
                return found
    return None


def hold_to_limits(config: Config) -> list[str]:
    """Set limits.py's wire settings on a uvicorn config that has not served a connection yet; what changed.

    Sizes are upper bounds (an operator's smaller value stays); compression is always off."""
    options = limits.uvicorn_options()
    wanted = {
        "ws_per_message_deflate": limits.WS_PER_MESSAGE_DEFLATE,
        "ws_max_size": min(config.ws_max_size, limits.WS_MAX_MESSAGE_BYTES),
        "ws_max_queue": min(config.ws_max_queue, limits.WS_MAX_QUEUE),
        "ws_ping_interval": options["ws_ping_interval"],
        "ws_ping_timeout": options["ws_ping_timeout"],
    }
    changed = []
    for name, value in wanted.items():
        if getattr(config, name) != value:
            changed.append(f"{name} {getattr(config, name)!r} -> {value!r}")
            setattr(config, name, value)
    http = getattr(config, "http_protocol_class", None)
    if isinstance(http, type) and not issubclass(http, H11WithHeadTimeout):
        if issubclass(http, _http1_protocols()):
            config.http_protocol_class = H11WithHeadTimeout
            changed.append(f"http {http.__name__} -> {H11WithHeadTimeout.__name__}")
        else:  # HTTP/2 or a custom protocol: the head timeout is left to it
            log.warning(
                "HTTP protocol %s kept: the %g s request-head timeout is not applied", http, limits.HTTP_HEAD_TIMEOUT_S
            )
    return changed


LIFESPAN_OFF = (
    "WebSockets are refused: this uvicorn was started with --lifespan off, so the app could not set its "
    "WebSocket limits (no permessage-deflate, 64 KiB messages; docs/server.md, Limits) before serving. "
    "Start it without --lifespan off, or with releaseops-serve."
)


class LaunchLimits:
    """ASGI middleware (outermost): the uvicorn serving the app gets limits.py's wire settings at start-up."""

    def __init__(self, app):
        self.app = app
        self.held = False  # set on the uvicorn that serves this app, at its lifespan start-up
        self.warned = False

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan" and not self.held:
            config = uvicorn_config(receive)
            if config is not None:
                self.held = True
                changed = hold_to_limits(config)
                if changed:
                    log.info("WebSocket and HTTP limits set on this uvicorn (server/limits.py): %s", "; ".join(changed))
            else:
                log.warning(
                    "Not served by uvicorn: the WebSocket limits (no permessage-deflate, %d-byte messages) could not "
                    "be set on this server; configure them in it, or serve with releaseops-serve",
                    limits.WS_MAX_MESSAGE_BYTES,
                )
        elif scope["type"] == "websocket" and not self.held and uvicorn_config(receive) is not None:
            return await self._refuse(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _refuse(self, scope, receive, send) -> None:
        """uvicorn without its lifespan: the handshake is answered with 503 and why, before any frame is read."""
        if (await receive())["type"] != "websocket.connect":
            return
        if not self.warned:
            self.warned = True
            log.error(LIFESPAN_OFF)
        if "websocket.http.response" in (scope.get("extensions") or {}):
            body = LIFESPAN_OFF.encode()
            headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
            await send({"type": "websocket.http.response.start", "status": 503, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1011, "reason": "server started with --lifespan off"})
