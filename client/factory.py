"""Factories of remote envs for TRL's `environment_factory`, spread round-robin over server replicas."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Sequence

from . import registry
from .capacity import check_capacity
from .remote_tool_env import RemoteReleaseOpsToolEnv
from .session import DEFAULT_RECONNECT_TIMEOUT_S, SessionOptions
from .urls import RoundRobin, parse_urls, urls_from_env


class RemoteEnvFactory:
    """Zero-argument callable for TRL's `environment_factory`: one new session per call, round-robin over URLs."""

    def __init__(
        self,
        base_urls: str | Sequence[str],
        *,
        reconnect_timeout_s: float = DEFAULT_RECONNECT_TIMEOUT_S,
        **client_options: Any,
    ):
        self.base_urls = parse_urls(base_urls)
        self.reconnect_timeout_s = reconnect_timeout_s
        self.client_options = dict(client_options)
        SessionOptions.from_kwargs(**self.client_options)  # reject bad options now, not at the first reset
        self._rotation = RoundRobin(self.base_urls)

    # Pickling. TRL's async GRPO trainer (trl/experimental/async_grpo, TRL 1.16) passes
    # `environment_factory` among the keyword arguments of its rollout loop to a child process
    # started with the "spawn" context: `AsyncRolloutWorker.start()` checks `pickle.dumps` of those
    # kwargs, the child unpickles them and `_AsyncRolloutLoop.__init__` calls the factory there
    # (a probe instance, then one per concurrent rollout). The parent never calls the factory.
    # So what travels is the factory, never an env or a session: its URLs, `reconnect_timeout_s`
    # and client options. The round-robin (and its lock) is rebuilt and starts again at the first
    # URL. Sessions are tracked per process (`registry`, keyed by the factory object), so an
    # unpickled copy owns none: `close()` or `close_all()` in the child closes the child's
    # sessions, and the parent's `close_all()` cannot reach them.
    def __getstate__(self) -> dict:
        return {
            "base_urls": self.base_urls,
            "reconnect_timeout_s": self.reconnect_timeout_s,
            "client_options": self.client_options,
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["base_urls"], reconnect_timeout_s=state["reconnect_timeout_s"], **state["client_options"])

    def __call__(self) -> RemoteReleaseOpsToolEnv:
        env = RemoteReleaseOpsToolEnv(
            base_url=self._rotation.next(), reconnect_timeout_s=self.reconnect_timeout_s, **self.client_options
        )
        env._link.group = self
        return env

    def close(self, timeout_s: float = registry.CLOSE_TIMEOUT_S) -> int:
        """Close the sessions of the instances this factory made; returns how many were open."""
        return registry.close_sessions(self, timeout_s)

    def __repr__(self) -> str:
        return f"RemoteEnvFactory({list(self.base_urls)!r})"


def make_remote_env_factory(base_urls: str | Sequence[str] | None = None, **client_options: Any) -> RemoteEnvFactory:
    """A zero-argument factory of `RemoteReleaseOpsToolEnv` for `GRPOTrainer(environment_factory=...)`.

    Args:
        base_urls: One URL, a comma-separated string or a list (Space replicas);
            defaults to `RELEASEOPS_ENV_URL`. Sessions are spread round-robin.
        **client_options: `reconnect_timeout_s` (how long a reset retries a
            server that went away, default 120 s), and connection options named
            as in `ReleaseOpsEnv`: `connect_timeout_s`, `message_timeout_s`,
            `max_message_size_mb`, `websocket_ping_interval_s`,
            `websocket_ping_timeout_s`, `headers`
            (`{"Authorization": f"Bearer {token}"}` for a private Space).
    """
    return RemoteEnvFactory(base_urls if base_urls is not None else urls_from_env(), **client_options)


@contextlib.contextmanager
def remote_sessions(
    base_urls: str | Sequence[str] | None = None, *, generation_batch_size: Optional[int] = None, **client_options: Any
) -> Iterator[RemoteEnvFactory]:
    """Yield a factory; close every session it opened on exit (also on errors).

    With `generation_batch_size`, `check_capacity` runs first.
    """
    factory = make_remote_env_factory(base_urls, **client_options)
    if generation_batch_size is not None:
        check_capacity(factory.base_urls, generation_batch_size, headers=client_options.get("headers"))
    try:
        yield factory
    finally:
        factory.close()
