"""ASGI app: `uvicorn server.app:app` from the repo root, or `releaseops-serve`.

Settings (environment): MAX_CONCURRENT_ENVS (default 64), ENABLE_WEB_INTERFACE.
"""

from __future__ import annotations

import argparse
import os

from openenv.core import create_app

from releaseops_arena.openenv_models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState

from .releaseops_environment import ReleaseOpsEnvironment

MAX_CONCURRENT_ENVS = int(os.environ.get("MAX_CONCURRENT_ENVS", "64"))

app = create_app(
    ReleaseOpsEnvironment,
    ReleaseOpsAction,
    ReleaseOpsObservation,
    env_name="releaseops_arena",
    max_concurrent_envs=MAX_CONCURRENT_ENVS,
    state_cls=ReleaseOpsState,
)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve ReleaseOps Arena (OpenEnv).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
