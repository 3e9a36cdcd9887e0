"""ASGI app: `uvicorn server.app:app` from the repo root, or `releaseops-serve`.

Settings (environment variables):
  MAX_CONCURRENT_ENVS     WebSocket sessions served at once (default 64).
  SESSION_IDLE_TIMEOUT_S  an idle session's slot is freed after this many
                          seconds (default 1800; 0 turns the reaper off).
                          Keep it above a trainer's longest gap between calls.
  RELEASEOPS_EVAL_SECRET  the operator's evaluation secret (unset: the public
                          draw): salts the worlds of evaluation-split tasks.
  ENABLE_WEB_INTERFACE    true to mount the web demo at /web (the "Release
                          board" tab, server/web_ui.py, then the Playground).
"""

from __future__ import annotations

import argparse
import gc
import os

from openenv.core import ConcurrencyConfig, create_app

from releaseops_arena import catalog, rewards
from releaseops_arena.tools import tool_schemas

from .frame_guard import FrameGuard
from .releaseops_environment import (EVAL_SECRET_ENV, ReleaseOpsAction, ReleaseOpsEnvironment, ReleaseOpsObservation,
                                     ReleaseOpsState)

MAX_CONCURRENT_ENVS = int(os.environ.get("MAX_CONCURRENT_ENVS", "64"))
SESSION_IDLE_TIMEOUT_S = float(os.environ.get("SESSION_IDLE_TIMEOUT_S", "1800"))
# Server-side WebSocket keepalive: a trainer's client may be busy for a while
# between messages, so a missed pong is tolerated for two minutes.
WS_PING_INTERVAL_S, WS_PING_TIMEOUT_S = 20.0, 120.0


def build_release_board(*args):
    """Imported only when the web UI is on: gradio costs seconds of start-up otherwise."""
    from .web_ui import build_release_board as build

    return build(*args)


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
    # With ENABLE_WEB_INTERFACE=true: the "Release board" tab (server/web_ui.py)
    # is primary at /web, before OpenEnv's generic Playground.
    gradio_builder=build_release_board,
    custom_tab_name="Release board",
    custom_tab_primary=True,
)

# Frames OpenEnv's handlers would die on (non-object JSON, binary, huge) are
# answered at our boundary instead, and the session plays on (frame_guard.py).
app.add_middleware(FrameGuard)

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
        # Whether the evaluation splits are the public draw or salted with an operator secret.
        "evaluation_draw": "private" if os.environ.get(EVAL_SECRET_ENV) else "public",
        "max_concurrent_envs": MAX_CONCURRENT_ENVS,
        "session_idle_timeout_s": SESSION_IDLE_TIMEOUT_S,
    }


# Everything imported so far (gradio comes with OpenEnv even when the web UI is
# off: ~200k objects) lives for the whole process. Freezing it keeps full
# garbage collections from walking it under load: a measured 138 -> 26 ms p99
# at 64 sessions (docs/benchmarks.md).
gc.collect()
gc.freeze()


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve ReleaseOps Arena (OpenEnv).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, ws_ping_interval=WS_PING_INTERVAL_S,
                ws_ping_timeout=WS_PING_TIMEOUT_S)


if __name__ == "__main__":
    main()
