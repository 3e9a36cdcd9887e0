"""The bare echo: a minimal environment on the same OpenEnv + uvicorn stack, the framework's own floor
(`tools/bench/text_echo_app.py`, which answers with our texts, is the payload floor the goals use).

    PYTHONPATH=. .venv/bin/python -m uvicorn tools.bench.echo_app:app --port 8001

It accepts exactly the messages our server accepts (reset with the scenario
keys, step with `tool_name` and `arguments`) so the two can be driven by the
same replay, and does no work: reset returns a fixed small observation and
step echoes the tool name back. Everything else (ASGI, WebSocket framing, the
per-session executor thread, pydantic validation and serialization) is OpenEnv's
and identical to ours. Like server/app.py it freezes its start-up heap.
"""

from __future__ import annotations

import gc
import os
from typing import Any, Optional

from openenv.core import Action, Environment, Observation, State, create_app
from pydantic import Field


class EchoAction(Action):
    tool_name: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)


class EchoObservation(Observation):
    text: str = ""


class EchoEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id or "echo", step_count=0)
        return EchoObservation(text="ready", done=False, reward=0.0)

    def step(
        self,
        action: EchoAction,
        timeout_s: Optional[float] = None,  # type: ignore[override]
        **kwargs: Any,
    ) -> EchoObservation:
        self._state.step_count += 1
        return EchoObservation(text=action.tool_name, done=False, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


LOOP_ENV = "BENCH_LOOP_STEP"


class LoopStep:
    """With $BENCH_LOOP_STEP=1 a floor steps on the event loop, as ours does (it overrides step_async,
    so OpenEnv skips the session executor): the what-if that takes dispatch out of the comparison."""

    async def step_async(self, action: Any, timeout_s: Optional[float] = None, **kwargs: Any):
        return self.step(action, timeout_s=timeout_s, **kwargs)

    async def reset_async(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any):
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)


def dispatched(cls: type) -> type:
    """`cls` as configured: on the event loop when $BENCH_LOOP_STEP=1, else OpenEnv's default executor."""
    return type(cls.__name__, (LoopStep, cls), {}) if os.environ.get(LOOP_ENV) == "1" else cls


GUARD_ENV = "BENCH_GUARD"


def guarded(app):
    """With $BENCH_GUARD=1 a floor runs behind our session guard (server/session_guard.py: a yield per
    received frame, a watchdog per connection, OpenEnv's reaper replaced), as ours does: the what-if that
    takes the guard out of the comparison. The floors never report play, so the run that sets it also
    lifts SESSION_CLAIM_TIMEOUT_S past its windows."""
    if os.environ.get(GUARD_ENV) == "1":
        from server import session_guard

        session_guard.install(app)
    return app


app = guarded(
    create_app(dispatched(EchoEnvironment), EchoAction, EchoObservation, env_name="echo", max_concurrent_envs=64)
)

# As server/app.py does: full collections never walk the start-up heap (gradio included).
gc.collect()
gc.freeze()
