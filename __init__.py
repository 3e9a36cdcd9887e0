"""ReleaseOps Arena: the environment root as OpenEnv sees it.

OpenEnv treats an environment as a directory holding `openenv.yaml`, `__init__.py`,
`client.py`, `README.md`, a `Dockerfile` and `pyproject.toml`; `openenv push` refuses
a tree without them (`openenv.cli._cli_utils.validate_env_structure`). This file is
that `__init__.py`. The repository root is not itself an installed package:
`pip install` (the distribution `openenv-releaseops-arena`) installs the engine
`releaseops_arena` with `releaseops_arena.server`, `releaseops_arena.client` and
`releaseops_arena.training` mapped from the top-level `server/`, `client/` and
`training/` folders, and OpenEnv's `AutoEnv` finds that distribution.

Should this directory be imported as a package (from its parent folder, as OpenEnv's
own `envs/<name>/` are), it exports the client's names, taken from the installed
`releaseops_arena.client` so that there is one copy of the client in a process.
"""

from releaseops_arena.client import ReleaseOpsAction, ReleaseOpsEnv, ReleaseOpsObservation, ReleaseOpsState

__all__ = ["ReleaseOpsEnv", "ReleaseOpsAction", "ReleaseOpsObservation", "ReleaseOpsState"]
