"""OpenEnv `Environment` adapter: one WebSocket session, one `Episode`.

No game logic lives here: the engine's `Episode` decides everything; this
class only translates between it and OpenEnv's typed wire models.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Optional

from fastapi import HTTPException
from openenv.core import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from releaseops_arena import catalog
from releaseops_arena.episode import Episode, EpisodeOver
from releaseops_arena.splits import SECRET_ENV, ReleaseTasks, start_episode
from releaseops_arena.tools import tool_schemas

try:
    from ..client.errors import SESSION_CLOSED, coded_message
    from ..client.models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState
except ImportError:  # run from the repo root as `server.app` (OpenEnv's own template does the same)
    from client.errors import SESSION_CLOSED, coded_message
    from client.models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState

from .mcp_tools import SessionToolServer
from .rubric import EpisodeReturn

SCENARIO_KEYS = tuple(catalog.DEFAULT_SCENARIO)
TASK_KEYS = ("split", "index", "token")
RESET_KEYS = frozenset(SCENARIO_KEYS + TASK_KEYS)
# The operator's evaluation secret (unset: the public draw). It salts the worlds
# of the evaluation splits' tasks, so that nobody holding this source can rebuild
# a task from its first board (docs/evaluation.md, "The evaluation secret").
TASKS = ReleaseTasks(secret=os.environ.get(SECRET_ENV, ""))


class TaskRequestError(HTTPException, ValueError):
    """A bad Task API request: a 400 with the valid values over HTTP, a ValueError in-process.
    (OpenEnv's task routes turn an IndexError into a bare "Invalid task index".)"""

    def __init__(self, message: str):
        HTTPException.__init__(self, status_code=400, detail=message)
        ValueError.__init__(self, message)

    def __str__(self) -> str:
        return self.detail


END_EPISODE = catalog.END_EPISODE  # a control action, not a tool (see catalog)


# The answer to a `{"type": "list_tools"}` step: each tool with its MCP input schema.
TOOL_LIST = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in tool_schemas()
]


class ReleaseOpsEnvironment(Environment):
    """Release supervision episodes over OpenEnv; safe to run one per session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__(rubric=EpisodeReturn())
        self._episode: Episode | None = None
        self._episode_id: str | None = None
        self._picked_by_server = False  # a task: its family, mix and seed stay hidden until done
        self._steps = 0
        self._closed = False
        self.mcp_server = SessionToolServer(self.call_tool)

    def call_tool(self, tool_name: str, **arguments: Any) -> dict:
        """MCP `tools/call`: the same step as a WebSocket action, returned as plain data (tools only)."""
        observation = self._apply(ReleaseOpsAction(tool_name=tool_name, arguments=arguments), control=False)
        return observation.model_dump()

    def close(self) -> None:
        # Called when the socket ends or the idle reaper frees the slot; a
        # reaped session must not go on playing on a freed slot.
        self._closed = True
        self._episode = None

    def _check_open(self) -> None:
        # The code, not the wording, is what clients match (client/errors.py).
        if self._closed:
            raise RuntimeError(
                coded_message(SESSION_CLOSED, "this session was closed (idle timeout); reconnect and reset")
            )

    def reset(
        self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any
    ) -> ReleaseOpsObservation:
        """A task (`split`, `index`, optional `difficulty`; with an evaluation secret, an evaluation
        task also needs its `token`) or a scenario (`family`, `seed`, `difficulty`, `archetype_mix`;
        missing ones take the catalogue defaults)."""
        self._check_open()
        unknown = sorted(kwargs.keys() - RESET_KEYS)
        if unknown:
            raise ValueError(
                f"unknown reset argument {unknown[0]!r}; valid: seed, episode_id, "
                f"{', '.join(key for key in SCENARIO_KEYS if key != 'seed')}, {', '.join(TASK_KEYS)}"
            )
        if seed is not None:
            kwargs["seed"] = seed
        # Raises ValueError / IndexError naming the valid values.
        self._episode, self._picked_by_server = start_episode(kwargs, TASKS)
        self.rubric.reset()
        self._episode_id, self._steps = episode_id or str(uuid.uuid4()), 0
        # The reset's reward is the opening reward (a missed deadline until the release ships; rewards.py).
        ep = self._episode
        return ReleaseOpsObservation(
            text=ep.initial_observation, done=False, reward=ep.opening_reward, episode_return=ep.episode_return
        )

    # OpenEnv's Task API (TaskProvider): served as /releaseops_arena/splits, /tasks, ...
    def list_splits(self) -> list[dict]:
        return TASKS.list_splits()

    def list_tasks(self, split: str) -> list[dict]:
        return _task_call(TASKS.list_tasks, split)

    def num_tasks(self, split: str) -> int:
        return _task_call(TASKS.num_tasks, split)

    def get_task(self, split: str, index: int) -> dict:
        return _task_call(TASKS.get_task, split, index)

    def get_task_range(self, split: str, start: Optional[int] = None, stop: Optional[int] = None) -> list[dict]:
        return _task_call(TASKS.get_task_range, split, start, stop)

    def step(self, action: ReleaseOpsAction, timeout_s: Optional[float] = None, **kwargs: Any) -> ReleaseOpsObservation:  # type: ignore[override]
        return self._apply(action, control=True)

    # OpenEnv runs a sync step in the session's thread pool unless step_async is overridden. A step
    # is tens of microseconds of pure Python that holds the GIL throughout: the hop to a thread and
    # back costs more than the step, and buys no concurrency. So both run on the event loop.
    async def step_async(
        self,
        action: ReleaseOpsAction,
        timeout_s: Optional[float] = None,  # type: ignore[override]
        **kwargs: Any,
    ) -> ReleaseOpsObservation:
        return self._apply(action, control=True)

    async def reset_async(
        self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any
    ) -> ReleaseOpsObservation:
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    def _apply(self, action: ReleaseOpsAction, control: bool) -> ReleaseOpsObservation:
        """One step; `control` allows END_EPISODE (the WebSocket step does, an MCP tool call does not:
        the engine then refuses it as an unknown tool) and `list_tools`."""
        self._check_open()
        ep = self._episode
        if control and action.type == "list_tools":
            # Clients that play any OpenEnv server from its schema (verifiers' OpenEnv taskset) list the
            # tools this way (the action is titled CallToolAction); it changes nothing.
            return ReleaseOpsObservation(
                text=", ".join(tool["name"] for tool in TOOL_LIST),
                tools=TOOL_LIST,
                reward=None,
                done=bool(ep and ep.done),
                episode_return=ep.episode_return if ep else 0.0,
            )
        if ep is None:
            return ReleaseOpsObservation(
                text="no episode is running; send reset first",
                error="no episode is running; send reset first",
                done=False,
                reward=0.0,
            )
        try:
            if control and action.tool_name == END_EPISODE:
                if ep.done:
                    return self._observation("", 0.0, error=None)
                result = ep.abandon()
            else:
                result = ep.step(action.tool_name, action.arguments)
        except EpisodeOver as exc:
            return self._observation(str(exc), 0.0, error=str(exc))
        self._steps += 1
        if ep.done:  # scored once, at the end: a call through the tree costs more than the engine's step
            self.rubric(action, ep.reward_counters())
        return self._observation(result.text, result.reward, error=result.error)

    def _observation(self, text: str, reward: float, error: str | None) -> ReleaseOpsObservation:
        ep = self._episode
        # A reply is the model's text and a small envelope. No board (it is in `state`, whole and
        # current) and no metadata: OpenEnv 0.10 serializes metadata twice, inside the observation
        # and beside it, so the end-of-episode record (metrics, reward breakdown, scenario, audit)
        # is offered in `state` once the episode is over, where it travels once and only on request.
        return ReleaseOpsObservation(
            text=text, error=error, outcome=ep.outcome, episode_return=ep.episode_return, done=ep.done, reward=reward
        )

    @property
    def state(self) -> ReleaseOpsState:
        # Built on request: validated pydantic assignments on every step cost more
        # than the engine's step itself.
        ep = self._episode
        if ep is None:
            return ReleaseOpsState(episode_id=self._episode_id, step_count=self._steps)
        # A task the server picked keeps its family, mix and seed to itself until the end.
        config = ep.config if ep.done or not self._picked_by_server else {"difficulty": ep.config["difficulty"]}
        return ReleaseOpsState(
            episode_id=self._episode_id,
            step_count=self._steps,
            **config,
            phase=catalog.PHASES[ep.world.stage],
            review_budget_remaining=ep.world.budget_left,
            board=ep.board(),
            audit=ep.audit if ep.done else [],
            metrics=ep.metrics() if ep.done else {},
            reward_breakdown=self.rubric.breakdown() if ep.done else {},
            episode_return=ep.episode_return,
            done=ep.done,
            outcome=ep.outcome,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="releaseops_arena",
            description="Supervise specialist release agents under a review budget and three safety rules.",
            version="0.1.0",
        )


def _task_call(method, *args):
    try:
        return method(*args)
    except (ValueError, IndexError) as exc:
        raise TaskRequestError(str(exc)) from exc
