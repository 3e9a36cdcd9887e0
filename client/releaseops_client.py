"""`ReleaseOpsEnv`: the typed OpenEnv client for a ReleaseOps Arena server.

One instance is one WebSocket session (one episode at a time) on the server.
It is an `EnvClient`, so it works async by default and sync through `.sync()`::

    from releaseops_arena.client import ReleaseOpsAction, ReleaseOpsEnv

    with ReleaseOpsEnv(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(family="green_ci_disabled_payment_test", seed=17, difficulty="medium",
                           archetype_mix="shortcut_ci__careful_qa")
        result = env.step(ReleaseOpsAction(tool_name="inspect_pr_diff", arguments={"pr_id": "pr_482"}))
        result.reward, result.done, result.observation.text, result.observation.error

    async with ReleaseOpsEnv(base_url="http://127.0.0.1:8000") as env:
        result = await env.reset(seed=3)

`reward` (this step's) and `done` are read from the response envelope, where
OpenEnv's `serialize_observation` puts them (they are stripped from the nested
observation; OpenEnv issue/PR #1017), and copied back onto the observation so
that `result.observation.reward` agrees with `result.reward`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from openenv.core import EnvClient
from openenv.core.client_types import StepResult

from .models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState

# Defaults suited to RL rollouts: a model may generate for minutes between two
# calls on the same socket (OpenEnv PR #362, "WebSocket connection closed during
# RL training"). Pings every 20 s keep proxies (HF Spaces) from reaping an idle
# socket; a generous pong timeout tolerates a client process whose event loop
# thread is starved for a while (GIL held by the trainer).
DEFAULT_CONNECT_TIMEOUT_S = 30.0
DEFAULT_MESSAGE_TIMEOUT_S = 300.0
DEFAULT_MAX_MESSAGE_SIZE_MB = 100.0
DEFAULT_PING_INTERVAL_S: Optional[float] = 20.0
DEFAULT_PING_TIMEOUT_S: Optional[float] = 120.0


def action_payload(action: ReleaseOpsAction | Dict[str, Any]) -> Dict[str, Any]:
    """The `data` of a step message for `action` (a `ReleaseOpsAction` or its dict)."""
    if isinstance(action, dict):
        action = ReleaseOpsAction(**action)
    payload: Dict[str, Any] = {"tool_name": action.tool_name, "arguments": dict(action.arguments)}
    if action.metadata:
        payload["metadata"] = action.metadata
    return payload


def parse_step_result(payload: Dict[str, Any]) -> StepResult[ReleaseOpsObservation]:
    """A reset or step reply's `data` as a typed result (reward and done from the envelope)."""
    if not isinstance(payload.get("observation"), dict):
        raise RuntimeError(f"malformed server response: no observation in {sorted(payload)}")
    fields = ReleaseOpsObservation.model_fields
    data = {k: v for k, v in payload["observation"].items() if k in fields and k not in ("reward", "done")}
    # The envelope is authoritative for reward and done (OpenEnv #1017);
    # metadata is in both places, the envelope copy only when non-empty.
    reward = payload.get("reward")
    done = bool(payload.get("done", False))
    metadata = payload.get("metadata") or data.pop("metadata", None) or {}
    data.pop("metadata", None)
    observation = ReleaseOpsObservation(**data, reward=reward, done=done, metadata=metadata)
    return StepResult(observation=observation, reward=reward, done=done, metadata=metadata)


class ReleaseOpsEnv(EnvClient[ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState]):
    """Typed client: `reset(family=, seed=, difficulty=, archetype_mix=)`, `step(ReleaseOpsAction)`, `state()`.

    `step` also accepts a plain dict `{"tool_name": ..., "arguments": {...}}`.
    Timeouts default to values suited to long generations between calls (see
    the module docstring); every `EnvClient` keyword can be overridden.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        message_timeout_s: float = DEFAULT_MESSAGE_TIMEOUT_S,
        max_message_size_mb: float = DEFAULT_MAX_MESSAGE_SIZE_MB,
        websocket_ping_interval_s: Optional[float] = DEFAULT_PING_INTERVAL_S,
        websocket_ping_timeout_s: Optional[float] = DEFAULT_PING_TIMEOUT_S,
        **kwargs: Any,
    ):
        super().__init__(
            base_url=base_url,
            connect_timeout_s=connect_timeout_s,
            message_timeout_s=message_timeout_s,
            max_message_size_mb=max_message_size_mb,
            websocket_ping_interval_s=websocket_ping_interval_s,
            websocket_ping_timeout_s=websocket_ping_timeout_s,
            **kwargs,
        )

    def _step_payload(self, action: ReleaseOpsAction | Dict[str, Any]) -> Dict[str, Any]:
        return action_payload(action)

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult[ReleaseOpsObservation]:
        return parse_step_result(payload)

    def _parse_state(self, payload: Dict[str, Any]) -> ReleaseOpsState:
        return ReleaseOpsState(**payload)
