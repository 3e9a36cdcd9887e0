"""The README's quickstart, run as a reader types it (all but the `pip install`, `make` and `docker` lines).

The server command is taken from the README's Quickstart section and started exactly as written (its
`VAR=value` prefixes as environment, the console script from this interpreter's environment), from a folder
outside the checkout, as an installed server would be, on a free port of 127.0.0.1. The README's
`GenericEnvClient` loop then plays an episode against it, and the board it enabled answers at `/web` with its
packaged assets. The server is stopped by its PID.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_server import HEALTH_TIMEOUT_S, REPO_ROOT, free_port, http_get, wait_for_health
from tools.bench.launch import child_environment, stop

README = REPO_ROOT / "README.md"
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def quickstart() -> str:
    text = README.read_text()
    return re.search(r"^## Quickstart\n(.*?)(?=^## )", text, re.S | re.M).group(1)


def server_command() -> str:
    """The one line of the quickstart's shell blocks that starts `releaseops-serve`."""
    lines = [
        line
        for block in re.findall(r"```bash\n(.*?)```", quickstart(), re.S)
        for line in block.splitlines()
        if "releaseops-serve" in line
    ]
    assert len(lines) == 1, f"expected one releaseops-serve line in the quickstart, found {lines}"
    return lines[0]


def client_loop() -> str:
    blocks = re.findall(r"```python\n(.*?)```", quickstart(), re.S)
    return next(b for b in blocks if "GenericEnvClient(base_url=" in b)


def parse(line: str, port: int) -> tuple[dict[str, str], list[str]]:
    """(environment, argv) of a shell line `[VAR=value ...] command args  # comment`, on `port`."""
    words = shlex.split(line, comments=True)
    env = {}
    while words and ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert "--port" in words, f"the quickstart's server command names no --port: {line}"
    words[words.index("--port") + 1] = str(port)
    script = Path(sys.executable).with_name(words[0])
    words[0] = str(script) if script.exists() else (shutil.which(words[0]) or words[0])
    return env, words


@contextlib.contextmanager
def served(line: str, cwd: Path):
    port = free_port()
    env, argv = parse(line, port)
    base_url = f"http://127.0.0.1:{port}"
    log = cwd / "server.log"
    with open(log, "w+b") as out:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=child_environment(env), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        try:
            wait_for_health(base_url, timeout=HEALTH_TIMEOUT_S, alive=lambda: proc.poll() is None)
            yield base_url, env
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}\n--- server output ---\n{log.read_text()[-4000:]}") from None
        finally:
            stop(proc)


def test_the_quickstart_names_each_way_in():
    text = quickstart()
    assert "make serve" in text and "pip install ." in text and "docker run -p 8000:8000" in text
    assert server_command().split("#")[0].split()[-2:] == ["--port", "8000"]
    assert "http://127.0.0.1:8000" in client_loop()


@pytest.mark.timeout(120)
def test_the_quickstart_server_command_and_client_loop_run(tmp_path):
    line = server_command()
    with served(line, tmp_path) as (base_url, env):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(client_loop().replace("http://127.0.0.1:8000", base_url), "README", "exec"), {})
        lines = out.getvalue().splitlines()
        assert json.loads(lines[0])["phase"] == "triage"  # the board a model sees
        outcome, episode_return = lines[-2].split()
        assert outcome in ("safe_ship", "unsafe_ship", "missed_deadline")
        breakdown = json.loads(lines[-1].replace("'", '"'))
        assert abs(sum(breakdown.values()) - float(episode_return)) < 1e-6
        status, body = http_get(f"{base_url}/health")
        assert status == 200 and b"healthy" in body
        if env.get("ENABLE_WEB_INTERFACE") == "true":
            status, page = http_get(f"{base_url}/web/")
            assert status == 200, page[:300]
