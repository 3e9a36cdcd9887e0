"""The reward as an OpenEnv rubric tree (RFC 004): one named child per part of the reward table.

    episode_return              the sum of its children: the verified return so far
    ├── outcome                 safe ship +1, unsafe ship -1, missed deadline -0.6 (-0.6 at the reset,
    │                           the difference at the end)
    ├── budget                  -0.05 per review budget unit spent
    ├── invalid_calls           -0.25 per invalid call
    └── discoveries             +0.2 per latent violation revealed (paid at the end)

The server scores an episode's public reward counters (`Episode.reward_counters()`)
once, when it ends, so each node's `last_score` is the episode's total of that
part (None while an episode runs); the reset's reward (the opening reward, all
of it `outcome`: `rewards.opening_parts()`) and the engine's step rewards add up
to the same totals, and each audit entry carries its step's share (`reward_parts`). The arithmetic is the
engine's (`rewards.PARTS`): this module only gives it OpenEnv's shape.
(OpenEnv's `WeightedSum` needs weights summing to 1; the parts add with weight 1.)
"""

from __future__ import annotations

from typing import Any

from openenv.core.rubrics import Rubric

from releaseops_arena import rewards


class RewardPart(Rubric):
    """One line of the reward table times the count of its event."""

    def __init__(self, name: str):
        super().__init__()
        self.part = rewards.PARTS[name]

    def forward(self, action: Any, counters: dict) -> float:
        return round(self.part(counters), 6)


class EpisodeReturn(Rubric):
    """The root: the sum of the parts, which is the episode return."""

    def __init__(self):
        super().__init__()
        for name in rewards.PARTS:
            setattr(self, name, RewardPart(name))

    def forward(self, action: Any, counters: dict) -> float:
        return round(sum(child(action, counters) for child in self.children()), 6)

    def breakdown(self) -> dict[str, float]:
        """Each part's `last_score`: the per-part totals of the last scored episode."""
        return {name: child.last_score for name, child in self.named_children()}

    def reset(self) -> None:
        """Forget the last episode's scores (a new one starts)."""
        for rubric in (self, *self.rubrics()):
            object.__setattr__(rubric, "last_score", None)
