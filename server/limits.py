"""Every resource a client can consume, bounded: the published limits (docs/server.md, "Limits").

The numbers live here so that the server, the launch command, the docs and the
tests read one source. Settings an operator may change are read from the
environment at start; the rest are fixed, with the reason beside each.
"""

from __future__ import annotations

import math
import os


def setting(name: str, default: str, kind: type, minimum: float):
    """A numeric setting from the environment, or a one-line exit naming what is valid."""
    raw = os.environ.get(name) or default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not value >= minimum:  # `not >=` also refuses nan
        what = "a whole number" if kind is int else "a number of seconds"
        raise SystemExit(f"{name} must be {what} >= {minimum:g}, got {raw!r}")
    return value


# --- Slots -------------------------------------------------------------------------------------------
# A session that has not started an episode this long after it opened is closed: it plays nothing.
SESSION_CLAIM_TIMEOUT_S = setting("SESSION_CLAIM_TIMEOUT_S", "20", float, 1)
# A session whose last real play (a reset that started an episode, or a call the engine counted)
# is older than this is closed; 0 turns it off. Junk, `state`, pings and refused frames never count.
# It must exceed a trainer's longest gap between two calls of one episode (a model's turn).
SESSION_IDLE_TIMEOUT_S = setting("SESSION_IDLE_TIMEOUT_S", "300", float, 0)
# WebSocket sessions (training slots) served at once per worker process: OpenEnv's max_concurrent_envs.
MAX_CONCURRENT_ENVS = setting("MAX_CONCURRENT_ENVS", "64", int, 1)
# The share of a worker's slots one client address may hold unless the operator says otherwise: half.
# A client re-creating sessions as fast as the claim bound frees them (HTTP `openenv/session/create` needs
# no socket) or playing just enough to keep them would otherwise hold every slot; this way one address
# always leaves the other half to everyone else.
CLIENT_SHARE = 0.5
DEFAULT_SESSIONS_PER_CLIENT = max(1, math.ceil(MAX_CONCURRENT_ENVS * CLIENT_SHARE))
# Sessions one client address may hold at once in a worker, sockets and HTTP MCP sessions together (a socket
# attached to an HTTP MCP session takes no second slot, so it is not counted twice). Unset: the share above
# (32 of 64); an operator serving a trainer behind one address raises it, or sets 0 for no cap.
MAX_SESSIONS_PER_CLIENT = setting("MAX_SESSIONS_PER_CLIENT", str(DEFAULT_SESSIONS_PER_CLIENT), int, 0)
# How often idle sessions are looked for: the bounds above are met within this many seconds.
REAP_INTERVAL_S = 1.0

# --- The WebSocket wire (uvicorn's settings: the app sets them on the uvicorn that serves it, connections.py) -
# A step is under 300 bytes and a reset under 1 KB; a frame over this is closed with 1009 by the
# protocol layer before it is read into memory.
WS_MAX_MESSAGE_BYTES = 64 * 1024
# Frames read ahead per connection before the socket stops being read (TCP then pushes back).
WS_MAX_QUEUE = 4
# permessage-deflate is off: a 16 KB compressed frame could otherwise inflate to 16 MB in memory,
# and the replies are a few KB of text, for which compression costs more CPU than it saves.
WS_PER_MESSAGE_DEFLATE = False

# --- Connections ----------------------------------------------------------------------------------
# A connection that has not sent a whole request head (or WebSocket upgrade) this long after it opened
# is closed (releaseops-serve's protocol, server/connections.py): half-open sockets cannot pile up.
HTTP_HEAD_TIMEOUT_S = 10.0
# HTTP requests one client address may have in flight at once outside the web board (429 beyond):
# one address cannot queue many slow requests (a /schema, a 1,000-task range) ahead of everyone's steps.
HTTP_REQUESTS_PER_CLIENT = setting("HTTP_REQUESTS_PER_CLIENT", "4", int, 1)

# --- HTTP bodies -------------------------------------------------------------------------------------
# Every HTTP route outside the web board: /mcp, the Task API, /reset, /step (a request is under 1 KB).
HTTP_MAX_BODY_BYTES = 64 * 1024
# The web board's routes (Gradio's event payloads).
WEB_MAX_BODY_BYTES = 1024 * 1024
# The board's upload route: one collect file (web_replay.MAX_BYTES, 5 MiB) and its multipart envelope.
WEB_UPLOAD_PATH = "/web/gradio_api/upload"
WEB_UPLOAD_MAX_BODY_BYTES = 5 * 1024 * 1024 + 64 * 1024


def uvicorn_options() -> dict:
    """uvicorn's settings for the limits above and the keepalive (`uvicorn.run(**...)`)."""
    return {
        "ws_max_size": WS_MAX_MESSAGE_BYTES,
        "ws_max_queue": WS_MAX_QUEUE,
        "ws_per_message_deflate": WS_PER_MESSAGE_DEFLATE,
        # Server-side keepalive: a trainer's client may be busy for a while between messages,
        # so a missed pong is tolerated for two minutes.
        "ws_ping_interval": 20.0,
        "ws_ping_timeout": 120.0,
        # uvicorn restarts a worker that misses a 5 s health ping; a worker still importing
        # gradio and openenv on a busy 2-core machine can miss it, so it gets longer.
        "timeout_worker_healthcheck": 60,
    }


def uvicorn_cli_args() -> list[str]:
    """The same settings as `uvicorn` command-line flags (the benchmarks' echo apps run with them)."""
    args = []
    for name, value in uvicorn_options().items():
        flag = "--" + name.replace("_", "-")
        args += [flag, str(value).lower() if isinstance(value, bool) else str(value)]
    return args


def table() -> dict:
    """The published limits, as `/metadata` reports them (this worker's values)."""
    return {
        "session_claim_timeout_s": SESSION_CLAIM_TIMEOUT_S,
        "session_idle_timeout_s": SESSION_IDLE_TIMEOUT_S,
        "max_sessions_per_client": MAX_SESSIONS_PER_CLIENT,
        "ws_max_message_bytes": WS_MAX_MESSAGE_BYTES,
        "ws_max_queue": WS_MAX_QUEUE,
        "ws_per_message_deflate": WS_PER_MESSAGE_DEFLATE,
        "http_head_timeout_s": HTTP_HEAD_TIMEOUT_S,
        "http_requests_per_client": HTTP_REQUESTS_PER_CLIENT,
        "http_max_body_bytes": HTTP_MAX_BODY_BYTES,
        "web_max_body_bytes": WEB_MAX_BODY_BYTES,
        "web_upload_max_body_bytes": WEB_UPLOAD_MAX_BODY_BYTES,
    }
