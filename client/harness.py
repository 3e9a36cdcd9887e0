"""OpenEnv harness sessions: ReleaseOps episodes for `openenv.core.harness`, remote or in process.

OpenEnv's harness (`CollectRunner`, `build_harness_rollout_func`, TRL's async GRPO
`HarnessRolloutWorker`) plays each episode through a `ResourceSession` that a
`ResourceSessionFactory` makes (`openenv/core/harness/rollout.py`; OpenEnv's
`envs/openspiel_env/harness.py` is the same shape)::

    from openenv.core.harness import MCPHarnessAdapter
    from openenv.core.harness.collect import CollectRunner, RolloutSerializer
    from releaseops_arena.client.harness import ReleaseOpsSessionFactory

    factory = ReleaseOpsSessionFactory("http://127.0.0.1:8000")  # ReleaseOpsSessionFactory() plays in process
    tasks = [{"split": "heldout_seeds", "index": i} for i in range(8)]
    CollectRunner(session_factory=factory, harness_adapter=MCPHarnessAdapter(),
                  serializer=RolloutSerializer("data/harness"), tasks=tasks).run(model_step=step, num_episodes=8)

A session wraps one TRL env (`ReleaseOpsToolEnv` in process, `RemoteReleaseOpsToolEnv` on a
server), so the model sees the same brief, board, seven tools and result strings as TRL's
`environment_factory`. The harness scores an episode by the last tool result's
`metadata["reward"]` (`_resolve_env_reward`, which refuses a `verify()` that disagrees), so
each result reports the episode's running return, not the step's reward. `verify()` ends an
unfinished episode the way the remote env does (`get_reward`: the `end_episode` control
action on a server, `Episode.abandon` in process), which pays the discoveries; it forwards
the verified return and writes it into the last result it returned, so that the harness
reads the same number. `close()` ends an episode nobody verified, then closes its session.

A task is a mapping (a task `split`/`index`/`difficulty`, a scenario, or a dataset row). A
trainer that passes a chat prompt instead (`build_harness_rollout_func`) gets the factory's
`tasks` in turn, each `group_size` times (a GRPO group shares its task); without `tasks`,
`seed` (TRL's async worker passes the group id) is an index into the train split.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Mapping
from typing import Any, Iterable, Optional, Sequence

from openenv.core.env_server.mcp_types import Tool
from openenv.core.harness import ResourceSession, ResourceSessionFactory, ToolResult, VerifyResult

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.brief import with_board
from releaseops_arena.tools import TOOL_NAMES, tool_schemas

from .errors import SessionLostError
from .factory import make_remote_env_factory

# The seven tools as MCP `Tool`s, from the same schemas TRL derives and MCP serves.
TOOLS = [
    Tool(name=s["function"]["name"], description=s["function"]["description"], input_schema=s["function"]["parameters"])
    for s in tool_schemas()
]


class ReleaseOpsSession(ResourceSession):
    """One episode: `env` (a `ReleaseOpsToolEnv` or `RemoteReleaseOpsToolEnv`) reset to `task`."""

    def __init__(self, env: Any, task: Mapping[str, Any]):
        self.env, self.task = env, dict(task)
        self._closed = False
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
        if name not in TOOL_NAMES:  # TRL answers an unknown tool without calling the env: no charge
            text = error = f"unknown tool {name!r}; valid: {', '.join(TOOL_NAMES)}"
        else:
            try:
                text = getattr(self.env, name)(**arguments)
            except (ValueError, TypeError) as exc:  # the engine's refusal, or arguments the tool does not take
                text = error = str(exc)
        self._last = ToolResult(data=text, done=bool(self.env.done), metadata={"reward": self.env.reward}, error=error)
        return self._last

    def verify(self, transcript: list[dict], final_state: Any = None) -> VerifyResult:
        """The verified return (None if a remote session was lost: unscorable), the episode ended first."""
        reward = self.env.get_reward()
        if reward is not None and self._last is not None:
            self._last.metadata["reward"] = reward  # what ending paid (the discoveries) joins the last result
        metrics = dict(self.env.metrics)
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
    or, without URLs, in process. `client_options` are `make_remote_env_factory`'s."""

    def __init__(
        self,
        base_urls: str | Sequence[str] | None = None,
        *,
        tasks: Optional[Iterable[Mapping[str, Any]]] = None,
        group_size: int = 1,
        **client_options: Any,
    ):
        self.env_factory = make_remote_env_factory(base_urls, **client_options) if base_urls else ReleaseOpsToolEnv
        self.tasks = [dict(task) for task in tasks] if tasks is not None else None
        self.group_size = max(1, int(group_size))
        self._count, self._lock = itertools.count(), threading.Lock()

    def create(
        self, task: Any = None, seed: Optional[int] = None, episode_id: Optional[str] = None
    ) -> ReleaseOpsSession:
        env = self.env_factory()
        try:
            return ReleaseOpsSession(env, self._task(task, seed))
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
