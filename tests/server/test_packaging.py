"""Publishing the OpenEnv way: `openenv push` accepts the tree, `AutoEnv` finds the installed
distribution, and the wheel built from the image's build context serves the board from a fresh venv.

The tree is what a fresh clone holds (`git ls-files`, plus new files git does not ignore), copied
to a temporary folder, so local leftovers can neither help nor hurt.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from openenv.auto import AutoAction, AutoEnv
from openenv.auto._discovery import EnvironmentDiscovery, reset_discovery
from openenv.cli._cli_utils import validate_env_structure

import releaseops_arena.client as installed_client
from tests.live_server import REPO_ROOT, free_port, http_get, wait_for_health

ENV_NAME = "releaseops_arena"  # openenv.yaml's name, AutoEnv's key
DIST_NAME = "openenv-releaseops-arena"
ASSETS = REPO_ROOT / "server" / "assets"
SUBPROCESS_TIMEOUT_S = 300


def tree_files() -> list[str]:
    """The files of a fresh clone: tracked, and new ones git does not ignore (that still exist)."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    return sorted({f for f in listing.split("\0") if f and os.path.lexists(REPO_ROOT / f)})


def copy_files(files: list[str], dest: Path) -> Path:
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target, follow_symlinks=False)  # the manifest link stays a link
    return dest


def _pattern(text: str) -> re.Pattern:
    """A .dockerignore pattern as Docker reads it: `**` spans folders, `*` and `?` stay within one."""
    out, i = "", 0
    while i < len(text):
        if text.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif text.startswith("**", i):
            out, i = out + ".*", i + 2
        elif text[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif text[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(text[i]), i + 1
    return re.compile(out)


def dockerignored(path: str, lines: list[str]) -> bool:
    """Whether Docker leaves `path` out of the build context: a pattern matching the path or one of
    its folders excludes it; a later `!pattern` takes it back."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = _pattern(line.lstrip("!").strip("/"))
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            excluded = not negated
    return excluded


def load_by_path(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ openenv push


def test_openenv_push_accepts_a_clean_clone(tmp_path):
    # Named as a clone of a Space pushed from this manifest would be.
    clone = copy_files(tree_files(), tmp_path / ENV_NAME)
    # The check `openenv push` runs first; it raises FileNotFoundError on a missing required file.
    warnings = validate_env_structure(clone)
    assert all(w.startswith("Recommended") for w in warnings), warnings
    # The root files OpenEnv requires are the client, not a copy of it.
    for name in ("client.py", "__init__.py"):
        module = load_by_path(clone / name, f"root_{name.split('.')[0]}")
        assert module.ReleaseOpsEnv is installed_client.ReleaseOpsEnv
        assert module.ReleaseOpsAction is installed_client.ReleaseOpsAction
        assert module.ReleaseOpsObservation is installed_client.ReleaseOpsObservation
        assert module.ReleaseOpsState is installed_client.ReleaseOpsState


# ------------------------------------------------------------------ AutoEnv


@pytest.fixture
def private_discovery_cache(tmp_path, monkeypatch):
    """OpenEnv's discovery caches in a per-user file: point it at tmp_path, and start from no cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    reset_discovery()
    yield
    reset_discovery()


def test_autoenv_discovers_the_installed_distribution(private_discovery_cache, live_server):
    found = EnvironmentDiscovery().discover(use_cache=False)
    assert ENV_NAME in found, sorted(found)
    info = found[ENV_NAME]
    assert info.package_name == DIST_NAME
    assert info.get_client_class() is installed_client.ReleaseOpsEnv
    assert info.get_action_class() is installed_client.ReleaseOpsAction
    assert info.get_observation_class() is installed_client.ReleaseOpsObservation

    assert AutoEnv.get_env_class(ENV_NAME) is installed_client.ReleaseOpsEnv
    assert AutoAction.from_env(ENV_NAME) is installed_client.ReleaseOpsAction
    # And it connects: AutoEnv.from_env with a running server's URL plays an episode.
    with AutoEnv.from_env(ENV_NAME, base_url=live_server).sync() as env:
        result = env.reset(split="train", index=0)
        assert result.observation.text and not result.done
        action = AutoAction.from_env(ENV_NAME)(tool_name="hold_release", arguments={"reason_code": "awaiting_fix"})
        for _ in range(10):  # holding every phase runs out the clock
            result = env.step(action)
            if result.done:
                break
        assert result.done and result.observation.outcome == "missed_deadline"


# ------------------------------------------------------------------ the wheel, installed alone


def build_context(dest: Path) -> Path:
    """The Docker build context: the clone's files less what .dockerignore leaves out."""
    ignore = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    return copy_files([f for f in tree_files() if not dockerignored(f, ignore)], dest)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, **kwargs)
    assert proc.returncode == 0, f"{command}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def fresh_venv(path: Path) -> Path:
    """A venv without pip whose own site-packages come first; this interpreter's follow (the dependencies)."""
    run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    python = path / "bin" / "python"
    own = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    # A .pth line appends its folder after the venv's own site-packages. The editable install's
    # own .pth in that folder is not run (only site folders' .pth files are), so the checkout stays out.
    (Path(own) / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_the_wheel_serves_the_board_from_a_fresh_venv(tmp_path):
    context = build_context(tmp_path / "context")
    for left_out in ("research", "tests", "docs", "examples"):
        assert not (context / left_out).exists(), f"{left_out}/ is in the image's build context"
    for needed in ("README.md", "pyproject.toml", "openenv.yaml", "tools/validation/oracle.py"):
        assert (context / needed).exists(), f"{needed} is missing from the image's build context"

    run(
        [sys.executable, "-m", "pip", "wheel", str(context), "--no-deps", "--no-build-isolation", "-w", "dist", "-q"],
        cwd=tmp_path,
    )
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"releaseops_arena", "openenv_releaseops_arena-0.1.0.dist-info"}
    for name in (
        "releaseops_arena/openenv.yaml",
        "releaseops_arena/policies/trained_policy.json",
        "releaseops_arena/server/assets/web.css",
        "releaseops_arena/server/assets/metrics.png",
        *(f"releaseops_arena/server/assets/{p.name}" for p in ASSETS.glob("*.json")),
    ):
        assert name in names, name
    # The manifest AutoEnv reads is the file, not a dangling link.
    manifest = zipfile.ZipFile(wheel).read("releaseops_arena/openenv.yaml").decode()
    assert manifest == (REPO_ROOT / "openenv.yaml").read_text()

    python = fresh_venv(tmp_path / "fresh")
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)], cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # AutoEnv's discovery cache
    probe = (
        "import json, sys, releaseops_arena.server.app as app\n"
        "from openenv.auto import AutoEnv\n"
        f"client = AutoEnv.get_env_class({ENV_NAME!r})\n"
        "files = [m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)]\n"
        "print(json.dumps({'app': app.__file__, 'client': sys.modules[client.__module__].__file__, 'files': files}))"
    )
    seen = json.loads(run([str(python), "-c", probe], cwd=tmp_path, env=env).stdout)
    installed = str(tmp_path / "fresh")
    assert seen["app"].startswith(installed) and seen["client"].startswith(installed), seen
    dependencies = sysconfig.get_paths()["purelib"]  # may lie inside the checkout (.venv/)
    from_checkout = [f for f in seen["files"] if f.startswith(str(REPO_ROOT)) and not f.startswith(dependencies)]
    assert from_checkout == []

    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    env["ENABLE_WEB_INTERFACE"] = "true"
    log = open(tmp_path / "server.log", "w+b")
    server = subprocess.Popen(
        [str(python), "-m", "uvicorn", "releaseops_arena.server.app:app", "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path,  # the checkout is not importable from here
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        try:
            wait_for_health(base_url, timeout=90, alive=lambda: server.poll() is None)
        except (RuntimeError, TimeoutError) as e:
            log.seek(0)
            pytest.fail(f"{e}\n{log.read().decode(errors='replace')[-4000:]}")
        status, body = http_get(f"{base_url}/web/", timeout=60)
        page = body.decode("utf-8", "replace")
        assert status == 200
        # The board's data came out of the installed package: both presets, the chart, the stylesheet.
        for preset in sorted(ASSETS.glob("seed_*.json")):
            assert json.loads(preset.read_text())["title"] in page, preset.name
        assert base64.b64encode((ASSETS / "metrics.png").read_bytes()).decode() in page
        css_rule = next(line for line in (ASSETS / "web.css").read_text().splitlines() if line.startswith(".ro-"))
        assert css_rule in page
    finally:
        server.terminate()  # this PID only
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()
