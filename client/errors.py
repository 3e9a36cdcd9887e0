"""Error codes and exceptions of the remote client; the server imports its code from here.

OpenEnv 0.10's `/ws` handler answers a failed message with an error frame
`{"type": "error", "data": {"message": ..., "code": <WSErrorCode>}}`, and it
sends `EXECUTION_ERROR` for every exception an environment's `reset` or `step`
raises: an environment cannot choose the frame's `code`. So a code of our own
travels as the first word of that message (`"SESSION_CLOSED: this session was
closed ..."`), written by `coded_message` and read back by `frame_code`: both
sides share this one definition, and the client never reads the English.
"""

from __future__ import annotations

from typing import Any, Optional

from openenv.core.env_server.types import WSErrorCode

# Sent by the server: the session was closed under a live socket (the idle reaper freed its slot).
SESSION_CLOSED = "SESSION_CLOSED"
# Client side: the socket dropped, timed out or was refused mid-episode.
CONNECTION_LOST = "CONNECTION_LOST"
# Client side: `close_all()` (or a factory's `close()`) closed the session.
CLIENT_CLOSED = "CLIENT_CLOSED"

ENVIRONMENT_CODES = frozenset({SESSION_CLOSED})


def coded_message(code: str, text: str) -> str:
    """An environment's exception message that carries `code` through an `EXECUTION_ERROR` frame."""
    if code not in ENVIRONMENT_CODES:
        raise ValueError(f"unknown environment error code {code!r}; valid: {', '.join(sorted(ENVIRONMENT_CODES))}")
    return f"{code}: {text}"


def frame_code(data: dict) -> tuple[str, str]:
    """(code, message) of an error frame's `data`; an environment's own code replaces `EXECUTION_ERROR`."""
    code, message = str(data.get("code") or "UNKNOWN"), str(data.get("message", ""))
    head, sep, rest = message.partition(": ")
    if code == WSErrorCode.EXECUTION_ERROR.value and sep and head in ENVIRONMENT_CODES:
        return head, rest
    return code, message


class ServerError(RuntimeError):
    """The server answered a message with an error frame (`code`, `message`, and the frame's `data`)."""

    def __init__(self, code: str, message: str, data: Optional[dict[str, Any]] = None):
        super().__init__(f"{message} (code: {code})")
        self.code, self.message, self.data = code, message, dict(data or {})


class SessionLostError(RuntimeError):
    """The WebSocket session of a running episode is gone; the next `reset()` opens a new one.

    `code` says how: `SESSION_CLOSED` (the server freed it), `CONNECTION_LOST`
    (the socket dropped or timed out) or `CLIENT_CLOSED` (`close_all()`).
    """

    def __init__(self, message: str, code: str = CONNECTION_LOST, reason: str = ""):
        super().__init__(message)
        self.code, self.reason = code, reason or message


class CapacityError(ValueError):
    """The servers cannot hold as many concurrent sessions as the run needs."""
