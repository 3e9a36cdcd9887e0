"""The environment's client, where OpenEnv's layout expects it: the names of `releaseops_arena.client`.

This file exists because `openenv push` checks the tree before it publishes a Space
(`openenv.cli._cli_utils.validate_env_structure`) and refuses one without a `client.py`
at the environment root. The client itself is the `client/` package beside this file,
installed as `releaseops_arena.client`; this file only re-exports its public names.

From the repository root, `import client` gets the `client/` package, never this file:
Python prefers a package to a module of the same name in one directory. So use::

    from releaseops_arena.client import ReleaseOpsAction, ReleaseOpsEnv

which works the same from a checkout and from an installed wheel.
"""

from releaseops_arena.client import ReleaseOpsAction, ReleaseOpsEnv, ReleaseOpsObservation, ReleaseOpsState

__all__ = ["ReleaseOpsEnv", "ReleaseOpsAction", "ReleaseOpsObservation", "ReleaseOpsState"]
