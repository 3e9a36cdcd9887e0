"""OpenEnv harness sessions: ReleaseOps episodes for `openenv.core.harness`, remote or in process.

OpenEnv's harness (`CollectRunner`, `build_harness_rollout_func`, TRL's async GRPO
`HarnessRolloutWorker`) plays each episode through a `ResourceSession` that a
`ResourceSessionFactory` makes (`openenv/core/harness/rollout.py`; OpenEnv's
`envs/openspiel_env/harness.py` is the same shape)::

    factory = ReleaseOpsSessionFactory("http://127.0.0.1:8000")  # ReleaseOpsSessionFactory() plays in process
    runner = CollectRunner(session_factory=factory, harness_adapter=MCPHarnessAdapter(),
                           serializer=RolloutSerializer("data/harness"), limits=factory.limits,
                           tasks=[{"split": "heldout_seeds", "index": i} for i in range(8)])
    runner.run(model_step=reference_model_step("planner"), num_episodes=8)

A session wraps one TRL env (`ReleaseOpsToolEnv` in process, `RemoteReleaseOpsToolEnv` on a
server), so the model sees the same brief, board, seven tools and result strings as TRL's
`environment_factory`. The harness scores an episode by the last tool result's
`metadata["reward"]` (`_resolve_env_reward`, which refuses a `verify()` that disagrees), so
each result reports the episode's running return, not the step's reward. `verify()` ends an
unfinished episode the way the remote env does (`get_reward`: the `end_episode` control
action on a server, `Episode.abandon` in process), which pays the discoveries; it forwards
the verified return and writes it into the last result it returned, so that the harness
reads the same number. `close()` ends an episode nobody verified, then closes its session.

Limits. OpenEnv's default `HarnessRunLimits` stops a rollout after 10 turns, while the
engine plays up to `MAX_TOOL_CALLS` calls. `factory.limits` can never cut an episode: every
turn that calls a tool spends one of the episode's calls (a call to an unknown tool too: the
session ends the episode once they are all spent). A rollout the harness stopped while the
engine still played it is *cut*; `verify()` refuses to score it (`EpisodeCutError`), so
`CollectRunner` reports it as failed and writes nothing, and a trainer stops with the reason.

`reference_model_step(name)` is a harness `ModelStep` that plays one of the engine's reference
policies (`rule`, `planner`, ...) from the transcript alone, so their episodes can be
collected beside a model's and compared on the same tasks.

A task is a mapping (a task `split`/`index`/`difficulty`, a scenario, or a dataset row). A
trainer that passes a chat prompt instead (`build_harness_rollout_func`) gets the factory's
`tasks` in turn, each `group_size` times (a GRPO group shares its task); without `tasks`,
`seed` (TRL's async worker passes the group id) is an index into the train split.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import threading
from collections.abc import Mapping
from typing import Any, Iterable, Optional, Sequence

from openenv.core.env_server.mcp_types import Tool
from openenv.core.harness import (
    HarnessRunLimits,
    ModelStepResult,
    ResourceSession,
    ResourceSessionFactory,
    ToolResult,
    VerifyResult,
)
from openenv.core.llm_client import LLMResponse, ToolCall

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.brief import BOARD_LEAD, with_board
from releaseops_arena.policies import POLICIES
from releaseops_arena.rendering import View
from releaseops_arena.rewards import MAX_TOOL_CALLS
from releaseops_arena.tools import TOOL_NAMES, tool_schemas

from .errors import SessionLostError
from .factory import make_remote_env_factory

# The seven tools as MCP `Tool`s, from the same schemas TRL derives and MCP serves.
TOOLS = [
    Tool(name=s["function"]["name"], description=s["function"]["description"], input_schema=s["function"]["parameters"])
    for s in tool_schemas()
]

# One turn per call the engine allows: a rollout under these limits always ends with the episode
# (the engine's step cap, or the session's for unknown tools) or with the model's own stop.
HARNESS_LIMITS = HarnessRunLimits(max_turns=MAX_TOOL_CALLS)


class EpisodeCutError(RuntimeError):
    """The harness stopped a rollout while the engine would still play it: the episode is not scored."""


class ReleaseOpsSession(ResourceSession):
    """One episode: `env` (a `ReleaseOpsToolEnv` or `RemoteReleaseOpsToolEnv`) reset to `task`."""

    def __init__(self, env: Any, task: Mapping[str, Any], score_cut: bool = False):
        self.env, self.task, self.score_cut = env, dict(task), score_cut
        self._closed = False
        self._calls = 0  # every call the harness made, unknown tools included
        self._last: Optional[ToolResult] = None  # the harness keeps this very object in its trace
        self._board = env.reset(**self.task)

    def initial_messages(self) -> list[dict]:
        return with_board(self._board)

    def list_tools(self) -> list[Tool]:
        return list(TOOLS)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """An invalid call is an ordinary result with `error` set (the engine charges it, as in TRL);
        a lost remote session raises `SessionLostError`."""
        text: str
        error: Optional[str] = None
        self._calls += 1
        if name not in TOOL_NAMES:  # TRL answers an unknown tool without calling the env: no charge
            text = error = f"unknown tool {name!r}; valid: {', '.join(TOOL_NAMES)}"
        else:
            try:
                text = getattr(self.env, name)(**arguments)
            except (ValueError, TypeError) as exc:  # the engine's refusal, or arguments the tool does not take
                text = error = str(exc)
        if self._calls >= MAX_TOOL_CALLS and not self.env.done:  # only unknown tools leave the engine short
            self.env.get_reward()  # every call is spent: ended (abandoned) where the engine's step cap would
        self._last = ToolResult(data=text, done=bool(self.env.done), metadata={"reward": self.env.reward}, error=error)
        return self._last

    def verify(self, transcript: list[dict], final_state: Any = None) -> VerifyResult:
        """The verified return (None if a remote session was lost: unscorable), the episode ended first.

        A rollout the harness stopped (`final_state["done"]` false: its turn or call limits ran out)
        while the engine still plays the episode raises `EpisodeCutError` instead: scoring it would
        count the harness's limit as the policy's missed deadline. A factory made with `score_cut=True`
        scores it as abandoned instead, with `cut_by_harness` in the metrics."""
        cut = isinstance(final_state, Mapping) and not final_state.get("done", True) and not self.env.done
        if cut and not self.score_cut:
            metrics = final_state.get("metrics") or {}
            raise EpisodeCutError(
                f"the harness stopped this episode after {metrics.get('turns', '?')} turns and "
                f"{metrics.get('tool_calls', '?')} calls while the engine would still play it (up to "
                f"{MAX_TOOL_CALLS} calls), so it is not scored; pass limits=factory.limits "
                f"(HarnessRunLimits(max_turns={MAX_TOOL_CALLS})), or score_cut=True to score it as abandoned"
            )
        reward = self.env.get_reward()
        if reward is not None and self._last is not None:
            self._last.metadata["reward"] = reward  # what ending paid (the discoveries) joins the last result
        metrics = dict(self.env.metrics) | ({"cut_by_harness": True} if cut else {})
        return VerifyResult(env_reward=reward, done=bool(self.env.done), metrics=metrics, artifacts={"task": self.task})

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if not self.env.done:
                with contextlib.suppress(SessionLostError, ConnectionError):
                    self.env.get_reward()  # ends the abandoned episode on the server, as the remote env does
        finally:
            link = getattr(self.env, "_link", None)
            if link is not None:
                link.drop()


class ReleaseOpsSessionFactory(ResourceSessionFactory[ReleaseOpsSession]):
    """Sessions on servers (`base_urls`: one URL, a comma-separated string or a list, used round-robin)
    or, without URLs, in process. `client_options` are `make_remote_env_factory`'s. Pass `limits`
    to the runner (`CollectRunner(..., limits=factory.limits)`): OpenEnv's default cuts episodes.
    `score_cut=True` scores an episode tighter limits cut as abandoned (marked `cut_by_harness`)
    instead of refusing it: for a trainer that caps turns on purpose."""

    limits = HARNESS_LIMITS

    def __init__(
        self,
        base_urls: str | Sequence[str] | None = None,
        *,
        tasks: Optional[Iterable[Mapping[str, Any]]] = None,
        group_size: int = 1,
        score_cut: bool = False,
        **client_options: Any,
    ):
        self.env_factory = make_remote_env_factory(base_urls, **client_options) if base_urls else ReleaseOpsToolEnv
        self.tasks = [dict(task) for task in tasks] if tasks is not None else None
        self.group_size = max(1, int(group_size))
        self.score_cut = bool(score_cut)
        self._count, self._lock = itertools.count(), threading.Lock()

    def create(
        self, task: Any = None, seed: Optional[int] = None, episode_id: Optional[str] = None
    ) -> ReleaseOpsSession:
        env = self.env_factory()
        try:
            return ReleaseOpsSession(env, self._task(task, seed), self.score_cut)
        except BaseException:  # a refused task: the session it opened is closed, not left to the factory
            link = getattr(env, "_link", None)
            if link is not None:
                link.drop()
            raise

    def _task(self, task: Any, seed: Optional[int]) -> dict:
        if isinstance(task, Mapping):
            return dict(task)
        if self.tasks:
            if seed is None:
                with self._lock:
                    seed = next(self._count) // self.group_size
            return self.tasks[seed % len(self.tasks)]
        return {"split": "train", "index": seed} if seed is not None else {}

    def close(self) -> int:
        """Close every remote session this factory opened and still open; returns how many (0 in process)."""
        close = getattr(self.env_factory, "close", None)
        return close() if close is not None else 0


def reference_model_step(policy: str = "planner"):
    """A harness `ModelStep` that plays the reference policy `policy` (a name in
    `releaseops_arena.policies.POLICIES`) from the transcript alone: the board, then each result.

    It keeps no state between turns: each turn replays the transcript through a fresh policy
    (seeded as `play` seeds it), so it serves any number of episodes, in any order, and makes the
    calls `play(POLICIES[policy](), task)` makes on the same task. A policy that stops (None) ends
    the turn without a call; the session then ends the episode as a missed deadline."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; valid: {', '.join(sorted(POLICIES))}")
    make = POLICIES[policy]
    if make().privileged:
        raise ValueError(f"{policy!r} reads the hidden world, which a harness transcript does not hold")

    def model_step(messages: list[dict], tools: list[Tool], sampling: dict) -> ModelStepResult:
        if len(messages) < 2 or not str(messages[1].get("content", "")).startswith(BOARD_LEAD):
            raise ValueError("expected the brief, then the release board, as the first two messages")
        board = messages[1]["content"].removeprefix(BOARD_LEAD)
        player, view = make(), View(json.loads(board))
        player.rng = random.Random(0)
        player.begin(board)
        for message in messages[2:]:
            if message.get("role") == "assistant":
                for _ in message.get("tool_calls") or ():
                    player.act(view)  # the call it made then: the same, the policy being deterministic
            elif message.get("role") == "tool":
                text = str(message.get("content", ""))
                try:
                    result = json.loads(text)
                except ValueError:  # an invalid call's message, as `play` observes it
                    player.observe(str({"error": text}))
                else:
                    view.update(result)
                    player.observe(text)
        call = player.act(view)
        calls = [] if call is None else [ToolCall(id=f"call_{len(messages)}", name=call[0], args=dict(call[1]))]
        return ModelStepResult(response=LLMResponse(content="", tool_calls=calls))

    return model_step
