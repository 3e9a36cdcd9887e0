"""One browser session of the Release board: its own engine `Episode` and what its visitor has seen.

A session lives in the page's `gr.State`, so two visitors never share one, and
it plays in-process: it never takes one of the server's WebSocket training
slots. What the visitor has seen is read from the observation and the tool
results by the engine's one reader (`rendering.View`), as a policy reads them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from releaseops_arena.episode import Episode, StepResult
from releaseops_arena.rendering import View


@dataclass
class Session:
    episode: Episode
    view: View
    title: str
    story: str = ""
    hours0: int = 0  # the clock and budget at the start, the meters' full scale
    budget0: int = 0
    last_reward: float = 0.0

    @classmethod
    def start(cls, scenario: dict, title: str, story: str = "") -> "Session":
        """A new episode; the engine refuses a bad scenario with a ValueError naming the valid values."""
        episode = Episode(**scenario)
        board = episode.board()
        # The reset's reward, the opening reward: a release counts as a missed deadline until it ships.
        return cls(
            episode,
            View(json.loads(episode.initial_observation)),
            title,
            story,
            board["hours_to_deadline"],
            board["review_budget_remaining"],
            episode.opening_reward,
        )

    def board(self) -> dict:
        """The public board now, as the engine renders it."""
        return self.episode.board()

    def step(self, tool: str, args: dict) -> StepResult:
        """One call through the engine (`EpisodeOver` after the end); the reader takes what it returned."""
        result = self.episode.step(tool, args)
        self.last_reward = result.reward
        if result.error is None:
            self.view.update(json.loads(result.text))
        return result
