"""Slots and fairness: only real play keeps a session, and no connection can starve another.

OpenEnv 0.10 frees a session's slot only when its socket closes or after its
idle timeout, and any message (junk included) resets that clock. Here:

- **Claim and idle bounds.** A WebSocket session (`/ws`, or WebSocket `/mcp`)
  that has not started an episode `SESSION_CLAIM_TIMEOUT_S` after it opened,
  or whose last real play is older than `SESSION_IDLE_TIMEOUT_S`, is sent a
  `SESSION_CLOSED` error frame and closed. Real play is a reset that started an
  episode or a call the engine counted (`played`, called by the environment);
  invalid calls count, since the engine ends an episode after a few of them.
  `state`, pings, refused frames and calls after the end never do.
- **Sessions without a socket** (`openenv/session/create` over HTTP `/mcp`)
  are held to the same bounds by `SessionReaper`, which replaces OpenEnv's own
  reaper (that one counts any message as activity).
- **Per-client cap** (`MAX_SESSIONS_PER_CLIENT`, by default half of
  `MAX_CONCURRENT_ENVS`): a client address holding that many sessions, its
  sockets and the HTTP MCP sessions it created, is refused the next, so one
  address never holds more than its share of the training slots. A socket
  attached to an HTTP MCP session (`/ws?session_id=...`) takes no new slot and
  is neither refused nor counted.
- **Retry hint.** A refusal at capacity carries `retry_after_s`, the time until
  the first session would be closed if none plays meanwhile.
- **Fairness.** A connection whose frames are already buffered would be served
  back to back without yielding the event loop (receiving a buffered frame and
  sending a reply under the write buffer's limit never suspend), so one client
  pipelining steps delayed every other session's reply by up to seconds. Each
  frame now yields once before it is handled: connections are served in turn.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import time
from collections import Counter
from urllib.parse import parse_qs

from openenv.core.env_server.http_server import HTTPEnvServer

from . import limits
from .frame_guard import GUARDED

# How long past its bound a session whose reply sits unread may keep its socket.
STUCK_SEND_S = 5.0
_PLAY: contextvars.ContextVar["Connection | None"] = contextvars.ContextVar("releaseops_connection", default=None)
log = logging.getLogger("uvicorn.error")


def deadline(opened: float, last_play: float | None) -> float:
    """When a session that opened at `opened` and last played at `last_play` is closed (monotonic)."""
    if last_play is None:
        return opened + limits.SESSION_CLAIM_TIMEOUT_S
    return last_play + limits.SESSION_IDLE_TIMEOUT_S if limits.SESSION_IDLE_TIMEOUT_S else math.inf


def why_closed(last_play: float | None) -> str:
    if last_play is None:
        return (
            f"no episode was started within {limits.SESSION_CLAIM_TIMEOUT_S:g} s of opening the session "
            "(SESSION_CLAIM_TIMEOUT_S); reconnect and reset when ready to play"
        )
    return (
        f"closed after the idle timeout: no play for {limits.SESSION_IDLE_TIMEOUT_S:g} s (SESSION_IDLE_TIMEOUT_S; "
        "only a reset or a call the engine counts keeps a session); reconnect and reset"
    )


class Connection:
    """One guarded socket: when it opened, when it last played, whether the app is waiting on it."""

    __slots__ = ("opened", "last_play", "client", "waiting", "closed", "env")

    def __init__(self, client: str):
        self.opened, self.last_play, self.client = time.monotonic(), None, client
        self.waiting = self.closed = False
        self.env = None  # the environment this socket played on, once it has

    def deadline(self) -> float:
        last = self.last_play
        # A socket attached to an HTTP MCP session may see its play arrive over HTTP `/mcp` instead.
        env_last = getattr(self.env, "last_play", None)
        if env_last is not None and (last is None or env_last > last):
            last = env_last
        return deadline(self.opened, last)


def played(env=None) -> None:
    """Called by the environment on real play: the socket serving this call keeps its slot."""
    connection = _PLAY.get()
    if connection is not None:
        connection.last_play = time.monotonic()
        connection.env = env


class Registry:
    """The guarded sockets of this worker and the reaper's view of sessions, for the retry hint."""

    def __init__(self):
        self.connections: set[Connection] = set()
        self.per_client: Counter[str] = Counter()
        self.server: HTTPEnvServer | None = None
        self.http_sessions: dict[str, str] = {}  # session id -> the address that created it over HTTP /mcp

    def held_by(self, client: str) -> int:
        """Sessions an address holds: its sockets and the HTTP MCP sessions it created that still live."""
        live = self.server._sessions if self.server is not None else {}
        for sid in [sid for sid in self.http_sessions if sid not in live]:
            del self.http_sessions[sid]
        return self.per_client[client] + sum(c == client for c in self.http_sessions.values())

    def retry_after_s(self) -> int:
        """Seconds until the first session would be closed if none plays meanwhile (one that ends frees its
        slot sooner; one that keeps playing keeps it)."""
        deadlines = [c.deadline() for c in self.connections if not c.closed]
        if self.server is not None:
            deadlines += [
                deadline(env.opened_at, env.last_play)
                for env in list(self.server._sessions.values())
                if env is not None and hasattr(env, "opened_at")
            ]
        soonest = min(deadlines, default=time.monotonic())
        return max(1, math.ceil(soonest - time.monotonic() + limits.REAP_INTERVAL_S))


REGISTRY = Registry()


def _error_frame(kind: str, code: str, message: str, **extra) -> str:
    if kind == "jsonrpc":
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": f"{code}: {message}"}})
    return json.dumps({"type": "error", "data": {"message": message, "code": code, **extra}})


class SessionGuard:
    """ASGI middleware on the WebSocket routes in GUARDED; everything else passes through."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        kind = GUARDED.get(scope.get("path", "")) if scope["type"] == "websocket" else None
        if kind is None:
            if limits.MAX_SESSIONS_PER_CLIENT and scope["type"] == "http" and scope.get("path") == "/mcp":
                return await _capped_http_mcp(self.app, scope, receive, send)
            return await self.app(scope, receive, send)
        client = (scope.get("client") or ("?", 0))[0]
        cap = limits.MAX_SESSIONS_PER_CLIENT
        # A socket attached to an existing session (OpenEnv's MCP client in production mode) takes no slot.
        counted = not (kind == "openenv" and _attaches(scope))
        if counted and cap and REGISTRY.held_by(client) >= cap:
            return await self._refuse(
                receive, send, _error_frame(kind, "CAPACITY_REACHED", _cap_message(cap), retry_after_s=1)
            )
        connection = Connection(client)
        REGISTRY.connections.add(connection)
        if counted:
            REGISTRY.per_client[client] += 1
        token = _PLAY.set(connection)  # the app runs in this task: the environment's `played` finds it

        async def guarded_receive():
            if connection.closed:
                return {"type": "websocket.disconnect", "code": 1000}
            connection.waiting = True
            try:
                message = await receive()
            finally:
                connection.waiting = False
            if connection.closed:  # closed by the watchdog while waiting
                return {"type": "websocket.disconnect", "code": 1000}
            if message["type"] == "websocket.receive":
                await asyncio.sleep(0)  # fairness: every other ready connection goes first (module docstring)
            return message

        async def guarded_send(message):
            if connection.closed:
                return  # the socket is closed: a late reply has nowhere to go
            if message["type"] == "websocket.send" and "CAPACITY_REACHED" in (message.get("text") or ""):
                message = {"type": "websocket.send", "text": _with_retry_hint(message["text"])}
            await send(message)

        watchdog = asyncio.ensure_future(_watch(connection, kind, send))
        try:
            await self.app(scope, guarded_receive, guarded_send)
        finally:
            watchdog.cancel()
            _PLAY.reset(token)
            REGISTRY.connections.discard(connection)
            if counted:
                REGISTRY.per_client[client] -= 1
                if REGISTRY.per_client[client] <= 0:
                    del REGISTRY.per_client[client]

    async def _refuse(self, receive, send, frame: str) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": frame})
        await send({"type": "websocket.close", "code": 1013, "reason": "try again later"})


def _attaches(scope) -> bool:
    """Whether a `/ws` handshake names an existing session (`?session_id=...`) rather than opening one."""
    query = scope.get("query_string") or b""
    return b"session_id" in query and bool(parse_qs(query.decode("latin-1")).get("session_id"))


def _cap_message(cap: int) -> str:
    return (
        f"this client address holds {cap} sessions, the most one address may hold (MAX_SESSIONS_PER_CLIENT: by "
        f"default half of MAX_CONCURRENT_ENVS, {limits.MAX_CONCURRENT_ENVS} here); close one, then retry"
    )


async def _capped_http_mcp(app, scope, receive, send) -> None:
    """HTTP `/mcp` under a per-client cap: `openenv/session/create` counts against the address's sessions."""
    client = (scope.get("client") or ("?", 0))[0]
    chunks, more = [], True
    while more:  # the body is small: body_limit.py, outside this middleware, caps it
        message = await receive()
        if message["type"] != "http.request":
            return
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    request = None
    if b"openenv/session/create" in body:  # every other call (tools/list, tools/call, ...): no second parse
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            request = None
    creating = isinstance(request, dict) and request.get("method") == "openenv/session/create"
    cap = limits.MAX_SESSIONS_PER_CLIENT
    if creating and REGISTRY.held_by(client) >= cap:
        reply = {
            "jsonrpc": "2.0",
            "id": request.get("id") if isinstance(request.get("id"), (int, str)) else None,
            "error": {
                "code": -32000,
                "message": f"CAPACITY_REACHED: {_cap_message(cap)}",
            },
        }
        data = json.dumps(reply).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})
        return
    sent = [False]

    async def replay():
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    reply_chunks = []

    async def capture(message):
        if creating and message["type"] == "http.response.body":
            reply_chunks.append(message.get("body", b""))
        await send(message)

    await app(scope, replay, capture)
    if creating:
        try:
            sid = json.loads(b"".join(reply_chunks))["result"]["session_id"]
        except (ValueError, KeyError, TypeError):
            return
        REGISTRY.http_sessions[sid] = client


def _with_retry_hint(text: str) -> str:
    try:
        frame = json.loads(text)
        data = frame["data"]
    except (ValueError, KeyError, TypeError):
        return text
    wait = REGISTRY.retry_after_s()
    data["retry_after_s"] = wait
    data["message"] = (
        f"{data.get('message', 'server at capacity')}; retry in {wait} s (when the first idle session would be "
        "closed; sooner if a session ends)"
    )
    return json.dumps(frame)


async def _watch(connection: Connection, kind: str, send) -> None:
    """Close the socket once its session is past its bound. It waits for the app to be waiting on the
    socket, so that no reply races the close; a reply stuck unread (a client that sends and never reads)
    is given STUCK_SEND_S more, then the socket is closed under it."""
    try:
        stuck = 0.0
        while True:
            delay = connection.deadline() - time.monotonic()
            if delay > 0:
                # At most a reap interval: a first play can bring the deadline forward (idle < claim).
                await asyncio.sleep(min(delay + 0.01, limits.REAP_INTERVAL_S))
                continue
            if not connection.waiting and stuck < STUCK_SEND_S:  # a reply is being made: look again shortly
                await asyncio.sleep(limits.REAP_INTERVAL_S)
                stuck += limits.REAP_INTERVAL_S
                continue
            connection.closed = True
            if connection.waiting:  # else the client reads nothing: the frame would wait behind the unread ones
                frame = _error_frame(kind, "SESSION_CLOSED", why_closed(connection.last_play))
                await asyncio.wait_for(send({"type": "websocket.send", "text": frame}), STUCK_SEND_S)
            # The protocol layer gives up on a peer that never acknowledges the close, and drops the connection.
            await send({"type": "websocket.close", "code": 1000, "reason": "session closed: see the error frame"})
            return
    except asyncio.CancelledError:
        raise
    except Exception:  # the client went away meanwhile: the app sees the disconnect itself
        return


class SessionReaper:
    """Frees sessions past their bound that no guarded socket serves (HTTP MCP sessions), every REAP_INTERVAL_S.

    It reads each environment's `opened_at` and `last_play`, the same clock the sockets use; a
    session served by a socket is also closed with its socket by `_watch` at the same moment.
    """

    def __init__(self, server: HTTPEnvServer):
        self.server = server
        self.task: asyncio.Task | None = None

    async def run(self) -> None:
        while True:
            await asyncio.sleep(limits.REAP_INTERVAL_S)
            now = time.monotonic()
            stale = [
                sid
                for sid, env in list(self.server._sessions.items())
                if env is not None and hasattr(env, "opened_at") and deadline(env.opened_at, env.last_play) < now
            ]
            for sid in stale:
                try:
                    await self.server._destroy_session(sid)
                except Exception as exc:  # one session's cleanup must not stop the reaper
                    log.warning("session reaper: %s: %s", type(exc).__name__, exc)

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.ensure_future(self.run())

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None


def env_server(app) -> HTTPEnvServer:
    """The `HTTPEnvServer` behind OpenEnv's routes (create_app keeps it only in its start-up hook's closure)."""
    for hook in app.router.on_startup:
        for cell in getattr(hook, "__closure__", None) or ():
            if isinstance(cell.cell_contents, HTTPEnvServer):
                return cell.cell_contents
    raise RuntimeError("OpenEnv's HTTPEnvServer was not found in the app's start-up hooks; see session_guard.py")


def install(app) -> None:
    """Guard the WebSocket routes and replace OpenEnv's idle reaper with ours (same bounds for every session)."""
    server = env_server(app)
    server._session_idle_timeout_s = None  # OpenEnv's reaper: any message counted as activity
    REGISTRY.server = server
    reaper = SessionReaper(server)
    app.router.on_startup.append(reaper.start)
    app.router.on_shutdown.append(reaper.stop)
    app.add_middleware(SessionGuard)
