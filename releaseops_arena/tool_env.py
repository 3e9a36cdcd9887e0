"""`ReleaseOpsToolEnv`: the class TRL's `environment_factory` instantiates.

TRL turns every public method into a tool, so the only public methods are
`reset` and the seven inherited supervisor tools; state lives on the instance
(`reward` is the episode return so far, `done`, `metrics`).
"""

from __future__ import annotations

from . import catalog
from .episode import Episode
from .tools import SupervisorTools


class ReleaseOpsToolEnv(SupervisorTools):
    """In-process release supervision environment with the seven supervisor tools."""

    def __init__(self):
        self._episode: Episode | None = None
        self.reward = 0.0
        self.done = False
        self.metrics: dict = {}

    def reset(self, **kwargs) -> str:
        """Start an episode from dataset columns (`family`, `seed`, `difficulty`, `archetype_mix`).

        Other columns, such as `prompt` and `split`, are ignored. Missing ones
        take the catalogue defaults.
        """
        self._episode = Episode(**catalog.scenario_config(kwargs))
        self.reward = 0.0
        self.done = False
        self.metrics = {}
        return self._episode.initial_observation

    def _abandon(self) -> None:
        """End an episode the policy stopped playing (scored as a missed deadline)."""
        self._episode.abandon()
        self.reward, self.done, self.metrics = self._episode.episode_return, True, self._episode.metrics()

    def _call_tool(self, tool_name: str, **arguments: str) -> str:
        if self._episode is None:
            raise ValueError("no episode is running; call reset() first")
        result = self._episode.step(tool_name, arguments)  # raises EpisodeOver (a ValueError) after the end
        self.reward = self._episode.episode_return
        self.done = result.done
        if result.done:
            self.metrics = self._episode.metrics()
        if result.error is not None:
            raise ValueError(result.error)
        return result.text
