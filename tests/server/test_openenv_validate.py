"""`openenv validate`: `--url` against a live server (web UI off and on), and package mode.

Package mode (`openenv validate .`) builds and runs the image; that full run is in the
container tier (tests/container/test_container.py). Here: its static level, and the claims of
openenv.yaml that OpenEnv 0.10 reads but does not grade yet (tools, task counts, the
rubric, the oracle, the floor), checked against the engine and a live server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from releaseops_arena import rewards
from releaseops_arena.policies import AlwaysHold, play
from releaseops_arena.splits import task_scenario
from releaseops_arena.tools import TOOL_NAMES
from server.releaseops_environment import ReleaseOpsEnvironment
from tests.live_server import (
    REPO_ROOT,
    run_live_server,
)
from tools.validation import oracle, validate

MANIFEST = yaml.safe_load((REPO_ROOT / "openenv.yaml").read_text())["validation"]


def openenv_cli() -> str:
    """The `openenv` console script of this interpreter's environment."""
    beside = Path(sys.executable).with_name("openenv")
    if beside.exists():
        return str(beside)
    found = shutil.which("openenv")
    if not found:
        pytest.fail("the `openenv` CLI is not installed (it comes with the `openenv` dependency)")
    return found


def run_validate(base_url: str) -> dict:
    """Run `openenv validate --url BASE --json`; assert exit 0 and every criterion passed."""
    proc = subprocess.run(
        [openenv_cli(), "validate", "--url", base_url, "--json", "--timeout", "30"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NO_COLOR": "1"},
    )
    detail = f"rc={proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, detail
    report = json.loads(proc.stdout)
    assert report["passed"] is True, detail
    assert report["mode"] == "simulation", detail
    criteria = report["criteria"]
    assert len(criteria) >= 6, detail
    failed = [c["id"] for c in criteria if not c["passed"]]
    assert not failed, f"failed criteria {failed}\n{detail}"
    assert report["summary"]["passed_count"] == report["summary"]["total_count"] == len(criteria)
    ids = {c["id"] for c in criteria}
    assert {"health_endpoint", "metadata_endpoint", "schema_endpoint", "mcp_endpoint"} <= ids
    return report


@pytest.mark.parametrize("web", ["false", "true"], ids=["api", "web-ui"])
def test_openenv_validate_url_passes(web: str) -> None:
    with run_live_server(env={"ENABLE_WEB_INTERFACE": web}) as base_url:
        report = run_validate(base_url)
    meta = next(c for c in report["criteria"] if c["id"] == "metadata_endpoint")
    assert meta["actual"]["name"] == "releaseops_arena"


# ------------------------------------------------------------- package mode


def test_package_mode_static_level_passes() -> None:
    report, rendered, _ = validate.run(level="static")
    assert validate.problems(report, runtime=False) == [], rendered
    assert [(r["check_id"], r["status"]) for r in report["results"]] == [("static.manifest", "pass")], rendered


def _without_docker(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment with no Docker engine: a PATH holding only git (no `docker` CLI), a DOCKER_HOST socket that
    does not exist, no container stand-in, and REQUIRE_CONTAINER unset unless `extra` sets it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git"))
    env = {k: v for k, v in os.environ.items() if k not in ("REQUIRE_CONTAINER", "DOCKER_HOST", "CONTAINER_STANDIN")}
    env.update(
        PATH=str(bin_dir),
        DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock",
        CONTAINER_STANDIN=str(tmp_path / "no-standin"),
        **extra,
    )
    return env


def test_the_script_without_docker_runs_what_needs_no_image_and_says_what_it_skipped(tmp_path) -> None:
    """`validate.py` with no Docker engine: the static checks run and pass, the image checks are skipped, and the
    last line says which and why (exit 0); with REQUIRE_CONTAINER=1, as CI runs it, the same machine fails."""
    script = [sys.executable, str(REPO_ROOT / "tools" / "validation" / "validate.py"), "--keep", str(tmp_path / "w")]
    done = subprocess.run(
        script, cwd=tmp_path, env=_without_docker(tmp_path), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "PASS  static.manifest" in done.stdout
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith("verdict: PASS (skipped: the runtime and semantic checks, which build and run the image")
    assert "no `docker` CLI on PATH" in verdict and verdict.endswith("run with a Docker engine for the image checks)")

    (tmp_path / "ci").mkdir()
    required = _without_docker(tmp_path / "ci", REQUIRE_CONTAINER="1")
    done = subprocess.run(script, cwd=tmp_path, env=required, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.startswith("verdict: FAIL (there is no `docker` CLI"), done.stderr


def test_the_script_outside_the_venv_says_how_to_run_it(monkeypatch, capsys, tmp_path) -> None:
    """A Python without the `openenv` CLI (not the project's venv): one line naming the command that works."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert validate.main(["--level", "static"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "`openenv` CLI is not installed" in err and "`.venv/bin/python tools/validation/validate.py`" in err


def test_the_bar_rejects_what_it_should() -> None:
    ok = {"check_id": "runtime.startup", "status": "pass", "evidence": ["built"]}
    todo = {"check_id": "semantic.oracle_max", "status": "skip", "evidence": [validate.NOT_IMPLEMENTED]}
    assert validate.problems({"verdict": "warn", "results": [ok, todo]}) == []
    assert validate.problems({"verdict": "fail", "results": [ok, {**ok, "check_id": "x", "status": "fail"}]}) == [
        "verdict fail",
        "x: fail (built)",
    ]
    skipped = {"check_id": "runtime.network_policy", "status": "skip", "evidence": ["network evidence is unavailable"]}
    assert validate.problems({"verdict": "warn", "results": [ok, skipped]}) == [
        "runtime.network_policy: skip (network evidence is unavailable)"
    ]
    assert validate.problems({"verdict": "warn", "results": [{**ok, "status": "error"}]})[0].startswith(
        "runtime.startup: error"
    )
    assert validate.problems({"verdict": "warn", "results": [todo]}) == [
        "runtime.startup did not pass: the image was not built and run"
    ]


def test_reward_range_is_the_rewards_bounds_and_the_oracle_reaches_its_top() -> None:
    assert MANIFEST["reward"]["range"] == [rewards.RETURN_MIN, rewards.STEP_REWARD_MAX]
    index, scenario, run = oracle.oracle_task()
    assert scenario == task_scenario("train", index, "easy") and run["return"] == rewards.RETURN_MAX
    floor = play(AlwaysHold(), scenario)["return"]
    assert rewards.STEP_REWARD_MAX - max(floor, 0.0) >= MANIFEST["reward"]["floor_margin"]


def test_probe_plan_is_the_oracle_line() -> None:
    """tools/validation/runtime.json is what `oracle.py --write-plan` writes today (not a stale copy)."""
    assert json.loads(oracle.PLAN.read_text()) == oracle.plan()
    assert MANIFEST["execution"]["probe_path"] == oracle.PLAN.relative_to(REPO_ROOT).as_posix()
    assert MANIFEST["capabilities"]["oracle"] == {"form": "script", "location": "tools/validation/oracle.py"}


def test_the_served_oracle_line_reaches_the_declared_top(live_server) -> None:
    plan = json.loads(oracle.PLAN.read_text())
    served = oracle.replay(live_server, plan)
    assert oracle.check(served, len(plan["actions"])) == [], served
    assert served[-1] == MANIFEST["reward"]["range"][1] - MANIFEST["reward"]["oracle_tolerance"]
    assert oracle.check(served[:-1], len(plan["actions"])), "the check must see a line cut short"


def test_declared_tools_and_task_counts_match_the_server(live_server) -> None:
    capabilities = MANIFEST["capabilities"]
    assert capabilities["declared_tools"] == list(TOOL_NAMES)
    listing = httpx.post(
        f"{live_server}/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 1}, timeout=10
    ).json()
    assert sorted(t["name"] for t in listing["result"]["tools"]) == sorted(capabilities["declared_tools"])
    splits = httpx.get(f"{live_server}/releaseops_arena/splits", timeout=10).json()
    assert {s["name"]: s["num_tasks"] for s in splits} == capabilities["declared_task_count"]
    assert capabilities["task_api"] is True
    assert MANIFEST["network"] == {"mode": "no-network"}


def test_the_declared_rubric_tree_has_the_reward_parts() -> None:
    assert MANIFEST["capabilities"]["rubric_tree"] is True
    assert [name for name, _ in ReleaseOpsEnvironment().rubric.named_rubrics()] == [
        "outcome",
        "budget",
        "invalid_calls",
        "discoveries",
    ]
