"""The task brief over MCP: `initialize` (its `instructions`), `prompts/list` and `prompts/get`.

OpenEnv 0.10's MCP handler answers `tools/list` and `tools/call` only, and
"Method not found" to the rest, so an MCP client had no way to read how the
game is played. These three standard methods (and the `notifications/initialized`
a client sends after `initialize`) are answered here, at the app's boundary,
for HTTP `POST /mcp` (this middleware) and WebSocket `/mcp` (`frame_guard.py`
calls `answer`). Everything else passes through to OpenEnv untouched, but for the
requests OpenEnv would answer with an internal error or could not encode at all
(`refuse_mcp_call`): a `tools/call` whose arguments are not an object, or whose
tool name is not a string, and a lone surrogate (`"\\ud800"`) anywhere.
"""

from __future__ import annotations

import json

from releaseops_arena.brief import BRIEF, PROMPT_VERSION
from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.tools import TOOL_NAMES, tool_schemas

PROMPT_NAME = "releaseops_brief"
PROTOCOL_VERSION = "2025-06-18"  # the MCP revision whose shapes these replies follow
NOTIFICATIONS = frozenset({"notifications/initialized"})
METHODS = frozenset({"initialize", "prompts/list", "prompts/get"}) | NOTIFICATIONS
MAX_BODY_BYTES = 64 * 1024  # a request for these methods is tiny; a larger body is left to OpenEnv's route
_DESCRIPTION = (
    f"How release supervision is played and scored (benchmark {BENCHMARK_VERSION}, "
    f"prompt {PROMPT_VERSION}): use it as the system message."
)


def _reply(request_id, result: dict | None = None, error: tuple[int, str] | None = None) -> dict:
    if error is not None:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": error[0], "message": error[1]}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def answer(request: object) -> dict | None:
    """The reply to one of METHODS (None for a notification), or None when the request is not ours."""
    if not isinstance(request, dict) or request.get("method") not in METHODS:
        return None
    method, request_id = request["method"], request.get("id")
    params = request.get("params") if isinstance(request.get("params"), dict) else {}
    if method in NOTIFICATIONS or "id" not in request:  # JSON-RPC: a request without an id gets no reply
        return None
    if method == "initialize":
        version = params.get("protocolVersion")
        return _reply(
            request_id,
            {
                "protocolVersion": version if isinstance(version, str) and len(version) <= 32 else PROTOCOL_VERSION,
                "capabilities": {"tools": {}, "prompts": {}},
                "serverInfo": {"name": "releaseops_arena", "version": BENCHMARK_VERSION},
                "instructions": BRIEF,
            },
        )
    if method == "prompts/list":
        return _reply(request_id, {"prompts": [{"name": PROMPT_NAME, "description": _DESCRIPTION, "arguments": []}]})
    name = params.get("name")
    if name != PROMPT_NAME:
        shown = name if isinstance(name, str) and len(name) <= 40 else type(name).__name__
        return _reply(request_id, error=(-32602, f"unknown prompt {shown!r}; valid: {PROMPT_NAME}"))
    return _reply(
        request_id,
        {"description": _DESCRIPTION, "messages": [{"role": "user", "content": {"type": "text", "text": BRIEF}}]},
    )


def is_ours(request: object) -> bool:
    return isinstance(request, dict) and request.get("method") in METHODS


def refuse_mcp_call(request: dict) -> dict | None:
    """The JSON-RPC error reply for a request OpenEnv's MCP handler would mishandle, else None.

    - a lone surrogate in any string: a reply that echoed it (the id, "Method not found: ...")
      cannot be encoded as UTF-8, and HTTP `/mcp` answered a 500;
    - a `tools/call` whose `params.arguments` is present and not an object: OpenEnv's
      `fn(**arguments)` fails with an internal error naming the function;
    - a `tools/call` whose `params.name` is not a string (an object is unhashable there);
    - a method, tool name or session id longer than any real one (OpenEnv's reply would quote it).

    For the WebSocket `/mcp` frame the reply is the frame; inside a `/ws` message
    (`{"type": "mcp", "data": request}`) it is sent as `{"type": "mcp", "data": reply}`.
    """
    if not isinstance(request, dict):
        return None
    if _has_lone_surrogate(request):
        return _reply(
            _safe_id(request.get("id")),
            error=(-32600, f"Invalid request: every string must be valid Unicode; {_SURROGATE}"),
        )
    params = request.get("params")
    method = request.get("method")
    # OpenEnv's replies quote the method, a tool name or a session id back ("Method not found: ..."):
    # longer than any real one, they are refused here, so that no reply echoes a client's input at length.
    if isinstance(method, str) and len(method) > MAX_NAME_CHARS:
        return _reply(_safe_id(request.get("id")), error=(-32601, f"Method not found (over {MAX_NAME_CHARS} chars)"))
    for key in ("name", "session_id"):
        value = params.get(key) if isinstance(params, dict) else None
        if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
            return _reply(_safe_id(request.get("id")), error=(-32602, f"params.{key} is over {MAX_NAME_CHARS} chars"))
    if method != "tools/call" or not isinstance(params, dict):
        return None
    request_id = _safe_id(request.get("id"))
    name = params.get("name")
    if name is not None and not isinstance(name, str):
        return _reply(request_id, error=(-32602, f"params.name must be a tool name; valid: {', '.join(TOOL_NAMES)}"))
    arguments = params.get("arguments", {})
    if not isinstance(arguments, dict):
        named = _ARGUMENTS.get(name)
        what = f"{name}'s arguments by name ({', '.join(named)})" if named else "the tool's arguments by name"
        return _reply(
            request_id,
            error=(
                -32602,
                f"params.arguments must be an object of {what}, not {_JSON_TYPES.get(type(arguments), 'that')}; "
                "tools/list gives each tool's inputSchema",
            ),
        )
    return None


MAX_NAME_CHARS = 64  # a method, tool name or session id (a UUID is 36)
_SURROGATE = "one holds a lone surrogate (\\ud800-\\udfff)"
_ARGUMENTS = {s["function"]["name"]: tuple(s["function"]["parameters"]["properties"]) for s in tool_schemas()}
_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
_JSON_TYPES[type(None)] = "null"


def _safe_id(request_id: object) -> object:
    """The request's id as a reply may echo it: a string (valid Unicode) or an integer, else null."""
    if type(request_id) is str:
        return None if _has_lone_surrogate(request_id) else request_id
    return request_id if type(request_id) is int else None


def _has_lone_surrogate(value: object) -> bool:
    """Whether any string in a parsed JSON value (keys included) holds a lone surrogate; iterative,
    since the value may nest as deep as the parser allows."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if not node.isascii():
                try:
                    node.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


class McpBrief:
    """ASGI middleware: answers METHODS on HTTP `POST /mcp`; every other request passes through."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") != "/mcp" or scope.get("method") != "POST":
            return await self.app(scope, receive, send)
        chunks, size, more = [], 0, True
        while more and size <= MAX_BODY_BYTES:
            message = await receive()
            if message["type"] != "http.request":  # the client went away mid-body: never a complete request
                return await self.app(scope, _replay(chunks, message, receive, more=True), send)
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
        request = None
        if not more:
            try:
                request = json.loads(b"".join(chunks))
            except (ValueError, RecursionError):
                request = None
        reply = refuse_mcp_call(request) if isinstance(request, dict) else None
        if reply is None and not is_ours(request):
            return await self.app(scope, _replay(chunks, None, receive, more), send)
        if reply is None:
            reply = answer(request)
        status, body = (202, b"") if reply is None else (200, json.dumps(reply).encode())
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _replay(chunks: list[bytes], pending: dict | None, receive, more: bool = False):
    """A `receive` that hands back the body already read, then the rest of the stream."""
    queue = [{"type": "http.request", "body": b"".join(chunks), "more_body": more}]
    if pending is not None:
        queue.append(pending)

    async def replay():
        if queue:
            return queue.pop(0)
        return await receive()

    return replay
