"""Answer any WebSocket frame the OpenEnv handlers would die on, at our app's boundary.

OpenEnv 0.10's `/ws` and `/mcp` handlers call `.get` on whatever JSON a frame
holds and `receive_text()` on binary frames: a frame like `[1,2,3]`, `"x"`,
`42`, a binary frame or deeply nested JSON ends the session with
`SESSION_ERROR`. This ASGI middleware sits in front of them and answers such a
frame itself, with the error frame the handler would send for bad JSON, and
the session plays on. Valid frames pass through untouched; nothing in the
installed package is patched.
"""

from __future__ import annotations

import json

from .limits import WS_MAX_MESSAGE_BYTES
from .mcp_brief import answer, is_ours, refuse_mcp_call

# A step is under 300 bytes. uvicorn closes a larger frame with 1009 before reading it when launched
# with limits.py's options (releaseops-serve, the image); this check holds under any launch.
MAX_FRAME_CHARS = WS_MAX_MESSAGE_BYTES
# A handler's validation error echoes the input, and pydantic refuses to serialize it past a
# depth of about 250, which ends the session: deeper frames are answered here (a step is depth 3).
MAX_DEPTH = 64
# A frame this short that opens with "{" and has at most MAX_DEPTH brackets cannot be anything
# the handler dies on: it parses to an object or fails as bad JSON, which the handler answers.
# It cannot nest past MAX_DEPTH, nor hold an int past Python's 4,300-digit conversion limit
# (a ValueError). So it passes without being parsed twice.
QUICK_CHARS = 4096
GUARDED = {"/ws": "openenv", "/mcp": "jsonrpc"}


def _problem(message: dict) -> str | None:
    """Why a frame cannot reach the handler, or None if it can."""
    text = message.get("text")
    if text is None:
        return "binary frames are not supported; send a JSON object as a text frame"
    if len(text) > MAX_FRAME_CHARS:
        return f"frame too large ({len(text)} chars; at most {MAX_FRAME_CHARS})"
    # A `\ud800` escape parses to half a surrogate pair, which no reply can encode: the handler's
    # error frame echoing it failed to send and ended the session. Such frames are parsed here.
    escaped = "\\u" in text and ("\\ud" in text or "\\uD" in text)
    if (
        not escaped
        and len(text) <= QUICK_CHARS
        and text.lstrip(" \t\n\r")[:1] == "{"
        and text.count("{") + text.count("[") <= MAX_DEPTH
    ):
        return None  # every step and reset a client sends: parsed once, by the handler
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None  # the handler answers INVALID_JSON itself
    except (RecursionError, ValueError) as exc:  # nesting deeper than the parser allows
        return f"invalid JSON ({type(exc).__name__})"
    if not isinstance(value, dict):
        return f"a message must be a JSON object, got {type(value).__name__}"
    if _depth(value) > MAX_DEPTH:
        return f"a message may nest at most {MAX_DEPTH} levels deep"
    if escaped and _lone_surrogate(value):
        return "a string holds an unpaired surrogate escape (such as \\ud800); send valid Unicode"
    return None


def _lone_surrogate(value) -> bool:
    """Whether a parsed value holds a string with half a surrogate pair (json.loads joins whole pairs)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _depth(value) -> int:
    """How deep objects and arrays nest (iterative: the value may be as deep as the parser allows)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _brief_request(message: dict) -> bool:
    """An MCP request for the brief (mcp_brief.METHODS), answered here: OpenEnv's handler has no such methods."""
    text = message["text"]
    if "initialize" not in text and "prompts/" not in text:  # every other frame: no second parse
        return False
    try:
        return is_ours(json.loads(text))
    except (ValueError, RecursionError):
        return False


def _mcp_refusal(kind: str, message: dict) -> str | None:
    """The reply to a `tools/call` OpenEnv would answer with an internal error (arguments that are not an
    object, a name that is not a string), as `mcp_brief.refuse_mcp_call` words it; None for any other frame."""
    text = message["text"]
    # Every step and reset: no second parse. An MCP request on /ws says "mcp"; on /mcp every frame is one.
    if kind == "openenv" and '"mcp"' not in text:
        return None
    try:
        request = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(request, dict):
        return None
    if kind == "jsonrpc":
        refusal = refuse_mcp_call(request)
        return None if refusal is None else json.dumps(refusal)
    data = request.get("data")
    if request.get("type") != "mcp" or not isinstance(data, dict):
        return None
    refusal = refuse_mcp_call(data)
    return None if refusal is None else json.dumps({"type": "mcp", "data": refusal})


MAX_ERROR_CHARS = 2048  # OpenEnv's validation errors quote the input: a long one is cut in the reply


def _short_error(text: str) -> str:
    """An error frame whose quoted input (pydantic's `input`, a long message) is cut to a few hundred chars."""
    try:
        frame = json.loads(text)
        data = frame["data"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return text
    for error in data.get("errors") or []:
        if isinstance(error, dict) and "input" in error:
            shown = len(json.dumps(error["input"]))
            if shown > 200:
                error["input"] = f"<{shown} chars, not shown>"
    message = data.get("message")
    if isinstance(message, str) and len(message) > 500:
        data["message"] = message[:500] + f"... ({len(message)} chars)"
    return json.dumps(frame)


def _error_frame(kind: str, reason: str) -> str:
    if kind == "jsonrpc":
        return json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": f"Invalid request: {reason}"}}
        )
    hint = 'send {"type": "reset" | "step" | "state" | "close" | "mcp", "data": {...}}'
    return json.dumps({"type": "error", "data": {"message": f"{reason}; {hint}", "code": "INVALID_JSON"}})


class FrameGuard:
    """ASGI middleware: guards the WebSocket routes in GUARDED, passes everything else through."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        kind = GUARDED.get(scope.get("path", "")) if scope["type"] == "websocket" else None
        if kind is None:
            return await self.app(scope, receive, send)

        async def guarded_receive():
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    return message
                reason = _problem(message)
                if reason is None:
                    if kind == "jsonrpc" and _brief_request(message):
                        reply = answer(json.loads(message["text"]))
                        if reply is not None:  # a notification gets no reply
                            await send({"type": "websocket.send", "text": json.dumps(reply)})
                        continue
                    refusal = _mcp_refusal(kind, message)
                    if refusal is not None:
                        await send({"type": "websocket.send", "text": refusal})
                        continue
                    return message
                await send({"type": "websocket.send", "text": _error_frame(kind, reason)})

        async def guarded_send(message):
            text = message.get("text") if message["type"] == "websocket.send" else None
            if text is not None and len(text) > MAX_ERROR_CHARS and text.startswith('{"type":"error"'):
                message = {"type": "websocket.send", "text": _short_error(text)}
            await send(message)

        return await self.app(scope, guarded_receive, guarded_send)
