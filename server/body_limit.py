"""HTTP body limits on every route, applied before a body is read into memory, and requests in flight per address.

uvicorn has no body limit of its own, so a 256 MB POST to `/mcp` or 16 MB of
`[{},{},...]` to the Task API was read whole and parsed. This ASGI middleware
refuses a body over its route's limit (`limits.py`) with 413 and a short JSON
message that names the limit (the body is never echoed): at once when its
`Content-Length` says so, or as soon as a streamed body passes the limit.
Bodies under the limit stream through untouched.
"""

from __future__ import annotations

import asyncio
import json

from . import limits


def limit_for(path: str) -> int:
    if path == limits.WEB_UPLOAD_PATH:
        return limits.WEB_UPLOAD_MAX_BODY_BYTES
    if path == "/web" or path.startswith("/web/"):
        return limits.WEB_MAX_BODY_BYTES
    return limits.HTTP_MAX_BODY_BYTES


def _declared_length(scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _too_large(send, limit: int) -> None:
    body = json.dumps(
        {"detail": f"request body too large: at most {limit} bytes on this route (docs/server.md, Limits)"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# Before a 413, up to this much of the refused body is read and dropped (never kept), so that a client
# still sending it reads the 413 rather than a connection reset; past it, the 413 goes at once.
DRAIN_BYTES = 8 * 1024 * 1024
DRAIN_S = 5.0


async def _drain(receive, declared: int) -> None:
    if declared > DRAIN_BYTES:
        return
    drained = 0
    try:
        async with asyncio.timeout(DRAIN_S):
            while drained < declared:
                message = await receive()
                if message["type"] != "http.request":
                    return
                drained += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return
    except TimeoutError:
        return


async def _too_many(send) -> None:
    cap = limits.HTTP_REQUESTS_PER_CLIENT
    body = json.dumps(
        {"detail": f"too many requests in flight from this address (at most {cap}); wait for a reply, then retry"}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 429, "headers": headers + [(b"retry-after", b"1")]})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: every HTTP request's body is held to `limit_for(path)`, and one address has at most
    `limits.HTTP_REQUESTS_PER_CLIENT` requests in flight outside the web board (its queue has its own limits)."""

    def __init__(self, app):
        self.app = app
        self.in_flight: dict[str, int] = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if path == "/web" or path.startswith("/web/"):
            return await self._limited(scope, receive, send)
        client = (scope.get("client") or ("?",))[0]
        if self.in_flight.get(client, 0) >= limits.HTTP_REQUESTS_PER_CLIENT:
            return await _too_many(send)
        self.in_flight[client] = self.in_flight.get(client, 0) + 1
        try:
            await self._limited(scope, receive, send)
        finally:
            self.in_flight[client] -= 1
            if not self.in_flight[client]:
                del self.in_flight[client]

    async def _limited(self, scope, receive, send):
        limit = limit_for(scope.get("path", ""))
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _drain(receive, declared)  # before answering: uvicorn reads no body once a response is complete
            return await _too_large(send, limit)
        received, refused, started = 0, False, False

        async def limited_receive():
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:  # a streamed body (no Content-Length) past the limit
                    refused = True
                    if not started:
                        await _too_large(send, limit)
                    return {"type": "http.disconnect"}
            return message

        async def tracked_send(message):
            nonlocal started
            if refused:
                return  # the 413 has been sent: the app's own answer is dropped
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except Exception:
            if not refused:
                raise
            # The app was cut off mid-body and may raise on the disconnect; the client has its 413.
