"""`openenv validate --url` passes against a live server, web UI off and on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_server import REPO_ROOT, run_live_server


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
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=180,
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
