"""ASGI app: `uvicorn server.app:app` from the repo root, or `releaseops-serve`.

Settings (environment variables):
  MAX_CONCURRENT_ENVS     WebSocket sessions served at once per worker (default 64).
  WEB_CONCURRENCY         worker processes (default 1; `--workers` of releaseops-serve).
  SESSION_IDLE_TIMEOUT_S  an idle session's slot is freed after this many
                          seconds (default 1800; 0 turns the reaper off).
                          Keep it above a trainer's longest gap between calls.
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
import logging
import os

from fastapi.responses import PlainTextResponse
from openenv.core import ConcurrencyConfig, create_app

from releaseops_arena import catalog, rewards
from releaseops_arena.brief import BRIEF, PROMPT_VERSION
from releaseops_arena.tools import tool_schemas

from .frame_guard import FrameGuard
from .mcp_brief import McpBrief
from .releaseops_environment import (
    TASKS,
    ReleaseOpsAction,
    ReleaseOpsEnvironment,
    ReleaseOpsObservation,
    ReleaseOpsState,
)
from .web_app import build_release_board, drop_shared_playground


def _setting(name: str, default: str, kind: type, minimum: float):
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


MAX_CONCURRENT_ENVS = _setting("MAX_CONCURRENT_ENVS", "64", int, 1)  # per worker process
# Worker processes serving this port. uvicorn's own `--workers` default is
# $WEB_CONCURRENCY, and `releaseops-serve --workers N` sets it, so every worker
# can report the count; each worker holds its own sessions and capacity.
WORKERS = _setting("WEB_CONCURRENCY", "1", int, 1)
SESSION_IDLE_TIMEOUT_S = _setting("SESSION_IDLE_TIMEOUT_S", "1800", float, 0)
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
# Server-side WebSocket keepalive: a trainer's client may be busy for a while
# between messages, so a missed pong is tolerated for two minutes.
WS_PING_INTERVAL_S, WS_PING_TIMEOUT_S = 20.0, 120.0
# uvicorn restarts a worker that misses a 5 s health ping; a worker still importing
# gradio and openenv on a busy 2-core machine can miss it, so it gets longer.
WORKER_HEALTHCHECK_S = 60.0


app = create_app(
    ReleaseOpsEnvironment,
    ReleaseOpsAction,
    ReleaseOpsObservation,
    env_name="releaseops_arena",
    concurrency_config=ConcurrencyConfig(
        max_concurrent_envs=MAX_CONCURRENT_ENVS,
        session_timeout=SESSION_IDLE_TIMEOUT_S or None,
    ),
    state_cls=ReleaseOpsState,
    # With ENABLE_WEB_INTERFACE=true: the Release board (server/web_ui.py) alone at
    # /web, one episode per browser session; OpenEnv's generic Playground would
    # play one environment shared by every visitor, so it is off (web_app.py).
    gradio_builder=build_release_board,
    show_default_tab=False,
)
drop_shared_playground(app)
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

# OpenEnv's /metadata only carries name/description/version; ours adds the
# catalogue, the tool schemas and the reward table (a superset, so
# `openenv validate` still passes).
app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) != "/metadata"]


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
        ws_ping_interval=WS_PING_INTERVAL_S,
        ws_ping_timeout=WS_PING_TIMEOUT_S,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
    )


if __name__ == "__main__":
    main()
