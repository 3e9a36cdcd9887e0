"""Shared fixtures (one live server for the whole session) and the test tiers.

Every test belongs to one tier, by its module (the table below is the only
place that says so): `engine` (the pure library, in-process), `server` (a live
uvicorn process), `browser` (Chromium), `container` (the real Dockerfile),
`train` (torch and TRL). `make test-fast` runs `engine`; `make test` runs all.
A tier whose tests skipped is named at the end with the command that enables it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live_server import live_server  # noqa: F401

TIERS: dict[str, str] = {
    "test_episode": "engine", "test_properties": "engine", "test_leaks": "engine", "test_tools": "engine",
    "test_evaluation": "engine", "test_state_machine": "engine", "test_structure": "engine", "test_tasks": "engine",
    "test_bench": "engine", "test_trained_policy": "engine", "test_attention": "engine",
    "test_server": "server", "test_client": "server", "test_openenv_validate": "server", "test_notebook": "server",
    "test_fuzz": "server", "test_tasks_wire": "server", "test_rubric": "server", "test_deploy": "server",
    "test_web": "browser",
    "test_container": "container",
    "test_training": "train", "test_openai_policy": "train", "test_structured": "train", "test_learnability": "train",
    "test_lm_copy": "train", "test_lm_warm_start": "train", "test_lm_learnability": "train",
    "test_train_options": "train", "test_sft_ready": "train", "test_brief": "engine", "test_quitting": "server",
}
ENABLE = {
    "browser": "apt-get install chromium (then REQUIRE_BROWSER=1 makes a missing browser fail)",
    "container": "a Docker engine: ../shared/tools/container-standin up, or docker (REQUIRE_CONTAINER=1 to require it)",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = Path(str(item.fspath)).stem
        if module not in TIERS:
            raise pytest.UsageError(f"{module}.py has no tier; add it to TIERS in tests/conftest.py")
        item.add_marker(getattr(pytest.mark, TIERS[module]))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = terminalreporter.stats.get("skipped", [])
    tiers = sorted({TIERS.get(Path(str(r.fspath)).stem, "?") for r in skipped})
    for tier in tiers:
        count = sum(TIERS.get(Path(str(r.fspath)).stem) == tier for r in skipped)
        terminalreporter.write_line(f"SKIPPED TIER {tier}: {count} tests did not run; to run them: "
                                    f"{ENABLE.get(tier, 'see the skip reasons above')}")
