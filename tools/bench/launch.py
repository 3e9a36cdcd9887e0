"""Run an ASGI app under uvicorn in a child process on 127.0.0.1: start, wait for /health, stop by PID.

The one launcher for the benchmarks and the live-server tests (`tests/live_server.py`
wraps it), so both start servers the same way::

    with uvicorn_process("server.app:app", env={"MAX_CONCURRENT_ENVS": "2"}) as (base_url, pid):
        ...

Standard library only: it must import wherever the tests or the benchmarks run.
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
from typing import Iterator, Mapping, Optional, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
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


def stop(proc: subprocess.Popen, timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to this one PID, SIGKILL after `timeout` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
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


def _pin_to(cpus: Optional[set[int]]):
    """A pre-exec hook pinning the child to `cpus` from its start (every later thread inherits it).
    Not narrowed to the parent's own pinning: a client pinned to one core starts servers on others."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def _stack_args(module: str) -> list[str]:
    """uvicorn's flags for the published WebSocket limits (server/limits.py), as `releaseops-serve` runs:
    every app the tests and benchmarks serve runs on the same stack."""
    if module != "uvicorn":
        return []
    from server.limits import uvicorn_cli_args

    return uvicorn_cli_args()


@contextlib.contextmanager
def uvicorn_process(
    app: str = "server.app:app",
    *,
    env: Optional[Mapping[str, Optional[str]]] = None,
    host: str = "127.0.0.1",
    port: Optional[int] = None,
    timeout: float = HEALTH_TIMEOUT_S,
    log_path: Optional[Path] = None,
    module: str = "uvicorn",
    args: Sequence[str] = (),
    cpus: Optional[set[int]] = None,
) -> Iterator[tuple[str, int]]:
    """`python -m MODULE APP --host H --port P [ARGS]` from the repo root; yields (base_url, pid).

    `env` overrides the inherited environment (None removes a variable). The server's
    output goes to `log_path` when given (tests read it), else to a temporary file whose
    tail is raised with the error if the server never becomes healthy. `module` replaces
    `uvicorn` by a wrapper taking the same arguments; `cpus` pins the child.
    """
    port = port or free_port(host)
    base_url = f"http://{host}:{port}"
    with open(log_path, "w+b") if log_path else tempfile.TemporaryFile(mode="w+b") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, app, "--host", host, "--port", str(port), *_stack_args(module), *args],
            cwd=REPO_ROOT,
            env=child_environment(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_pin_to(cpus),
        )
        try:
            wait_for_health(base_url, timeout=timeout, alive=lambda: proc.poll() is None)
        except (RuntimeError, TimeoutError) as e:
            stop(proc)
            raise RuntimeError(f"{e}\n--- server output (tail) ---\n{_tail(log, 4000)}") from None
        except BaseException:  # interrupted while waiting: never leave the child behind
            stop(proc)
            raise
        try:
            yield base_url, proc.pid
        finally:
            stop(proc)
            if proc.returncode not in (0, -15):  # a crash, not our SIGTERM: say why
                print(f"[server {app} exited {proc.returncode}]\n{_tail(log, 2000)}", file=sys.stderr)


def _tail(log, chars: int) -> str:
    log.seek(0)
    return log.read().decode("utf-8", "replace")[-chars:]
