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
from pathlib import Path
from typing import Iterator, Mapping, Optional

import pytest

# One launcher for the tests and the benchmarks; the names the test modules import stay here.
from tools.bench.launch import HEALTH_TIMEOUT_S, free_port, http_get, uvicorn_process, wait_for_health

__all__ = [
    "REPO_ROOT",
    "HEALTH_TIMEOUT_S",
    "free_port",
    "http_get",
    "wait_for_health",
    "run_live_server",
    "make_live_server_fixture",
    "live_server",
]

REPO_ROOT = Path(__file__).resolve().parent.parent


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
    with uvicorn_process("server.app:app", env=env, host=host, port=port, timeout=timeout, log_path=log_path) as (
        base_url,
        _pid,
    ):
        yield base_url


def make_live_server_fixture(
    name: str = "live_server", *, scope: str = "session", env: Optional[Mapping[str, Optional[str]]] = None
):
    """A pytest fixture (named `name`) yielding the base URL of a live server."""

    @pytest.fixture(scope=scope, name=name)
    def _fixture() -> Iterator[str]:
        with run_live_server(env=env) as base_url:
            yield base_url

    return _fixture


# Default configuration (web UI off unless the environment says otherwise).
live_server = make_live_server_fixture("live_server")
