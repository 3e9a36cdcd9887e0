"""HTTP errors a client can read, and a log that stays one line per fault.

OpenEnv's HTTP routes answer a request FastAPI refuses with pydantic's error
list, input echoed (a lone surrogate in it made the reply itself fail, a 500),
and anything a route raises with a bare 500 and a traceback in the log. Here,
installed by `server/app.py` (`http_errors.install(app)`):

- a request the route's model refuses (FastAPI's `RequestValidationError`) and
  an `HTTPException` carrying pydantic's errors (OpenEnv's `/step` for a bad
  action) answer a 422 with one short message: where, what, and what is valid
  for that route; no input is echoed;
- an `HTTPException` message is made encodable (a lone surrogate escaped);
- anything else a route raises is logged as one line (type and message, no
  traceback) and answered with a short 500, no repr. Bad input never gets here:
  the environment refuses it with a 400 (`BadRequestError`);
- a `/reset` seed of JSON `true` or a float (`2.0`) answers the same 422:
  OpenEnv's request model would read them as 1 and 2 (pydantic's lax mode),
  while `/ws` and an in-process reset refuse them (`ResetSeed`).
"""

from __future__ import annotations

import json
import logging

from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected
from uvicorn.protocols.utils import ClientDisconnected

from releaseops_arena.catalog import SEED_RANGE
from releaseops_arena.splits import SPLITS
from releaseops_arena.tools import TOOL_NAMES

log = logging.getLogger("uvicorn.error")

MAX_ERRORS = 3  # errors named in one message; the rest are counted
MAX_PART_CHARS = 40  # a key from the client's input, quoted in a location
MAX_MESSAGE_CHARS = 1000

_SPLITS = ", ".join(SPLITS)
# What each route takes, named in its 422 (a route not listed gets the generic hint).
VALID = {
    "/reset": (
        f"valid: seed ({SEED_RANGE}), episode_id (a string of at most 128 printable characters), "
        "a scenario's family, difficulty and archetype_mix (/metadata lists them), "
        "or a task's split, index, difficulty and token"
    ),
    "/step": (
        'send {"action": {"tool_name": "<tool>", "arguments": {...}}}, '
        f"tool_name one of {', '.join(TOOL_NAMES)}; /schema has the action's schema"
    ),
    "/tasks": f'send {{"split": "<split>"}}, split one of {_SPLITS}',
    "/num_tasks": f'send {{"split": "<split>"}}, split one of {_SPLITS}',
    "/task": f'send {{"split": "<split>", "index": <int>}}, split one of {_SPLITS}',
    "/task_range": f'send {{"split": "<split>", "start": <int>, "stop": <int>}}, split one of {_SPLITS}',
}
GENERIC = "/docs has each route's request schema"


def install(app) -> None:
    """Install the handlers and the last-resort middleware on the app (before its other middleware)."""
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(ResetSeed)
    app.add_middleware(UnexpectedErrors)


class ResetSeed:
    """Refuse a `/reset` seed that pydantic would coerce (a bool, a float): one seed rule on every door.
    The body is already bounded (`BodyLimit` runs outside this); it is read once and passed on unchanged."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != "/reset":
            return await self.app(scope, receive, send)
        chunks, message = [], {"more_body": True}
        while message.get("more_body"):
            message = await receive()
            if message["type"] != "http.request":  # the client left: nothing to answer
                return
            chunks.append(message.get("body", b""))
        body = b"".join(chunks)
        try:
            seed = json.loads(body).get("seed")
        except (ValueError, AttributeError):  # not a JSON object: the route's model answers it
            seed = None
        if isinstance(seed, (bool, float)):
            return await _json(422, {"detail": f"invalid request: seed: not {SEED_RANGE}; {VALID['/reset']}"})(
                scope, receive, send
            )
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def _invalid_request(request, exc: RequestValidationError):
    return _json(422, {"detail": _summary(exc.errors(), request.url.path)})


async def _http_error(request, exc: StarletteHTTPException):
    detail = exc.detail
    if isinstance(detail, (list, tuple)):  # pydantic's errors, raised as an HTTPException (OpenEnv's /step)
        detail = _summary(detail, request.url.path)
    elif not isinstance(detail, str):
        detail = str(detail)
    exc.detail = _encodable(detail)[:MAX_MESSAGE_CHARS]
    return await http_exception_handler(request, exc)


def _summary(errors, path: str) -> str:
    """One line: each error's location and pydantic's message (never the input), then what is valid."""
    parts = []
    for error in list(errors)[:MAX_ERRORS]:
        error = error if isinstance(error, dict) else {}
        loc = [p for p in error.get("loc", ()) if p != "body"]
        where = ".".join(_part(p) for p in loc) or "body"
        parts.append(f"{where}: {_encodable(str(error.get('msg', 'invalid')))[:200]}")
    more = len(errors) - MAX_ERRORS
    if more > 0:
        parts.append(f"and {more} more")
    hint = VALID.get(path) or VALID.get("/" + path.rstrip("/").rsplit("/", 1)[-1], GENERIC)
    return f"invalid request: {'; '.join(parts) or 'malformed'}; {hint}"


def _part(part: object) -> str:
    text = _encodable(str(part))
    text = text if text.isprintable() else ascii(text)[1:-1]
    return text if len(text) <= MAX_PART_CHARS else text[: MAX_PART_CHARS - 3] + "..."


def _encodable(text: str) -> str:
    """The text with any lone surrogate escaped, so that a reply holding it can be encoded."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _json(status: int, body: dict) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json")  # ASCII: always encodable


class UnexpectedErrors:
    """ASGI middleware: an exception no handler took is one log line and a short 500, not a traceback.

    Starlette's own last resort answers a 500 and then re-raises, so that the
    server logs the whole traceback: a client that can trigger it at will fills
    the log. This one sits inside it and keeps the exception.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        kind = scope["type"]
        if kind == "websocket":  # OpenEnv's WebSocket handlers catch their own; a frame pays nothing here
            try:
                return await self.app(scope, receive, send)
            except Exception as exc:
                if _gone(exc):  # the client left while a reply was on its way: nothing is wrong
                    return
                _log_one_line(scope, exc)
                try:
                    await send({"type": "websocket.close", "code": 1011})
                except Exception:  # already closed
                    pass
                return
        if kind != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracked_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked_send)
        except Exception as exc:
            _log_one_line(scope, exc)
            if started:  # nothing more can be said on this response
                return
            body = json.dumps({"detail": "internal server error; the server log has a line about it"}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 500, "headers": headers})
            await send({"type": "http.response.body", "body": body})


def _gone(exc: Exception) -> bool:
    """A send to a WebSocket the client already closed (OpenEnv's handler answering a careless client)."""
    return isinstance(exc, (WebSocketDisconnected, WebSocketDisconnect, ClientDisconnected))


def _log_one_line(scope, exc: Exception) -> None:
    message = " ".join(_encodable(str(exc)).split())
    message = message if len(message) <= 300 else message[:297] + "..."
    path = _encodable(scope.get("path", ""))[:200]
    log.error("%s %s: %s: %s", scope.get("method", "WEBSOCKET"), path, type(exc).__name__, message)
