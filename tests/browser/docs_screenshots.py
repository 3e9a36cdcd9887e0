"""The board's screenshots in docs/screenshots/, made again from the running code (not a test).

    .venv/bin/python -m tests.browser.docs_screenshots [OUT_DIR]   # default: docs/screenshots

Debian's Chromium (/usr/bin/chromium) against a live server with the board on, at 390 and 1400 px:
`web_story_*` is the first screen a visitor sees (1000 px high), `web_play_*` the Play tab after Seed A's
CI fixer's proposal is picked and its diff inspected, `web_watch_*` the Watch tab on Seed B, and
`web_results_1400` the Results tab. Run it after a change to what the board shows, and look at them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.browser.test_web import SEED_A, SEED_A_CI, SEED_B, Visitor
from tests.live_server import REPO_ROOT, run_live_server


def shoot(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    made = []
    pr = next(r for r in SEED_A_CI["refs"] if r.startswith("pr_"))
    with run_live_server(env={"ENABLE_WEB_INTERFACE": "true"}) as base, sync_playwright() as pw:
        for width in (390, 1400):
            v = Visitor(pw, base + "/web/", width)
            try:
                page = v.page
                page.set_viewport_size({"width": width, "height": 1000})
                made.append(out / f"web_story_{width}.png")
                page.screenshot(path=str(made[-1]))
                v.start(SEED_A["title"])
                v.pick("proposal-dd", SEED_A_CI["id"])
                v.pick("rule-dd", "S2")
                v.call("inspect_pr_diff", {"pr_id": pr})
                made.append(out / f"web_play_{width}.png")
                page.locator("#play-tab").screenshot(path=str(made[-1]))
                page.click("button[role=tab]:has-text('Watch')")
                v.pick("preset-dd", SEED_B["title"])
                page.click("#watch-btn")
                page.wait_for_selector("#watch-inspect_everything")
                made.append(out / f"web_watch_{width}.png")
                page.locator("#watch-tab").screenshot(path=str(made[-1]))
                if width == 1400:
                    page.click("button[role=tab]:has-text('Results')")
                    page.wait_for_selector("#results-slices .ro-slice")
                    made.append(out / "web_results_1400.png")
                    page.locator("#results-tab").screenshot(path=str(made[-1]))
            finally:
                v.close()
    return made


if __name__ == "__main__":
    for path in shoot(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT / "docs" / "screenshots"):
        print(path)
