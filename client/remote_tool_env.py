"""`RemoteReleaseOpsToolEnv`: the TRL `environment_factory` class backed by a server.

It is the remote twin of the in-process `ReleaseOpsToolEnv`: the same seven
tools (inherited from `SupervisorTools`, so names, signatures and docstrings,
hence TRL's JSON schemas, are shared), the same `reset(**dataset_row)`, and the
same instance state (`reward` = episode return so far, `done`, `terminated`,
`truncated`, `metrics`), with identical strings, rewards and metrics for
identical calls. `metrics`, `terminated` and `truncated` come from the server's
`state` once the episode is over, fetched once, when first read (replies carry
no end-of-episode record: a trainer that only needs the reward pays nothing).
Each instance owns one WebSocket session, opened lazily on the first `reset`::

    from releaseops_arena.client import check_capacity, remote_sessions

    urls = ["https://me-releaseops-1.hf.space", "https://me-releaseops-2.hf.space"]
    check_capacity(urls, generation_batch_size=64)        # fail fast, before loading a model
    with remote_sessions(urls) as factory:                # closes every session at exit
        trainer = GRPOTrainer(..., environment_factory=factory)
        trainer.train()

or `GRPOTrainer(environment_factory=RemoteReleaseOpsToolEnv)` with
`RELEASEOPS_ENV_URL=https://a,https://b` in the environment, and `close_all()`
at the end. Sessions are spread round-robin over the URLs (Space replicas).

TRL turns every public function of the class into a tool except `reset` and
`get_reward`, so those two and the seven tools are the only public methods;
the plumbing lives in sibling modules (`session`, `loop`, `registry`,
`capacity`). The factories (`factory`) build on this class; this module never imports them,
so there is no import cycle. `get_reward` ends an episode the model left
unfinished on the server (the `end_episode` control action), which scores it.

Connection handling (`session.py`):
- All sessions of a process share one background event loop thread, so the
  WebSocket keepalive (pings every 20 s, pong timeout 120 s) keeps running
  while the model generates; replies may take up to `message_timeout_s`
  (300 s by default).
- A lost session is detected on the next call. A tool call then raises
  `SessionLostError` (a RuntimeError: the episode is gone with its server
  session) whose `code` says how (`SESSION_CLOSED`: the server's idle reaper
  freed it; `CONNECTION_LOST`; `CLIENT_CLOSED`: `close_all()`), and
  `session_error` says why; the next `reset` reconnects transparently and
  keeps retrying a server that went away for `reconnect_timeout_s` (120 s).
- An invalid call raises `ValueError` with the server's message, exactly like
  the local env.
"""

from __future__ import annotations

from typing import Any, Optional

from releaseops_arena.catalog import END_EPISODE
from releaseops_arena.splits import reset_arguments
from releaseops_arena.tools import SupervisorTools

from .errors import ServerError, SessionLostError
from .models import ReleaseOpsAction
from .session import DEFAULT_RECONNECT_TIMEOUT_S, ReconnectingSession, SessionOptions
from .urls import next_env_url, parse_urls

_NO_EPISODE = "no episode is running; call reset() first"  # the local env's message, verbatim


class RemoteReleaseOpsToolEnv(SupervisorTools):
    """Release supervision over a ReleaseOps Arena server, one WebSocket session per instance.

    `RemoteReleaseOpsToolEnv()` picks its server from `RELEASEOPS_ENV_URL`
    (comma-separated URLs are used round-robin); `make_remote_env_factory`
    binds URLs and client options. `reconnect_timeout_s` is how long a `reset`
    keeps retrying (with backoff) to reach a server it was connected to before,
    e.g. a Space that restarts; a first connection fails at once. Other keyword
    arguments are connection options, named as in `ReleaseOpsEnv`:
    `connect_timeout_s`, `message_timeout_s`, `max_message_size_mb`,
    `websocket_ping_interval_s`, `websocket_ping_timeout_s`, `headers`.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        *,
        reconnect_timeout_s: float = DEFAULT_RECONNECT_TIMEOUT_S,
        **client_options: Any,
    ):
        self.base_url = parse_urls(base_url)[0] if base_url is not None else next_env_url()
        self.reward = 0.0
        self.done = False
        self._record: Optional[dict] = None  # the server's state once the episode is over, fetched on first use
        self._cut = False  # the session was lost before the episode ended
        # Why the running episode's session was lost (None while it is fine);
        # `get_reward` then returns None, so that TRL drops the rollout.
        self.session_error: Optional[str] = None
        self._lost: Optional[SessionLostError] = None
        self._link = ReconnectingSession(
            self.base_url, SessionOptions.from_kwargs(**client_options), reconnect_timeout_s
        )
        self._episode_running = False

    # ---- TRL entry points

    def reset(self, **kwargs: Any) -> str:
        """Start an episode from dataset columns: a task (`split`, `index`, optional `difficulty`)
        or a scenario (`family`, `seed`, `difficulty`, `archetype_mix`; missing ones take the
        catalogue defaults). Other columns, such as `prompt`, are ignored. Opens the WebSocket
        session on first use and reconnects if the previous one was lost.
        """
        result = self._link.reset(reset_arguments(kwargs))  # a task or a scenario, as in-process
        observation = result.observation
        self.reward = float(observation.episode_return)
        self.done = bool(result.done)
        self._record, self._cut = None, False
        self._episode_running = True
        self.session_error, self._lost = None, None
        return observation.text

    def get_reward(self) -> Optional[float]:
        """The verified episode return. An episode still running is ended on the server (TRL calls this
        once per rollout, after the model stopped calling tools), which scores it as in-process.

        A rollout whose session was lost cannot be scored (the server held the episode): None, which
        TRL treats as unscorable (the rollout gets no advantage) instead of a made-up return."""
        if self._episode_running and not self.done and self._lost is None:
            try:
                self._call_tool(END_EPISODE)
            except SessionLostError:
                pass
        if self._lost is not None and not self.done:
            self._cut = True
            return None
        return self.reward

    # ---- the end-of-episode record, as in-process (attributes there, read from `state` here)

    @property
    def metrics(self) -> dict:
        """The episode's metrics once it is over ({} before, or if its session was lost)."""
        return dict(self._final_state().get("metrics") or {})

    @property
    def terminated(self) -> bool:
        return bool(self.metrics.get("terminated"))

    @property
    def truncated(self) -> bool:
        return self._cut or bool(self.metrics.get("truncated"))

    def _final_state(self) -> dict:
        if not self.done:
            return {}
        if self._record is None:
            try:
                self._record = self._link.state()
            except (SessionLostError, ServerError):
                self._record = {}
        return self._record

    # ---- the seven tools come from SupervisorTools and land here

    def _call_tool(self, tool_name: str, **arguments: Any) -> str:
        if self._lost is not None:
            raise SessionLostError(str(self._lost), self._lost.code, self._lost.reason)
        if not self._episode_running:
            raise ValueError(_NO_EPISODE)
        try:
            result = self._link.step(ReleaseOpsAction(tool_name=tool_name, arguments=arguments))
        except SessionLostError as exc:
            self._lost, self.session_error, self._episode_running = exc, exc.reason, False
            raise
        except ServerError as exc:
            raise RuntimeError(f"server refused {tool_name}: {exc}") from None
        observation = result.observation
        self.reward = float(observation.episode_return)
        self.done = bool(result.done)
        if observation.error is not None:
            raise ValueError(observation.error)
        return observation.text
