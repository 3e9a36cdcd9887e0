"""ASGI app: `uvicorn server.app:app` from the repo root, or `releaseops-serve`.

Settings (environment variables):
  MAX_CONCURRENT_ENVS     WebSocket sessions served at once per worker (default 64).
  WEB_CONCURRENCY         worker processes (default 1; `--workers` of releaseops-serve).
  SESSION_CLAIM_TIMEOUT_S a session that has started no episode this many
                          seconds after it opened is closed (default 20).
  SESSION_IDLE_TIMEOUT_S  a session whose last real play (a reset, a counted
                          call) is older is closed (default 300; 0: never).
                          Keep it above a trainer's longest model turn.
  MAX_SESSIONS_PER_CLIENT sessions one client address may hold, sockets and HTTP MCP
                          sessions together (default: half of MAX_CONCURRENT_ENVS;
                          0: no cap, for a trainer behind one address).
  RELEASEOPS_EVAL_SECRET  the operator's evaluation secret (unset: the public
                          draw): salts the worlds of evaluation-split tasks.
  ENABLE_WEB_INTERFACE    true to mount the web demo at /web (the Release
                          board, server/web_ui.py; OpenEnv's shared
                          Playground stays off, see server/web_app.py).
                          It needs one worker: with more, /web answers 503
                          and says why, and agents play as usual.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os

from fastapi.responses import PlainTextResponse, Response
from openenv.core import ConcurrencyConfig, create_app

from releaseops_arena import catalog, rewards
from releaseops_arena.brief import BRIEF, PROMPT_VERSION
from releaseops_arena.tools import tool_schemas

from . import http_errors, session_guard
from .body_limit import BodyLimit
from .connections import H11WithHeadTimeout, LaunchLimits, quiet_repeats
from .frame_guard import FrameGuard
from .limits import (
    MAX_CONCURRENT_ENVS,  # per worker process
    MAX_SESSIONS_PER_CLIENT,
    SESSION_CLAIM_TIMEOUT_S,
    SESSION_IDLE_TIMEOUT_S,
    setting,
    uvicorn_options,
)
from .limits import table as limits_table
from .mcp_brief import McpBrief
from .releaseops_environment import (
    TASKS,
    ReleaseOpsAction,
    ReleaseOpsEnvironment,
    ReleaseOpsObservation,
    ReleaseOpsState,
)
from .web_app import build_release_board, drop_shared_playground

# Worker processes serving this port. uvicorn's own `--workers` default is
# $WEB_CONCURRENCY, and `releaseops-serve --workers N` sets it, so every worker
# can report the count; each worker holds its own sessions and capacity.
WORKERS = setting("WEB_CONCURRENCY", "1", int, 1)
# The board keeps each visitor's episode in the memory of the worker that started it, and a
# visitor's next request may land on any worker: with several, it would answer for episodes
# it does not hold ("p1 is not in the list of choices"). So it needs exactly one worker; with
# more, /web says so and the rest of the server (agents over /ws, on every worker) runs as usual.
WEB_ASKED = os.environ.get("ENABLE_WEB_INTERFACE", "false").lower() in ("true", "1", "yes")
WEB_REFUSED = WEB_ASKED and WORKERS > 1
WEB_REFUSAL = (
    f"The web board is off: it keeps each visitor's episode in one worker process, and this server "
    f"runs {WORKERS} (WEB_CONCURRENCY={WORKERS}). Serve it with one worker, or set "
    f"ENABLE_WEB_INTERFACE=false; agents play over /ws with any number of workers."
)
if WEB_REFUSED:
    os.environ["ENABLE_WEB_INTERFACE"] = "false"  # create_app reads the variable itself

quiet_repeats()  # asyncio's resource errors: one log line per 10 s, not a traceback per retry (connections.py)
app = create_app(
    ReleaseOpsEnvironment,
    ReleaseOpsAction,
    ReleaseOpsObservation,
    env_name="releaseops_arena",
    concurrency_config=ConcurrencyConfig(
        max_concurrent_envs=MAX_CONCURRENT_ENVS,
        # Idle sessions are closed by session_guard.py (only real play counts), not by OpenEnv's reaper.
        session_timeout=None,
    ),
    state_cls=ReleaseOpsState,
    # With ENABLE_WEB_INTERFACE=true: the Release board (server/web_ui.py) alone at
    # /web, one episode per browser session; OpenEnv's generic Playground would
    # play one environment shared by every visitor, so it is off (web_app.py).
    gradio_builder=build_release_board,
    show_default_tab=False,
)
drop_shared_playground(app)
http_errors.install(app)  # bad input: a short 4xx; a fault: one log line (http_errors.py)
if WEB_REFUSED:
    logging.getLogger("uvicorn.error").warning(WEB_REFUSAL)

    @app.get("/web", include_in_schema=False)
    @app.get("/web/{rest:path}", include_in_schema=False)
    def web_refused(rest: str = "") -> PlainTextResponse:
        return PlainTextResponse(WEB_REFUSAL, status_code=503)


# Frames OpenEnv's handlers would die on (non-object JSON, binary, huge) are
# answered at our boundary instead, and the session plays on (frame_guard.py).
app.add_middleware(FrameGuard)
# MCP clients read the task brief with `initialize` (its instructions) or `prompts/get` (mcp_brief.py).
app.add_middleware(McpBrief)
# Slots: only real play keeps a session; connections are served in turn (session_guard.py).
session_guard.install(app)
# Body limits on every HTTP route, before a body is read (body_limit.py).
app.add_middleware(BodyLimit)
# The WebSocket wire (no permessage-deflate, 64 KiB messages) and the request-head timeout, set on the uvicorn
# that serves the app at start-up, whatever launched it (connections.py); outermost.
app.add_middleware(LaunchLimits)

# OpenEnv's /metadata only carries name/description/version; ours adds the
# catalogue, the tool schemas and the reward table (a superset, so
# `openenv validate` still passes).
app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) not in ("/metadata", "/schema")]

# OpenEnv's /schema builds four JSON schemas on every call (2.4 ms on the event loop, ahead of every
# session's step); they never change, so they are built once.
SCHEMA = json.dumps(
    {
        "action": ReleaseOpsAction.model_json_schema(),
        "observation": ReleaseOpsObservation.model_json_schema(),
        "reset_observation": ReleaseOpsObservation.model_json_schema(),
        "state": ReleaseOpsState.model_json_schema(),
    }
).encode()


@app.get("/schema", tags=["Schema"], summary="Get all JSON schemas")
def schema() -> Response:
    return Response(SCHEMA, media_type="application/json")


# A browser asks every host for /favicon.ico; a 404 there reads as a broken page in its log.
FAVICON = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
    b'fill="#1f6feb"/><path d="M4 8.5l2.5 2.5L12 5" stroke="#fff" stroke-width="2" fill="none"/></svg>'
)


@app.get("/favicon.ico", include_in_schema=False)
def favicon() -> Response:
    return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})


@app.get("/metadata", tags=["Environment Info"], summary="Environment metadata and catalogue")
def metadata() -> dict:
    return {
        **ReleaseOpsEnvironment().get_metadata().model_dump(),
        "catalogue": catalog.catalogue(),
        "tools": tool_schemas(),
        "reward": rewards.table(),
        # The task brief a model plays from (releaseops_arena/brief.py) and the version of its wording.
        "brief": BRIEF,
        "prompt_version": PROMPT_VERSION,
        # Whether the evaluation splits are the public draw or salted with an operator secret.
        "evaluation_draw": "private" if TASKS.private else "public",
        "max_concurrent_envs": MAX_CONCURRENT_ENVS,  # of the worker that answered
        "workers": WORKERS,
        "session_idle_timeout_s": SESSION_IDLE_TIMEOUT_S,
        "session_claim_timeout_s": SESSION_CLAIM_TIMEOUT_S,
        "max_sessions_per_client": MAX_SESSIONS_PER_CLIENT,
        "limits": limits_table(),
    }


# Everything imported so far (gradio comes with OpenEnv even when the web UI is
# off: ~256k objects) lives for the whole process. Freezing it keeps full
# garbage collections from walking it under load (docs/benchmarks.md, the GC
# note: an unfrozen echo server spends 7.7% of its time in full collections,
# frozen 0.3%).
gc.collect()
gc.freeze()


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve ReleaseOps Arena (OpenEnv).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--workers",
        type=int,
        default=WORKERS,
        help="worker processes, each with its own MAX_CONCURRENT_ENVS sessions (default: $WEB_CONCURRENCY or 1)",
    )
    args = parser.parse_args()
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, not {args.workers}")
    os.environ["WEB_CONCURRENCY"] = str(args.workers)  # read back by each worker for /metadata
    # Several workers need the app as an import string, so each process builds its own.
    target = app if args.workers == 1 else f"{__package__ or 'server'}.app:app"
    uvicorn.run(
        target,
        host=args.host,
        port=args.port,
        workers=args.workers,
        # The WebSocket limits and keepalive (limits.py) and the head timeout (connections.py); LaunchLimits
        # sets the same on any uvicorn at start-up, so a bare `uvicorn server.app:app` serves the same wire.
        **uvicorn_options(),
        http=H11WithHeadTimeout,
    )


if __name__ == "__main__":
    main()
