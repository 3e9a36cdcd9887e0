"""OpenEnv `Environment` adapter: one WebSocket session, one `Episode`.

No game logic lives here: the engine's `Episode` decides everything; this
class only translates between it and OpenEnv's typed wire models.
"""

from __future__ import annotations

import uuid
from typing import Any, Optional

from openenv.core import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from releaseops_arena import catalog
from releaseops_arena.episode import Episode, EpisodeOver
try:
    from ..client.models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState
except ImportError:  # run from the repo root as `server.app` (OpenEnv's own template does the same)
    from client.models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState

from .mcp_tools import SessionToolServer

SCENARIO_KEYS = tuple(catalog.DEFAULT_SCENARIO)
END_EPISODE = catalog.END_EPISODE  # a control action, not a tool (see catalog)


class ReleaseOpsEnvironment(Environment):
    """Release supervision episodes over OpenEnv; safe to run one per session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._episode: Episode | None = None
        self._episode_id: str | None = None
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
        if self._closed:
            raise RuntimeError("this session was closed (idle timeout); open a new connection and reset")

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> ReleaseOpsObservation:
        self._check_open()
        unknown = sorted(set(kwargs) - set(SCENARIO_KEYS))
        if unknown:
            raise ValueError(f"unknown reset argument {unknown[0]!r}; valid: seed, episode_id, {', '.join(SCENARIO_KEYS[i] for i in (0, 2, 3))}")
        config = dict(catalog.DEFAULT_SCENARIO)
        config.update({k: v for k, v in kwargs.items() if v is not None})
        if seed is not None:
            config["seed"] = seed
        self._episode = Episode(**config)  # raises ValueError listing valid values
        self._episode_id, self._steps = episode_id or str(uuid.uuid4()), 0
        return ReleaseOpsObservation(text=self._episode.initial_observation, board=self._episode.board(),
                                     done=False, reward=0.0)

    def step(self, action: ReleaseOpsAction, timeout_s: Optional[float] = None, **kwargs: Any) -> ReleaseOpsObservation:  # type: ignore[override]
        return self._apply(action, control=True)

    def _apply(self, action: ReleaseOpsAction, control: bool) -> ReleaseOpsObservation:
        """One step; `control` allows END_EPISODE (the WebSocket step does, an MCP tool call does not:
        the engine then refuses it as an unknown tool)."""
        self._check_open()
        ep = self._episode
        if ep is None:
            return ReleaseOpsObservation(text="no episode is running; send reset first",
                                         error="no episode is running; send reset first", done=False, reward=0.0)
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
        return self._observation(result.text, result.reward, error=result.error)

    def _observation(self, text: str, reward: float, error: str | None) -> ReleaseOpsObservation:
        ep = self._episode
        metadata: dict[str, Any] = {}
        if ep.done:
            # The truth may be told once the episode is over.
            metadata = {"metrics": ep.metrics(), "audit": ep.audit, "scenario": ep.config}
        return ReleaseOpsObservation(text=text, board=ep.board(), error=error, outcome=ep.outcome,
                                     episode_return=ep.episode_return, done=ep.done, reward=reward,
                                     metadata=metadata)

    @property
    def state(self) -> ReleaseOpsState:
        # Built on request: validated pydantic assignments on every step cost more
        # than the engine's step itself.
        ep = self._episode
        if ep is None:
            return ReleaseOpsState(episode_id=self._episode_id, step_count=self._steps)
        return ReleaseOpsState(episode_id=self._episode_id, step_count=self._steps, **ep.config,
                               phase=catalog.PHASES[ep.world.stage], review_budget_remaining=ep.world.budget_left,
                               episode_return=ep.episode_return, done=ep.done, outcome=ep.outcome)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="releaseops_arena",
            description="Supervise specialist release agents under a review budget and three safety rules.",
            version="0.1.0",
        )
