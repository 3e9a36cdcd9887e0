"""Clients for a ReleaseOps Arena server (installed as `releaseops_arena.client`).

This package is the client implementation. The root `client.py` of the repository only
re-exports its names, because `openenv push` requires a file of that name (see its docstring).

Nothing of this package is needed to talk to a server: OpenEnv's
`GenericEnvClient` speaks the wire with plain dicts::

    from openenv.core import GenericEnvClient

    with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(family="green_ci_disabled_payment_test", seed=17, difficulty="medium",
                           archetype_mix="shortcut_ci__careful_qa")
        print(result.observation["text"])          # the board a model sees
        result = env.step({"tool_name": "approve_proposal", "arguments": {"proposal_id": "p1"}})
        print(result.reward, result.done)           # from the response envelope
        print(result.observation["text"])           # the tool result, or the invalid call's message

One connection is one episode at a time (HTTP /reset and /step are stateless).

What this package adds:

- `ReleaseOpsEnv`: the typed `EnvClient[ReleaseOpsAction, ReleaseOpsObservation,
  ReleaseOpsState]`, async or `.sync()`, with timeouts suited to RL rollouts
  (also exported as `ReleaseopsArenaEnv`, the name OpenEnv's `AutoEnv` looks up),
  and its wire models `ReleaseOpsAction`, `ReleaseOpsObservation`, `ReleaseOpsState`.
- `RemoteReleaseOpsToolEnv`: the remote twin of `ReleaseOpsToolEnv` for TRL's
  `environment_factory` (same seven tools, same strings, rewards and metrics).
- `make_remote_env_factory(base_urls)`, `remote_sessions(base_urls)`: factories
  spreading sessions round-robin over server replicas; `close_all()` closes
  every session of the process; `check_capacity(base_urls, generation_batch_size)`
  fails fast when the servers cannot hold a generation batch.
- `SessionLostError`, raised by a tool call whose session is gone; its `code`
  (`client.errors`: `SESSION_CLOSED`, `CONNECTION_LOST`, `CLIENT_CLOSED`) says how.

Modules: `releaseops_client` (the typed client), `remote_tool_env` (the TRL
env), `session` (sessions and reconnects), `loop` (the event-loop thread),
`registry` (tracking and `close_all`), `factory` and `urls` (factories,
round-robin), `capacity`, `errors` (codes shared with the server), `models`
(the wire models).
"""

from .capacity import check_capacity
from .errors import CapacityError, SessionLostError
from .factory import RemoteEnvFactory, make_remote_env_factory, remote_sessions
from .models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState
from .registry import close_all
from .releaseops_client import ReleaseOpsEnv
from .remote_tool_env import RemoteReleaseOpsToolEnv
from .urls import urls_from_dns

# OpenEnv's AutoEnv names the client class after the manifest's `name` (openenv.auto._discovery:
# `releaseops_arena` -> `ReleaseopsArenaEnv`) and looks it up in this module; the manifest cannot
# name it (only `action:` and `observation:`, which openenv.yaml sets). So
# `AutoEnv.from_env("releaseops_arena", base_url=...)` finds `ReleaseOpsEnv` under this second name.
ReleaseopsArenaEnv = ReleaseOpsEnv

__all__ = [
    "ReleaseOpsEnv",
    "ReleaseOpsAction",
    "ReleaseOpsObservation",
    "ReleaseOpsState",
    "ReleaseopsArenaEnv",
    "RemoteReleaseOpsToolEnv",
    "RemoteEnvFactory",
    "make_remote_env_factory",
    "remote_sessions",
    "close_all",
    "check_capacity",
    "CapacityError",
    "SessionLostError",
    "urls_from_dns",
]
