"""Remote sessions: one WebSocket per session, and the reconnecting session of one remote env.

`RemoteSession` speaks OpenEnv's `/ws` protocol with OpenEnv's own message
models (`WSResetMessage`, `WSStepMessage`, `WSCloseMessage`) over one socket it
owns. It never reconnects behind a caller's back (OpenEnv's `EnvClient` opens
a fresh socket on the next call, which would silently put a running episode on
a new, empty server session): once lost, it stays lost and says why by code
(`errors.SESSION_CLOSED`, `CONNECTION_LOST`, `CLIENT_CLOSED`).

`ReconnectingSession` is what a remote env holds: it opens a session on the
first reset, steps on it, and on a later reset replaces a lost one, retrying a
server that went away (e.g. a restarting Space) with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
import weakref
from typing import Any, Mapping, Optional

from openenv.core.client_types import StepResult
from openenv.core.env_server.types import WSCloseMessage, WSErrorCode, WSResetMessage, WSStateMessage, WSStepMessage
from openenv.core.utils import convert_to_ws_url
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.protocol import State

from . import registry
from .errors import CONNECTION_LOST, SESSION_CLOSED, CapacityError, ServerError, SessionLostError, frame_code
from .loop import LOOP
from .models import ReleaseOpsAction, ReleaseOpsObservation
from .releaseops_client import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_MESSAGE_SIZE_MB,
    DEFAULT_MESSAGE_TIMEOUT_S,
    DEFAULT_PING_INTERVAL_S,
    DEFAULT_PING_TIMEOUT_S,
    action_payload,
    parse_step_result,
)
from .urls import is_loopback

DEFAULT_RECONNECT_TIMEOUT_S = 120.0


@dataclasses.dataclass(frozen=True)
class SessionOptions:
    """How a session connects: the same names and defaults as `ReleaseOpsEnv`'s."""

    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    message_timeout_s: float = DEFAULT_MESSAGE_TIMEOUT_S
    max_message_size_mb: float = DEFAULT_MAX_MESSAGE_SIZE_MB
    websocket_ping_interval_s: Optional[float] = DEFAULT_PING_INTERVAL_S
    websocket_ping_timeout_s: Optional[float] = DEFAULT_PING_TIMEOUT_S
    headers: Optional[Mapping[str, str]] = None  # e.g. {"Authorization": f"Bearer {token}"} for a private Space

    @classmethod
    def from_kwargs(cls, **options: Any) -> "SessionOptions":
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise TypeError(f"unknown client option {unknown[0]!r}; valid: {', '.join(names)}")
        return cls(**options)


async def _close_socket(ws: ClientConnection) -> None:
    # The close message lets the server free the slot before the close handshake ends.
    with contextlib.suppress(Exception):
        await ws.send(WSCloseMessage().model_dump_json())
    with contextlib.suppress(Exception):
        await ws.close()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class RemoteSession:
    """One WebSocket session on a server; `connect()` opens it, its coroutines run on `LOOP`."""

    def __init__(self, ws: ClientConnection, base_url: str, options: SessionOptions):
        self.base_url, self.options, self.pid = base_url, options, os.getpid()
        self.group: object = None  # the factory whose close() closes this session
        self._ws = ws
        self._loss: Optional[tuple[str, str]] = None  # (code, reason) once lost
        self._closing: Optional[asyncio.Future] = None
        # A collected session frees its server slot in the background.
        self._finalizer = weakref.finalize(self, registry.close_in_background, _close_socket, ws, pid=self.pid)
        registry.track(self)

    @classmethod
    async def connect(cls, base_url: str, options: SessionOptions) -> "RemoteSession":
        ws_url = f"{convert_to_ws_url(base_url)}/ws"
        no_proxy = {"proxy": None} if is_loopback(ws_url) else {}
        try:
            ws = await connect(
                ws_url,
                open_timeout=options.connect_timeout_s,
                max_size=int(options.max_message_size_mb * 1024 * 1024),
                ping_interval=options.websocket_ping_interval_s,
                ping_timeout=options.websocket_ping_timeout_s,
                additional_headers=dict(options.headers or {}),
                **no_proxy,
            )
        except (OSError, WebSocketException) as exc:
            raise ConnectionError(f"could not connect to {ws_url}: {_describe(exc)}") from exc
        return cls(ws, base_url, options)

    @property
    def alive(self) -> bool:
        """Not known to be lost, and its socket is open."""
        return self._loss is None and self._ws.state is State.OPEN

    def lost_error(self) -> Optional[SessionLostError]:
        """A new `SessionLostError` saying why this session is lost, or None while it is fine."""
        if self._loss is None:
            return None
        code, reason = self._loss
        return SessionLostError(
            f"the session with {self.base_url} was lost ({reason}); this episode cannot "
            "continue. The next reset() opens a new session.",
            code,
            reason,
        )

    async def reset(self, config: dict) -> StepResult[ReleaseOpsObservation]:
        return parse_step_result(await self._request(WSResetMessage(data=config)))

    async def step(self, action: ReleaseOpsAction) -> StepResult[ReleaseOpsObservation]:
        return parse_step_result(await self._request(WSStepMessage(data=action_payload(action))))

    async def state(self) -> dict:
        return await self._request(WSStateMessage())

    async def close(self, code: str = CONNECTION_LOST, reason: str = "closed") -> None:
        """Close the socket (once; later calls wait for the same close). The session is then lost."""
        self._lose(code, reason)
        await asyncio.shield(self._closing)

    def _lose(self, code: str, reason: str) -> SessionLostError:
        """Mark the session lost (the first reason stays) and start closing its socket."""
        self._loss = self._loss or (code, reason)
        if self._closing is None:
            self._finalizer.detach()
            self._closing = asyncio.ensure_future(_close_socket(self._ws))
        return self.lost_error()

    async def _request(self, message) -> dict:
        if self._loss is not None:
            raise self.lost_error()
        text, timeout = message.model_dump_json(), self.options.message_timeout_s
        try:
            with contextlib.suppress(ConnectionClosed):
                # A refused session (at capacity) sends its error frame, then closes: even on a
                # closed socket, recv() below returns that frame before it raises ConnectionClosed.
                await self._ws.send(text)
            raw = await asyncio.wait_for(self._ws.recv(), timeout)
            frame = json.loads(raw)
        except asyncio.TimeoutError:
            # A late reply would pair with the next request: the socket is given up.
            raise self._lose(CONNECTION_LOST, f"no reply within {timeout:g} s") from None
        except (ConnectionClosed, OSError) as exc:
            raise self._lose(CONNECTION_LOST, _describe(exc)) from exc
        except ValueError as exc:
            raise self._lose(CONNECTION_LOST, f"unreadable reply ({_describe(exc)})") from exc
        except asyncio.CancelledError:
            self._lose(CONNECTION_LOST, "the call was interrupted")
            raise
        if not isinstance(frame, dict) or frame.get("type") == "error":
            data = frame.get("data") if isinstance(frame, dict) else None
            code, reason = frame_code(data if isinstance(data, dict) else {})
            if code == SESSION_CLOSED:
                raise self._lose(code, reason)
            raise ServerError(code, reason, data if isinstance(data, dict) else None)
        return frame.get("data") or {}


# Refusals in a row before a reset reports CapacityError. The kernel's choice of worker
# is biased (a full worker refuses at once and is idle again first), so one retry is
# not a coin flip: a CI run saw 8 refusals in a row with the other worker free.
CAPACITY_RETRIES = 40


class ReconnectingSession:
    """The session of one remote env: opened on the first reset, replaced on a later reset once lost.

    `reconnect_timeout_s` is how long a reset keeps retrying (with backoff) a
    server it was connected to before; a first connection fails at once.
    """

    def __init__(
        self, base_url: str, options: SessionOptions, reconnect_timeout_s: float = DEFAULT_RECONNECT_TIMEOUT_S
    ):
        self.base_url, self.options = base_url, options
        self.reconnect_timeout_s = float(reconnect_timeout_s)
        self.group: object = None
        self.session: Optional[RemoteSession] = None
        self._connected_once = False

    def reset(self, config: dict) -> StepResult[ReleaseOpsObservation]:
        """Reset on the current session, or on a new one if it is lost.

        Raises ValueError for an invalid scenario (the server's message, as
        in-process), CapacityError when the server is full, ConnectionError
        when no session can be opened.
        """
        window = self.reconnect_timeout_s if self._connected_once else 0.0
        deadline = time.monotonic() + window
        delay, attempt, full = 0.5, 0, 0
        while True:
            attempt += 1
            try:
                session = self._current() or self._connect()
                result = LOOP.run(session.reset(config))
            except (SessionLostError, ConnectionError) as exc:
                error: BaseException = exc
            except ServerError as exc:
                if exc.code == WSErrorCode.CAPACITY_REACHED.value:
                    self.drop()
                    # With several worker processes on one port the kernel, not the server,
                    # picks the worker of a new connection: one worker can be full while
                    # another has room, so a refusal is retried on a fresh connection.
                    full += 1
                    if full < CAPACITY_RETRIES:
                        time.sleep(min(0.02 * full, 0.2))
                        continue
                    raise CapacityError(
                        f"{self.base_url} is at capacity ({exc.message}); raise "
                        "MAX_CONCURRENT_ENVS or add replicas (see check_capacity)"
                    ) from None
                if exc.code == WSErrorCode.EXECUTION_ERROR.value:
                    raise ValueError(exc.message) from None  # the running episode, if any, goes on
                raise
            else:
                self._connected_once = True
                return result
            self.drop()
            remaining = deadline - time.monotonic()
            # A second attempt is always made: the first may have found a socket that died unnoticed.
            if attempt >= 2 and remaining <= 0:
                raise ConnectionError(f"could not open a session on {self.base_url}: {error}") from error
            if attempt >= 2:
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, 10.0)

    def step(self, action: ReleaseOpsAction) -> StepResult[ReleaseOpsObservation]:
        """Step on the current session; raises SessionLostError if it is gone (never reconnects)."""
        return LOOP.run(self._live().step(action))

    def _live(self) -> RemoteSession:
        session = self.session
        if session is None or session.pid != os.getpid():
            raise SessionLostError(
                f"the session with {self.base_url} was lost (no open session in this "
                "process); the next reset() opens a new session.",
                CONNECTION_LOST,
            )
        return session

    def state(self) -> dict:
        """The server's `state` of the current session (as JSON data); raises SessionLostError if it is gone."""
        return LOOP.run(self._live().state())

    def drop(self) -> None:
        """Close and forget the current session; a forked child only forgets its parent's."""
        # Waits for the close: until the server sees it, the old session holds a capacity slot.
        session, self.session = self.session, None
        if session is not None and session.pid == os.getpid():
            with contextlib.suppress(Exception):
                LOOP.run(session.close(), timeout=registry.CLOSE_TIMEOUT_S)

    def _current(self) -> Optional[RemoteSession]:
        if self.session is not None and (self.session.pid != os.getpid() or not self.session.alive):
            self.drop()
        return self.session

    def _connect(self) -> RemoteSession:
        session = LOOP.run(RemoteSession.connect(self.base_url, self.options))
        session.group = self.group
        self.session = session
        return session
