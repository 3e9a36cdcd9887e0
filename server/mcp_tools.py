"""MCP `tools/list` and `tools/call` for one session, without a FastMCP server per session.

OpenEnv's MCP handler accepts any object with an async `list_tools()` whose
tools carry `name`, `description`, `parameters` (a JSON schema) and `fn`.
The schemas are the engine's `tool_schemas()`, the very ones TRL derives from
`ReleaseOpsToolEnv`, so the three doors describe the tools identically.

OpenEnv calls `fn(**arguments)` with whatever object the client sent. Each `fn`
here takes any keyword arguments and hands them, as one dict, to the session's
step, so that the engine judges them as it judges a WebSocket step (an unknown
or missing argument is an ordinary invalid call) and no argument name, not even
`tool_name`, can collide with a parameter. Arguments that are not an object
fail in OpenEnv's `**` before `fn` runs; they are answered at the app's
boundary (`mcp_brief.refuse_mcp_call`), and the function's name keeps even that
fallback message free of internal reprs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from releaseops_arena.tools import tool_schemas

_SCHEMAS = tool_schemas()


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    parameters: dict
    fn: Callable[..., Any]


def _tool_function(call: Callable[[str, dict], dict], name: str) -> Callable[..., dict]:
    def fn(**arguments: Any) -> dict:
        return call(name, arguments)

    # Python names the function in a failed `**` ("inspect_ci_run() argument after ** must be a
    # mapping, not list"): the tool's name, never a repr with an address.
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = None  # type: ignore[assignment]
    return fn


class SessionToolServer:
    """The seven supervisor tools of one session, as OpenEnv's MCP handler expects them."""

    def __init__(self, call: Callable[[str, dict], dict]):
        self._tools = [
            McpTool(
                s["function"]["name"],
                s["function"]["description"],
                s["function"]["parameters"],
                _tool_function(call, s["function"]["name"]),
            )
            for s in _SCHEMAS
        ]

    async def list_tools(self) -> list[McpTool]:
        return list(self._tools)
