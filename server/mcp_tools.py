"""MCP `tools/list` and `tools/call` for one session, without a FastMCP server per session.

OpenEnv's MCP handler accepts any object with an async `list_tools()` whose
tools carry `name`, `description`, `parameters` (a JSON schema) and `fn`.
The schemas are the engine's `tool_schemas()`, the very ones TRL derives from
`ReleaseOpsToolEnv`, so the three doors describe the tools identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from releaseops_arena.tools import tool_schemas

_SCHEMAS = tool_schemas()


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    parameters: dict
    fn: Callable[..., Any]


class SessionToolServer:
    """The seven supervisor tools of one session, as OpenEnv's MCP handler expects them."""

    def __init__(self, call: Callable[..., dict]):
        self._tools = [
            McpTool(
                s["function"]["name"],
                s["function"]["description"],
                s["function"]["parameters"],
                partial(call, s["function"]["name"]),
            )
            for s in _SCHEMAS
        ]

    async def list_tools(self) -> list[McpTool]:
        return list(self._tools)
