"""`ReleaseOpsToolEnv`: the class TRL's `environment_factory` instantiates.

TRL turns every public method into a tool except `reset` and `get_reward`, so
those two and the seven inherited supervisor tools are the only public methods;
state lives on the instance (`reward` is the episode return so far, `done`,
`terminated`, `truncated`, `metrics`). `get_reward` lets the environment own
its reward: `GRPOTrainer(environment_factory=ReleaseOpsToolEnv)` needs no
`reward_funcs`.
"""

from __future__ import annotations

from .episode import Episode
from .splits import ReleaseTasks, start_episode
from .tools import SupervisorTools

_PUBLIC_TASKS = ReleaseTasks()


class ReleaseOpsToolEnv(SupervisorTools):
    """In-process release supervision environment with the seven supervisor tools."""

    def __init__(self):
        self._episode: Episode | None = None
        self.reward = 0.0
        self.done = False
        self.terminated = False
        self.truncated = False
        self.metrics: dict = {}

    @property
    def episode(self) -> Episode | None:
        """The running engine `Episode` (None before the first reset), for in-process tooling such as a
        privileged policy's truth reader. A property, so TRL does not offer it to a model as a tool."""
        return self._episode

    def reset(self, **kwargs) -> str:
        """Start an episode from dataset columns: a task (`split`, `index`, optional `difficulty`)
        or a scenario (`family`, `seed`, `difficulty`, `archetype_mix`; missing ones take the
        catalogue defaults). Other columns, such as `prompt`, are ignored. In-process worlds are
        the public draw: the evaluation secret is a server's (splits.ReleaseTasks).
        """
        self._episode, _ = start_episode(kwargs, _PUBLIC_TASKS)
        self.reward = self._episode.episode_return  # the opening reward: a missed deadline until it ships
        self.done = self.terminated = self.truncated = False
        self.metrics = {}
        return self._episode.initial_observation

    def get_reward(self) -> float:
        """The verified episode return. An episode still running is cut here (the policy stopped
        calling tools) and scored by the engine as a missed deadline; TRL calls this once per rollout."""
        if self._episode is None:
            raise ValueError("no episode is running; call reset() first")
        if not self._episode.done:
            self._abandon()
        return self.reward

    def _abandon(self) -> None:
        """End an episode the policy stopped playing (truncated, scored as a missed deadline)."""
        self._episode.abandon()
        self._sync()

    def _sync(self) -> None:
        ep = self._episode
        self.reward, self.done = ep.episode_return, ep.done
        self.terminated, self.truncated = ep.terminated, ep.truncated
        if ep.done:
            self.metrics = ep.metrics()

    def _call_tool(self, tool_name: str, **arguments: str) -> str:
        if self._episode is None:
            raise ValueError("no episode is running; call reset() first")
        result = self._episode.step(tool_name, arguments)  # raises EpisodeOver (a ValueError) after the end
        self._sync()
        if result.error is not None:
            raise ValueError(result.error)
        return result.text
