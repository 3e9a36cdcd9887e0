"""OpenEnv `Environment` adapter: one WebSocket session, one `Episode`.

No game logic lives here: the engine's `Episode` decides everything; this
class only translates between it and OpenEnv's typed wire models.
"""

from __future__ import annotations

import numbers
import os
import time
import uuid
from typing import Any, Optional

from fastapi import HTTPException
from openenv.core import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from releaseops_arena import catalog
from releaseops_arena.episode import Episode, EpisodeOver
from releaseops_arena.splits import EVALUATION_SPLITS, SECRET_ENV, SPLITS, TASKS_PER_SPLIT, ReleaseTasks, start_episode
from releaseops_arena.tools import tool_schemas

try:
    from ..client.errors import SESSION_CLOSED, coded_message
    from ..client.models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState
except ImportError:  # run from the repo root as `server.app` (OpenEnv's own template does the same)
    from client.errors import SESSION_CLOSED, coded_message
    from client.models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState

from .mcp_tools import SessionToolServer
from .rubric import EpisodeReturn
from .session_guard import played

SCENARIO_KEYS = tuple(catalog.DEFAULT_SCENARIO)
TASK_KEYS = ("split", "index", "token")
RESET_KEYS = frozenset(SCENARIO_KEYS + TASK_KEYS)
# The operator's evaluation secret (unset: the public draw). It salts the worlds
# of the evaluation splits' tasks, so that nobody holding this source can rebuild
# a task from its first board, and decides which family and mix each index plays
# (docs/evaluation.md, "The evaluation secret").
TASKS = ReleaseTasks(secret=os.environ.get(SECRET_ENV, ""))


class BadRequestError(HTTPException, ValueError):
    """A bad reset or Task API request: a 400 with the valid values over HTTP, the same message in
    the WebSocket error frame, a ValueError in-process. (OpenEnv's task routes turn an IndexError into
    a bare "Invalid task index", and its HTTP `/reset` answers any other exception with a 500.)"""

    def __init__(self, message: str):
        HTTPException.__init__(self, status_code=400, detail=message)
        ValueError.__init__(self, message)

    def __str__(self) -> str:
        return self.detail


# Reset arguments that are strings. A client may send anything in their place; each is checked
# before it reaches the engine or a reply: a short printable string or null (a lone surrogate is
# not printable, and could not be encoded in any reply that echoed it).
MAX_TEXT_CHARS = 128
TEXT_ARGUMENTS = {
    "family": catalog.ALL_FAMILIES,
    "difficulty": catalog.DIFFICULTIES,
    "archetype_mix": catalog.ALL_MIXES,
    "split": tuple(SPLITS),
    "token": None,  # the operator's credential for one evaluation task (splits.task_token)
}

# A Task API spec of an evaluation task names no family, mix or seed: the mix names the workers'
# archetypes and the family the mechanism at work, which the episode's `state` keeps to itself
# until `done` for a task the server picked. What a client needs to play the task stays (id,
# split, index, difficulty, benchmark_version; the token comes from the operator).
HIDDEN_TASK_KEYS = frozenset({"family", "seed", "archetype_mix"})


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
        # The session's clock for the claim and idle bounds (session_guard.py): real play moves it.
        self.opened_at, self.last_play = time.monotonic(), None

    def _played(self) -> None:
        self.last_play = time.monotonic()
        played(self)

    def call_tool(self, tool_name: str, arguments: dict) -> dict:
        """MCP `tools/call`: the same step as a WebSocket action, returned as plain data (tools only).
        The arguments come as one dict, so that no tool argument can collide with a parameter here."""
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
        _check_reset_arguments(episode_id, kwargs)
        if seed is not None:
            kwargs["seed"] = seed
        try:  # a ValueError / IndexError names the valid values
            self._episode, self._picked_by_server = start_episode(kwargs, TASKS)
        except (ValueError, IndexError) as exc:
            raise BadRequestError(str(exc)) from None
        self.rubric.reset()
        self._episode_id, self._steps = episode_id or str(uuid.uuid4()), 0
        self._played()
        # The reset's reward is the opening reward (a missed deadline until the release ships; rewards.py).
        ep = self._episode
        return ReleaseOpsObservation(
            text=ep.initial_observation, done=False, reward=ep.opening_reward, episode_return=ep.episode_return
        )

    # OpenEnv's Task API (TaskProvider): served as /releaseops_arena/splits, /tasks, ...
    def list_splits(self) -> list[dict]:
        return TASKS.list_splits()

    def list_tasks(self, split: str) -> list[dict]:
        return [_public_task(task) for task in _task_call(TASKS.list_tasks, split)]

    def num_tasks(self, split: str) -> int:
        return _task_call(TASKS.num_tasks, split)

    def get_task(self, split: str, index: int) -> dict:
        return _public_task(_task_call(TASKS.get_task, split, index))

    def get_task_range(self, split: str, start: Optional[int] = None, stop: Optional[int] = None) -> list[dict]:
        return [_public_task(task) for task in _task_call(TASKS.get_task_range, split, start, stop)]

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
        self._played()
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
        raise BadRequestError(str(exc)) from None


def _public_task(task: dict) -> dict:
    """A task spec as the Task API serves it: an evaluation task's family, mix and seed left out
    (on every server, private or public: the state hides them until done on both; train stays open)."""
    if task["split"] not in EVALUATION_SPLITS:
        return task
    return {key: value for key, value in task.items() if key not in HIDDEN_TASK_KEYS}


def _check_reset_arguments(episode_id: object, kwargs: dict) -> None:
    """Refuse a reset argument of the wrong type or size before it reaches the engine or a reply."""
    unknown = sorted(kwargs.keys() - RESET_KEYS)
    if unknown:
        raise BadRequestError(
            f"unknown reset argument {_shown(unknown[0])}; valid: seed, episode_id, "
            f"{', '.join(key for key in SCENARIO_KEYS if key != 'seed')}, {', '.join(TASK_KEYS)}"
        )
    if episode_id is not None and not _short_text(episode_id):
        raise BadRequestError(
            f"episode_id must be a string of at most {MAX_TEXT_CHARS} printable characters, or null for a "
            f"new id; got {_described(episode_id)}"
        )
    for key, valid in TEXT_ARGUMENTS.items():
        value = kwargs.get(key)
        if value is None or _short_text(value) and (valid is not None or value.isascii()):
            continue
        if valid is None:  # the token: the operator's 32 hex digits
            raise BadRequestError(
                f"token must be the task's token (a string of at most {MAX_TEXT_CHARS} printable ASCII "
                f"characters, from the operator); got {_described(value)}"
            )
        # The engine's wording for an unknown value, so that a remote client reads what a local one does.
        raise BadRequestError(f"unknown {key} {_shown(value)}; valid: {', '.join(valid)}")
    index = kwargs.get("index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, numbers.Integral)):
        raise BadRequestError(f"task index must be an int in 0..{TASKS_PER_SPLIT - 1}, not {_shown(index)}")


def _short_text(value: object) -> bool:
    return type(value) is str and len(value) <= MAX_TEXT_CHARS and value.isprintable()


def _shown(value: object) -> str:
    """A value as an error message may quote it: its repr (escaped, ASCII-safe), at most 40 characters."""
    text = ascii(value) if type(value) in (str, int, float, bool) or value is None else f"<{_described(value)}>"
    return text if len(text) <= 40 else text[:37] + "..."


def _described(value: object) -> str:
    """What a JSON value is, without quoting it."""
    if type(value) is str:
        count = f"{len(value)} character" + ("" if len(value) == 1 else "s")
        return f"a string of {count}" + ("" if value.isprintable() else ", not all printable")
    names = {dict: "an object", list: "an array", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
