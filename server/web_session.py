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

from .limits import setting

# --- The board's limits (docs/server.md, "Limits"): what one visitor, or all of them, may hold ------
# Enforced by server/web_app.py (the queue, the upload route, the session sweep) and server/web_ui.py.
#
# Gradio keeps one session per session hash (a copy of the page's config, ~100 KB, plus its gr.State
# values) and would keep 10,000 of them; a client mints a hash per request at no cost. Least recently
# used sessions beyond this many are dropped: a few hundred visitors at once is far more than a demo
# board sees, and 300 sessions cost ~30 MB plus their episodes and Watch transcripts.
WEB_MAX_SESSIONS = setting("WEB_MAX_SESSIONS", "300", int, 1)
# A session not used for this long is dropped with its episode (and each gr.State value expires this
# long after it was last set): an hour covers a visitor reading the board, not one who left.
WEB_SESSION_IDLE_S = setting("WEB_SESSION_IDLE_S", "3600", float, 1)
# Gradio's worker threads for every handler of the board (its `max_threads`; Gradio's default is 40).
# Handlers are CPU-bound Python: more threads only take the GIL from the event loop that also serves
# the agents' /ws sessions. Two: one heavy job (below) and one Play click can run at once.
WEB_WORKER_THREADS = 2
# Heavy events (Watch's six policies, reading an upload, a replay: 0.1-0.5 s each) share one queue
# that runs one job at a time. A session may have two heavy jobs queued or running (one running, the
# next waiting: the page itself sends one pick of the episode menu twice), a client address
# WEB_HEAVY_PER_CLIENT, and the heavy queue WEB_HEAVY_QUEUE_MAX jobs in all: a job beyond these is
# refused at once with a message (HTTP 429), so a new visitor waits for at most that many jobs.
WEB_HEAVY_PER_SESSION = 2
WEB_HEAVY_PER_CLIENT = 4
WEB_HEAVY_QUEUE_MAX = 8
# Any queued event (a Play click included): per session and per client address at once, and Gradio's
# queue length (`max_size`, refused with 503). A browser sends one event per click and waits for it.
WEB_EVENTS_PER_SESSION = 4
WEB_EVENTS_PER_CLIENT = 16
WEB_QUEUE_MAX = 64
# Uploaded files (each at most web_replay.MAX_BYTES): a client address keeps its newest
# WEB_UPLOADS_PER_CLIENT (an older one is deleted), the server WEB_UPLOADS_MAX in all (an upload
# beyond is refused with 429 until one expires), and every upload is deleted WEB_UPLOAD_TTL_S after
# it arrived: at most WEB_UPLOADS_MAX x 5 MiB on disk. A replay re-reads its file, so the TTL is
# also how long a visitor may keep picking episodes of one upload.
WEB_UPLOADS_PER_CLIENT = 3
WEB_UPLOADS_MAX = 30
WEB_UPLOAD_TTL_S = setting("WEB_UPLOAD_TTL_S", "1800", float, 1)


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
