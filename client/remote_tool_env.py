"""`RemoteReleaseOpsToolEnv`: the TRL `environment_factory` class backed by a server.

It is the remote twin of the in-process `ReleaseOpsToolEnv`: the same seven
tools (inherited from `SupervisorTools`, so names, signatures and docstrings,
hence TRL's JSON schemas, are shared), the same `reset(**dataset_row)`, and the
same instance state (`reward` = episode return so far, `done`, `terminated`,
`truncated`, `metrics`), with
identical strings, rewards and metrics for identical calls. Each instance owns
one WebSocket session, opened lazily on the first `reset`::

    from client import make_remote_env_factory, remote_sessions, check_capacity

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
everything else is private or a module-level function (`close_all`,
`remote_sessions`, ...). `get_reward` ends an episode the model left
unfinished on the server (the `end_episode` control action), which scores it.

Connection handling:
- All sessions of a process share one background event loop thread, so the
  WebSocket keepalive (pings every 20 s, pong timeout 120 s) keeps running
  while the model generates; replies may take up to `message_timeout_s`
  (300 s by default).
- A dropped connection is detected on the next call. A tool call then raises
  `SessionLostError` (a RuntimeError: the episode is gone with its server
  session) and `session_error` says why; the next `reset` reconnects
  transparently, also after the server's idle reaper closed the session, and
  keeps retrying a server that went away for `reconnect_timeout_s` (120 s).
- An invalid call raises `ValueError` with the server's message, exactly like
  the local env.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import ipaddress
import itertools
import json
import os
import threading
import time
import urllib.error
import urllib.request
import weakref
from typing import Any, Iterator, Optional, Sequence
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.protocol import State as _WsState

from releaseops_arena import catalog
from releaseops_arena.catalog import END_EPISODE
from .models import ReleaseOpsAction
from releaseops_arena.tools import SupervisorTools

from .releaseops_client import ReleaseOpsEnv, parse_server_error

ENV_URL_VAR = "RELEASEOPS_ENV_URL"
_NO_EPISODE = "no episode is running; call reset() first"  # the local env's message, verbatim
_CLOSE_TIMEOUT_S = 30.0
DEFAULT_RECONNECT_TIMEOUT_S = 120.0
# Network failures that end a session (ConnectionError, socket errors and
# TimeoutError are OSError subclasses on Python >= 3.10).
_NETWORK_ERRORS = (ConnectionClosed, OSError, asyncio.TimeoutError)


class SessionLostError(RuntimeError):
    """The WebSocket session of a running episode is gone; the next `reset()` opens a new one."""


class CapacityError(ValueError):
    """The servers cannot hold as many concurrent sessions as the run needs."""


# ---------------------------------------------------------------- URLs


def _parse_urls(base_urls: str | Sequence[str]) -> tuple[str, ...]:
    items = base_urls.split(",") if isinstance(base_urls, str) else list(base_urls)
    urls = tuple(u.strip().rstrip("/") for u in items if u and u.strip())
    if not urls:
        raise ValueError("no server URL given (pass base URLs or set RELEASEOPS_ENV_URL)")
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
            raise ValueError(f"not a server base URL: {url!r} (expected e.g. http://127.0.0.1:8000)")
    return urls


def _urls_from_env() -> tuple[str, ...]:
    value = os.environ.get(ENV_URL_VAR, "")
    if not value.strip():
        raise ValueError(f"set {ENV_URL_VAR} (comma-separated for several replicas), "
                         "or build instances with make_remote_env_factory(base_urls)")
    return _parse_urls(value)


class _RoundRobin:
    def __init__(self, urls: tuple[str, ...]):
        self.urls = urls
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            return self.urls[next(self._counter) % len(self.urls)]


_ENV_ROTATIONS: dict[tuple[str, ...], _RoundRobin] = {}
_ENV_ROTATIONS_LOCK = threading.Lock()


def _next_env_url() -> str:
    urls = _urls_from_env()
    with _ENV_ROTATIONS_LOCK:
        rotation = _ENV_ROTATIONS.setdefault(urls, _RoundRobin(urls))
    return rotation.next()


# ---------------------------------------------------------------- the shared loop


class _LoopThread:
    """One daemon thread running the event loop every remote session of this process lives on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._pid: Optional[int] = None

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive() and self._pid == os.getpid()
            if not alive:  # first use, or a forked child (the parent's thread does not exist here)
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=run, name="releaseops-remote-sessions", daemon=True)
                thread.start()
                if not ready.wait(timeout=10):
                    raise RuntimeError("could not start the remote-session event loop")
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def running(self) -> Optional[asyncio.AbstractEventLoop]:
        with self._lock:
            ok = self._thread is not None and self._thread.is_alive() and self._pid == os.getpid()
            return self._loop if ok else None

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.get())

    def run(self, coro, timeout: Optional[float] = None) -> Any:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("remote tool env methods are blocking; do not call them from its own event loop")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: EnvClient drops the socket rather than desync it
            raise


_LOOP = _LoopThread()


async def _await(fn, *args: Any, **kwargs: Any) -> Any:
    # EnvClient methods dispatch on the *calling* thread's loop, so they must be
    # called inside a coroutine running on the shared loop (async mode).
    return await fn(*args, **kwargs)


async def _close_quietly(client: ReleaseOpsEnv) -> None:
    with contextlib.suppress(Exception):
        await client.close()


# ---------------------------------------------------------------- registry

_REGISTRY_LOCK = threading.Lock()
_INSTANCES: "weakref.WeakSet[RemoteReleaseOpsToolEnv]" = weakref.WeakSet()
_PENDING_CLOSES: set[concurrent.futures.Future] = set()


def _close_in_background(client: ReleaseOpsEnv, pid: int) -> None:
    """Finalizer of a collected instance: close its session without blocking the collector."""
    if pid != os.getpid() or _LOOP.running() is None:
        return
    try:
        future = _LOOP.submit(_close_quietly(client))
    except RuntimeError:  # loop already stopped (interpreter shutdown)
        return
    with _REGISTRY_LOCK:
        _PENDING_CLOSES.add(future)
    future.add_done_callback(lambda f: _PENDING_CLOSES.discard(f))


def _close_sessions(group: object = None, timeout_s: float = _CLOSE_TIMEOUT_S) -> int:
    """Close the sessions of every tracked instance (of one factory when `group` is given)."""
    with _REGISTRY_LOCK:
        instances = [env for env in list(_INSTANCES) if group is None or env._group is group]
        pending = list(_PENDING_CLOSES)
    clients = [c for c in (env._detach_client("closed by close_all()") for env in instances) if c is not None]
    if clients and _LOOP.running() is not None:

        async def close_many() -> None:
            await asyncio.gather(*(_close_quietly(c) for c in clients))

        with contextlib.suppress(concurrent.futures.TimeoutError):
            _LOOP.run(close_many(), timeout=timeout_s)
    if pending:
        concurrent.futures.wait(pending, timeout=timeout_s)
    return len(clients)


def close_all(timeout_s: float = _CLOSE_TIMEOUT_S) -> int:
    """Close every remote session this process opened; returns how many were open.

    Instances stay usable: a tool call on a closed session raises
    `SessionLostError`, and the next `reset()` opens a new session. Also runs
    at interpreter exit.
    """
    return _close_sessions(None, timeout_s)


@atexit.register
def _close_all_at_exit() -> None:
    with contextlib.suppress(Exception):
        close_all(timeout_s=5.0)


# ---------------------------------------------------------------- the environment


class RemoteReleaseOpsToolEnv(SupervisorTools):
    """Release supervision over a ReleaseOps Arena server, one WebSocket session per instance.

    `RemoteReleaseOpsToolEnv()` picks its server from `RELEASEOPS_ENV_URL`
    (comma-separated URLs are used round-robin); `make_remote_env_factory`
    binds URLs and client options. `reconnect_timeout_s` is how long a `reset`
    keeps retrying (with backoff) to reach a server it was connected to before,
    e.g. a Space that restarts; a first connection fails at once. Other keyword
    arguments are `ReleaseOpsEnv` / OpenEnv `EnvClient` options
    (`message_timeout_s`, `headers`, ...).
    """

    def __init__(self, base_url: Optional[str] = None, *, reconnect_timeout_s: float = DEFAULT_RECONNECT_TIMEOUT_S,
                 **client_options: Any):
        self.base_url = _parse_urls(base_url)[0] if base_url is not None else _next_env_url()
        self.reward = 0.0
        self.done = False
        self.terminated = False
        self.truncated = False
        self.metrics: dict = {}
        # Why the running episode's session was lost (None while it is fine);
        # `get_reward` then returns None, so that TRL drops the rollout.
        self.session_error: Optional[str] = None
        self._reconnect_timeout_s = float(reconnect_timeout_s)
        self._connected_once = False
        self._client_options = dict(client_options)
        self._client: Optional[ReleaseOpsEnv] = None
        self._client_pid: Optional[int] = None
        self._finalizer: Optional[weakref.finalize] = None
        self._session_socket: Any = None  # the socket the running episode lives on
        self._episode_running = False
        self._group: object = None
        with _REGISTRY_LOCK:
            _INSTANCES.add(self)

    # ---- TRL entry point

    def reset(self, **kwargs: Any) -> str:
        """Start an episode from dataset columns (`family`, `seed`, `difficulty`, `archetype_mix`).

        Other columns, such as `prompt` and `split`, are ignored. Missing ones
        take the catalogue defaults. Opens the WebSocket session on first use
        and reconnects if the previous one was dropped.
        """
        config = catalog.scenario_config(kwargs)
        result = self._remote_reset(config)
        observation = result.observation
        self.reward = float(observation.episode_return)
        self.done = bool(result.done)
        self.terminated = self.truncated = False
        self.metrics = {}
        self._episode_running = True
        self.session_error = None
        return observation.text

    def get_reward(self) -> Optional[float]:
        """The verified episode return. An episode still running is ended on the server (TRL calls this
        once per rollout, after the model stopped calling tools), which scores it as in-process.

        A rollout whose session was lost cannot be scored (the server held the episode): None, which
        TRL treats as unscorable (the rollout gets no advantage) instead of a made-up return."""
        if self._episode_running and not self.done and self.session_error is None:
            try:
                self._call_tool(END_EPISODE)
            except SessionLostError:
                pass
        if self.session_error is not None and not self.done:
            self.truncated = True
            return None
        return self.reward

    # ---- the seven tools come from SupervisorTools and land here

    def _call_tool(self, tool_name: str, **arguments: Any) -> str:
        if self.session_error is not None:
            raise self._session_lost(self.session_error)
        if not self._episode_running:
            raise ValueError(_NO_EPISODE)
        client = self._client
        socket = self._socket(client)
        if client is None or socket is None or socket is not self._session_socket or socket.state is not _WsState.OPEN:
            raise self._lose("the connection was closed")
        action = ReleaseOpsAction(tool_name=tool_name, arguments=arguments)
        try:
            result = _LOOP.run(_await(client.step, action))
        except _NETWORK_ERRORS as exc:
            raise self._lose(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
        except RuntimeError as exc:
            message, code = parse_server_error(exc)
            if code is None:
                raise
            if "session was closed" in message:  # the server's idle reaper freed the slot
                raise self._lose(message) from None
            raise RuntimeError(f"server refused {tool_name}: {message} (code: {code})") from None
        observation = result.observation
        self.reward = float(observation.episode_return)
        self.done = bool(result.done)
        if result.done:
            self.metrics = dict((result.metadata or {}).get("metrics", {}))
            self.terminated = bool(self.metrics.get("terminated"))
            self.truncated = bool(self.metrics.get("truncated"))
        if observation.error is not None:
            raise ValueError(observation.error)
        return observation.text

    # ---- session plumbing (private: TRL must not see these)

    @staticmethod
    def _socket(client: Optional[ReleaseOpsEnv]) -> Any:
        # EnvClient keeps its live socket in `_ws` (openenv 0.10); it reconnects
        # silently on the next call, so an episode must remember which socket
        # it lives on to notice that it was lost.
        return getattr(client, "_ws", None) if client is not None else None

    def _session_lost(self, reason: str) -> SessionLostError:
        return SessionLostError(f"the session with {self.base_url} was lost ({reason}); this episode cannot "
                                "continue. The next reset() opens a new session.")

    def _lose(self, reason: str) -> SessionLostError:
        self.session_error = reason
        self._episode_running = False
        self._drop_client()
        return self._session_lost(reason)

    def _ensure_client(self) -> ReleaseOpsEnv:
        if self._client is not None and self._client_pid != os.getpid():
            # A forked child shares the parent's socket: forget it, never close it from here.
            self._detach_client(None, close_later=False)
        if self._client is None:
            client = ReleaseOpsEnv(base_url=self.base_url, **self._client_options)
            self._client, self._client_pid = client, os.getpid()
            self._finalizer = weakref.finalize(self, _close_in_background, client, os.getpid())
        return self._client

    def _detach_client(self, reason: Optional[str], close_later: bool = False) -> Optional[ReleaseOpsEnv]:
        """Forget the current client and return it (the caller closes it)."""
        client = self._client
        if self._finalizer is not None:
            self._finalizer.detach()
        self._client, self._client_pid, self._finalizer, self._session_socket = None, None, None, None
        if reason is not None and self._episode_running:
            self._episode_running = False
            self.session_error = reason
        if close_later and client is not None:
            _close_in_background(client, os.getpid())
        return client

    def _drop_client(self) -> None:
        self._detach_client(None, close_later=True)

    def _remote_reset(self, config: dict):
        # A dropped or reaped session gets a fresh connection; a server that was
        # reachable before is retried with backoff for `reconnect_timeout_s`.
        window = self._reconnect_timeout_s if self._connected_once else 0.0
        deadline = time.monotonic() + window
        delay = 0.5
        attempt = 0
        while True:
            attempt += 1
            client = self._ensure_client()
            try:
                result = _LOOP.run(_await(client.reset, **config))
            except _NETWORK_ERRORS as exc:
                error: BaseException = exc
            except RuntimeError as exc:
                message, code = parse_server_error(exc)
                if code is None:
                    raise
                if code == "EXECUTION_ERROR" and "session was closed" not in message:
                    raise ValueError(message) from None  # an invalid scenario argument, as locally
                if code == "CAPACITY_REACHED":
                    self._drop_client()
                    raise CapacityError(f"{self.base_url} is at capacity ({message}); raise MAX_CONCURRENT_ENVS "
                                        "or add replicas (see check_capacity)") from None
                error = exc  # the session was closed under us (idle reaper): reconnect
            else:
                self._session_socket = self._socket(client)
                self._connected_once = True
                return result
            self._drop_client()
            remaining = deadline - time.monotonic()
            if attempt >= 2 and remaining <= 0:
                raise ConnectionError(f"could not open a session on {self.base_url}: {error}") from error
            if attempt >= 2:
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, 10.0)


# ---------------------------------------------------------------- factories


class RemoteEnvFactory:
    """Zero-argument callable for TRL's `environment_factory`: one new session per call, round-robin over URLs."""

    def __init__(self, base_urls: str | Sequence[str], *, reconnect_timeout_s: float = DEFAULT_RECONNECT_TIMEOUT_S,
                 **client_options: Any):
        self.base_urls = _parse_urls(base_urls)
        self.reconnect_timeout_s = reconnect_timeout_s
        self.client_options = dict(client_options)
        ReleaseOpsEnv(base_url=self.base_urls[0], **self.client_options)  # reject bad options now (no I/O)
        self._rotation = _RoundRobin(self.base_urls)

    def __call__(self) -> RemoteReleaseOpsToolEnv:
        env = RemoteReleaseOpsToolEnv(base_url=self._rotation.next(), reconnect_timeout_s=self.reconnect_timeout_s,
                                      **self.client_options)
        env._group = self
        return env

    def close(self, timeout_s: float = _CLOSE_TIMEOUT_S) -> int:
        """Close the sessions of the instances this factory made; returns how many were open."""
        return _close_sessions(self, timeout_s)

    def __repr__(self) -> str:
        return f"RemoteEnvFactory({list(self.base_urls)!r})"


def make_remote_env_factory(base_urls: str | Sequence[str] | None = None, **client_options: Any) -> RemoteEnvFactory:
    """A zero-argument factory of `RemoteReleaseOpsToolEnv` for `GRPOTrainer(environment_factory=...)`.

    Args:
        base_urls: One URL, a comma-separated string or a list (Space replicas);
            defaults to `RELEASEOPS_ENV_URL`. Sessions are spread round-robin.
        **client_options: `reconnect_timeout_s` (how long a reset retries a
            server that went away, default 120 s), and `ReleaseOpsEnv` /
            `EnvClient` options, e.g.
            `message_timeout_s`, `websocket_ping_timeout_s`, `headers`
            (`{"Authorization": f"Bearer {token}"}` for a private Space).
    """
    return RemoteEnvFactory(base_urls if base_urls is not None else _urls_from_env(), **client_options)


@contextlib.contextmanager
def remote_sessions(base_urls: str | Sequence[str] | None = None, *, generation_batch_size: Optional[int] = None,
                    **client_options: Any) -> Iterator[RemoteEnvFactory]:
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


# ---------------------------------------------------------------- capacity


def _http_url(url: str) -> str:
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return parts._replace(scheme=scheme).geturl().rstrip("/")


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _get_json(url: str, timeout_s: float, headers: Optional[dict] = None) -> dict:
    handlers = [urllib.request.ProxyHandler({})] if _is_loopback(url) else []
    opener = urllib.request.build_opener(*handlers)
    request = urllib.request.Request(url, headers=dict(headers or {}))
    with opener.open(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def check_capacity(base_urls: str | Sequence[str] | None, generation_batch_size: int, *, timeout_s: float = 10.0,
                   headers: Optional[dict] = None) -> dict:
    """Check that the servers can hold `generation_batch_size` concurrent sessions.

    TRL keeps one environment instance, hence one session, per rollout of a
    generation batch, all open at once: across every training process, that is
    `per_device_train_batch_size * steps_per_generation * num_processes`
    (or the eval batch, if larger). Each server's `/metadata` reports its
    `max_concurrent_envs`; sessions already opened by other clients are not
    counted.

    Returns `{"replicas", "max_concurrent_envs" (per URL), "capacity", "generation_batch_size"}`.

    Raises:
        CapacityError: a ValueError, when replicas x max_concurrent_envs < generation_batch_size.
        ConnectionError: when a server does not answer or does not report its capacity.
    """
    urls = _parse_urls(base_urls if base_urls is not None else _urls_from_env())
    per_url = []
    for url in urls:
        try:
            meta = _get_json(f"{_http_url(url)}/metadata", timeout_s, headers)
        except (OSError, ValueError) as exc:
            raise ConnectionError(f"could not read {_http_url(url)}/metadata: {exc}") from exc
        value = meta.get("max_concurrent_envs") if isinstance(meta, dict) else None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConnectionError(f"{_http_url(url)}/metadata does not report max_concurrent_envs "
                                  "(is it a ReleaseOps Arena server?)")
        per_url.append(value)
    capacity = sum(per_url)
    n = len(urls)
    if len(set(per_url)) == 1:
        breakdown = f"{n} replica{'s' if n > 1 else ''} x {per_url[0]}"
    else:
        breakdown = f"{n} replicas: {' + '.join(map(str, per_url))}"
    if capacity < generation_batch_size:
        raise CapacityError(f"server capacity {capacity} ({breakdown}) is below the generation batch size "
                            f"{generation_batch_size}; raise MAX_CONCURRENT_ENVS or add replicas")
    return {"replicas": n, "max_concurrent_envs": dict(zip(urls, per_url)), "capacity": capacity,
            "generation_batch_size": generation_batch_size}
