"""Shared fixtures (one live server for the whole session) and the test tiers.

Every test belongs to one tier, the folder it sits in (tests/<tier>/): `engine`
(the pure library, in-process), `server` (a live uvicorn process), `browser`
(Chromium), `container` (the real Dockerfile), `train` (torch and TRL).
`make test-fast` runs `engine`; `make test` runs all.
A tier whose tests skipped is named at the end with the command that enables it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live_server import live_server  # noqa: F401

# A test's tier is the folder it sits in.
TIERS = ("engine", "server", "browser", "container", "train")
ENABLE = {
    "browser": "apt-get install chromium (then REQUIRE_BROWSER=1 makes a missing browser fail)",
    "container": (
        "a Docker engine: start Docker so that `docker info` answers "
        "(CI runs this tier on its own engine; REQUIRE_CONTAINER=1 makes a missing engine fail)"
    ),
}


def tier_of(path: str) -> str | None:
    folder = Path(path).parent.name
    return folder if folder in TIERS else None


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = tier_of(str(item.fspath))
        if tier is None:
            raise pytest.UsageError(f"{item.fspath} is in no tier; move it under tests/<tier>/ ({', '.join(TIERS)})")
        item.add_marker(getattr(pytest.mark, tier))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = terminalreporter.stats.get("skipped", [])
    tiers = sorted({tier_of(str(r.fspath)) or "?" for r in skipped})
    for tier in tiers:
        count = sum(tier_of(str(r.fspath)) == tier for r in skipped)
        terminalreporter.write_line(
            f"SKIPPED TIER {tier}: {count} tests did not run; to run them: "
            f"{ENABLE.get(tier, 'see the skip reasons above')}"
        )
