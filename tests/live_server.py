"""A real uvicorn server for tests that need one (HTTP, WebSocket, browser, CLI).

Usage, as a context manager::

    from tests.live_server import run_live_server

    with run_live_server(env={"MAX_CONCURRENT_ENVS": "2"}) as base_url:
        ...  # base_url == "http://127.0.0.1:<port>"

or through the session-scoped fixture (pytest finds a fixture that is imported
into a test module's namespace, so no conftest.py is needed)::

    from tests.live_server import live_server  # noqa: F401  (pytest fixture)

    def test_something(live_server):  # base URL string
        ...

Other configurations get their own fixture from the factory::

    live_server_web = make_live_server_fixture("live_server_web", env={"ENABLE_WEB_INTERFACE": "true"})

The server is `python -m uvicorn server.app:app` run from the repo root with
the current interpreter, on a free port of 127.0.0.1; it is stopped by its PID
(SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator, Mapping, Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
HEALTH_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0

# Never send loopback traffic through a proxy from the environment.
_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET without proxies, following redirects; returns (status, body)."""
    try:
        with _NO_PROXY_OPENER.open(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_for_health(base_url: str, timeout: float = HEALTH_TIMEOUT_S, alive=lambda: True) -> None:
    """Poll `<base_url>/health` until it answers {"status": "healthy"}.

    `alive()` is checked between polls so that a dead server fails fast.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"server process exited before {base_url}/health answered")
        try:
            status, body = http_get(f"{base_url}/health", timeout=2.0)
            if status == 200 and b"healthy" in body:
                return
            last = (status, body[:200])
        except OSError as e:  # refused / reset / timeout while starting
            last = e
        time.sleep(0.25)
    raise TimeoutError(f"{base_url}/health not healthy after {timeout:.0f}s (last: {last!r})")


def _stop(proc: subprocess.Popen, timeout: float = STOP_TIMEOUT_S) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()  # SIGTERM to this PID only
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def child_environment(env: Optional[Mapping[str, Optional[str]]] = None) -> dict[str, str]:
    """This process's environment with `env` applied (None removes a variable), unbuffered output."""
    child_env = dict(os.environ)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    for key, value in (env or {}).items():
        if value is None:
            child_env.pop(key, None)
        else:
            child_env[key] = str(value)
    return child_env


@contextlib.contextmanager
def run_live_server(
    env: Optional[Mapping[str, Optional[str]]] = None,
    *,
    host: str = "127.0.0.1",
    port: Optional[int] = None,
    timeout: float = HEALTH_TIMEOUT_S,
    log_path: Optional[Path] = None,
) -> Iterator[str]:
    """Start the server, wait for /health, yield its base URL, stop it.

    `env` overrides the inherited environment (a value of None removes the
    variable), e.g. {"MAX_CONCURRENT_ENVS": "2", "ENABLE_WEB_INTERFACE": "true"}.
    With `log_path`, the server's output is kept in that file (for tests that read it).
    """
    port = port or free_port(host)
    child_env = child_environment(env)
    base_url = f"http://{host}:{port}"
    with (open(log_path, "w+b") if log_path else tempfile.TemporaryFile(mode="w+b")) as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "server.app:app", "--host", host, "--port", str(port)],
            cwd=REPO_ROOT, env=child_env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        try:
            try:
                wait_for_health(base_url, timeout=timeout, alive=lambda: proc.poll() is None)
            except (RuntimeError, TimeoutError) as e:
                _stop(proc)
                log.seek(0)
                tail = log.read().decode("utf-8", "replace")[-4000:]
                raise RuntimeError(f"{e}\n--- server output (tail) ---\n{tail}") from None
            yield base_url
        finally:
            _stop(proc)


def make_live_server_fixture(name: str = "live_server", *, scope: str = "session",
                             env: Optional[Mapping[str, Optional[str]]] = None):
    """A pytest fixture (named `name`) yielding the base URL of a live server."""

    @pytest.fixture(scope=scope, name=name)
    def _fixture() -> Iterator[str]:
        with run_live_server(env=env) as base_url:
            yield base_url

    return _fixture


# Default configuration (web UI off unless the environment says otherwise).
live_server = make_live_server_fixture("live_server")
