"""The "Release board" tab at /web, driven by a real headless Chromium.
Over 400 lines: one browser session drives every tab, sharing its fixtures.

Playwright drives Debian's Chromium (/usr/bin/chromium; no browser is ever
downloaded) against a live server started with ENABLE_WEB_INTERFACE=true.
Screenshots land in artifacts/web/*.png (git-ignored).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import pytest

from releaseops_arena import rewards
from releaseops_arena.catalog import ARCHETYPES, BENCHMARK_VERSION, DIFFICULTIES, FAMILIES, HELDOUT_FAMILIES
from releaseops_arena.episode import Episode
from releaseops_arena.policies import RandomPolicy, play
from releaseops_arena.policies.base import evidence_violation
from releaseops_arena.safety_rules import rules_for_risk
from server.web_handlers import GROUPS
from tests.live_server import REPO_ROOT, http_get, run_live_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = REPO_ROOT / "artifacts" / "web"
SEED_A = json.loads((REPO_ROOT / "server" / "assets" / "seed_a_bad_ci.json").read_text())
SEED_B = json.loads((REPO_ROOT / "server" / "assets" / "seed_b_budget_restraint.json").read_text())
# Seed A's first board, as the engine builds it (the ids the clicks below use come from here).
SEED_A_BOARD = Episode(**SEED_A["scenario"]).board()["proposals"]
SEED_A_CI = next(p for p in SEED_A_BOARD if p["worker"] == "ci_fixer" and p["request"] == "merge_pr")
SEED_A_NO_RULE = next(p["id"] for p in SEED_A_BOARD if not rules_for_risk(p["risk"]))  # e.g. docs work
SEED_A_EVIDENCE = Episode(**SEED_A["scenario"]).board()["evidence_actions_remaining"]
TIMEOUT_MS = 20_000
FORBIDDEN = re.compile(
    "|".join(
        re.escape(w)
        for w in (
            *FAMILIES,
            *HELDOUT_FAMILIES,
            *ARCHETYPES,
            "overcautious",
            "lv_",
            "hazard",
            "latent",
            "violation",
            "archetype",
            "truth",
        )
    ),
    re.I,
)

pytestmark = pytest.mark.timeout(180)


# ------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def server_log(tmp_path_factory):
    return tmp_path_factory.mktemp("web-server") / "server.log"


@pytest.fixture(scope="module")
def web_url(server_log):
    with run_live_server(env={"ENABLE_WEB_INTERFACE": "true"}, log_path=server_log) as base_url:
        yield base_url + "/web/"


@pytest.fixture(scope="module")
def playwright():
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is not installed (apt-get install chromium)"
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        yield pw


class Visitor:
    """One browser profile (a persistent context in a fresh user dir) with one page on /web."""

    def __init__(self, playwright, url: str, width: int = 1400):
        self.user_dir = tempfile.mkdtemp(prefix="releaseops-web-")
        self.context = playwright.chromium.launch_persistent_context(
            self.user_dir,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": width, "height": 1000},
        )
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page = self.context.pages[0] if self.context.pages else self.context.new_page()
        self.page.goto(url)
        self.page.wait_for_selector("#start-btn")

    def close(self):
        self.context.close()
        shutil.rmtree(self.user_dir, ignore_errors=True)

    # -- interaction helpers
    def pick(self, elem_id: str, value: str) -> None:
        """Choose a dropdown option whose label is `value` or starts with `value ` (labels lead with the id)."""
        page = self.page
        page.click(f"#{elem_id} input")
        option = page.locator(
            f"#{elem_id} li[role=option][aria-label='{value}'], #{elem_id} li[role=option][aria-label^='{value} ']"
        ).first
        option.click()
        page.wait_for_function(
            "([id, v]) => { const i = document.querySelector('#' + id + ' input');"
            " return i && (i.value === v || i.value.startsWith(v + ' ')); }",
            arg=[elem_id, value],
        )

    def calls(self) -> int:
        text = self.page.locator("#meter-return").inner_text()
        return int(re.search(r"(\d+) calls?\b", text).group(1))

    def start(self, preset: str) -> None:
        self.pick("preset-dd", preset)
        self.page.click("#start-btn")
        self.page.wait_for_function(
            "t => { const m = document.querySelector('#meters'); return m && m.innerText.includes(t)"
            r" && /\b0 calls\b/.test(m.innerText); }",
            arg=preset,
        )
        self.page.wait_for_selector("#board .ro-card")
        self.page.wait_for_selector("#approve-btn:not([disabled])")

    def call(self, tool: str, args: dict) -> None:
        """Make one tool call by clicking: fill the dropdowns, press the button, wait for the engine's answer."""
        before = self.calls()
        if tool == "approve_proposal":
            self.pick("proposal-dd", args["proposal_id"])
            button = "approve-btn"
        elif tool == "block_proposal":
            self.pick("proposal-dd", args["proposal_id"])
            self.pick("rule-dd", args["rule_id"])
            button = "block-btn"
        elif tool in ("inspect_pr_diff", "inspect_ci_run", "inspect_ticket"):
            dd, button = {
                "inspect_pr_diff": ("pr-dd", "inspect-pr-btn"),
                "inspect_ci_run": ("run-dd", "inspect-run-btn"),
                "inspect_ticket": ("ticket-dd", "inspect-ticket-btn"),
            }[tool]
            self.pick(dd, next(iter(args.values())))
        elif tool == "ask_worker":
            self.pick("worker-dd", args["worker_id"])
            self.pick("question-dd", args["question_type"])
            button = "ask-btn"
        elif tool == "hold_release":
            self.pick("hold-dd", args["reason_code"])
            button = "hold-btn"
        else:
            raise AssertionError(tool)
        self.page.click(f"#{button}")
        self.page.wait_for_function(
            "n => { const m = document.querySelector('#meter-return');"
            r" return m && new RegExp('\\b' + (n + 1) + ' calls?\\b').test(m.innerText); }",
            arg=before,
        )

    def text(self, elem_id: str) -> str:
        return self.page.locator(f"#{elem_id}").inner_text()

    def errors(self) -> str:
        """The engine's messages about the last call, in the message lines under the call buttons."""
        return " ".join(t for g in GROUPS for t in self.page.locator(f"#{g}-msg .ro-error").all_inner_texts()).strip()

    def shown(self, elem_id: str) -> str:
        """What a dropdown shows selected (its input's value)."""
        return self.page.locator(f"#{elem_id} input").input_value()

    def wait_calls(self, n: int) -> None:
        self.page.wait_for_function(
            "n => { const m = document.querySelector('#meter-return');"
            r" return m && new RegExp('\\b' + n + ' calls?\\b').test(m.innerText); }",
            arg=n,
        )

    def width(self) -> int:
        return self.page.evaluate("() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")

    def shot(self, name: str) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def visitor(playwright, web_url):
    v = Visitor(playwright, web_url)
    yield v
    v.close()


def web_url_of(page) -> str:
    return page.url.split("?")[0].split("#")[0].rstrip("/") + "/"


def _return_value(text: str) -> float:
    return float(re.search(r"return\s*([+-]\d+\.\d+)", text).group(1))


# --------------------------------------------------------------- tests


def test_web_serves_the_release_board_alone(web_url, visitor):
    status, body = http_get(web_url.rstrip("/"), timeout=30)  # /web redirects to /web/
    assert status == 200 and b"gradio" in body.lower()
    page = visitor.page
    # OpenEnv's generic Playground (one environment shared by every visitor) is off, and the page says so.
    assert [t.strip() for t in page.locator("button[role=tab]").all_inner_texts()] == ["Play", "Watch", "Results"]
    # The story first: what a supervisor is, both seeds, the headline numbers; operator notes collapsed.
    assert page.title() == "ReleaseOps Arena · Release board"
    for elem in ("what-supervisor", "story-seed-a", "story-seed-b", "headline-chart", "headline-plot"):
        assert page.locator(f"#{elem}").is_visible(), elem
    chart = page.locator("#headline-chart").inner_text()
    assert "naive" in chart and "planner" in chart and "oracle" in chart
    assert not page.locator("#sessions-note").is_visible()  # in the collapsed "About this server"
    page.click("#about-acc .label-wrap")
    note = page.locator("#sessions-note").inner_text()
    assert "WebSocket training slots" in note and "Playground tab is turned off" in note and "shared" in note
    assert "MAX_CONCURRENT_ENVS" not in page.locator("#intro").inner_text()
    for elem in ("preset-dd", "family-dd", "difficulty-dd", "mix-dd", "seed-num", "board", "start-btn"):
        assert page.locator(f"#{elem}").is_visible(), elem
    assert page.locator("#approve-btn").is_disabled()  # nothing to act on before Start
    visitor.shot("01_loaded")


def test_no_route_plays_a_shared_environment(web_url, visitor):
    """The routes behind OpenEnv's Playground (one environment for every visitor) are gone, from the page too."""
    page, base = visitor.page, web_url.rstrip("/").removesuffix("/web")
    for path in ("/web/reset", "/web/step"):
        response = page.request.post(
            base + path, data=json.dumps({"action": {}}), headers={"Content-Type": "application/json"}
        )
        assert response.status in (404, 405), (path, response.status)
    assert page.request.get(base + "/web/state").status in (404, 405)
    assert page.request.get(base + "/web/metadata").ok  # read-only metadata stays


def test_play_seed_a_to_safe_ship_by_clicking(visitor):
    """Replay the oracle's line of server/assets/seed_a_bad_ci.json by clicking; the UI reaches safe_ship."""
    oracle = SEED_A["transcripts"]["oracle"]
    visitor.start(SEED_A["title"])
    board = visitor.text("board")
    assert not FORBIDDEN.search(board), board
    assert "ci_fixer" in board and all(ref in board for ref in SEED_A_CI["refs"])
    visitor.shot("02_seed_a_started")
    returns = []
    for i, step in enumerate(oracle["steps"]):
        visitor.call(step["call"]["tool"], step["call"]["arguments"])
        assert visitor.errors() == "", visitor.errors()
        result = visitor.text("result-box")
        assert step["call"]["tool"] in result
        returns.append(_return_value(visitor.text("return-box")))
        if i == 0:  # the evidence shows the disabled payment test; the step pays only the budget cost
            evidence = json.loads(step["result"])["evidence"]
            assert evidence_violation(evidence) == "S2"
            skipped = evidence.get("tests_disabled") or evidence.get("skipped_payment_tests")
            assert skipped and all(test in result for test in skipped)
            # The discovery bonus is paid with the terminal reward, not on the inspecting step.
            assert returns[0] == pytest.approx(rewards.OPENING_REWARD - 0.05)
            visitor.shot("03_seed_a_inspected")
        if i < len(oracle["steps"]) - 1:
            assert not FORBIDDEN.search(visitor.text("board"))
    assert visitor.page.locator("#outcome [data-outcome]").get_attribute("data-outcome") == "safe_ship"
    assert visitor.text("outcome").startswith("safe_ship")
    assert returns[-1] == pytest.approx(oracle["return"])
    assert returns[-1] > 1.0  # the terminal reward carried the discovery bonus
    metrics = visitor.text("metrics")
    for key in ("outcome", "terminal_reason", "budget_used", "false_blocks", "episode_return"):
        assert key in metrics
    assert visitor.page.locator("#approve-btn").is_disabled()  # the episode is over
    assert "Traceback" not in visitor.page.content()
    # The audit trail: a header, the reset (its opening reward), one row per call.
    assert len(visitor.page.locator("#history tr").all()) == len(oracle["steps"]) + 2
    visitor.shot("04_seed_a_safe_ship")


def test_invalid_calls_show_the_engine_message(visitor):
    visitor.start(SEED_A["title"])
    # A proposal no safety rule applies to (benign docs work, say): a block of it is refused (V1).
    pid = SEED_A_NO_RULE
    visitor.call("block_proposal", {"proposal_id": pid, "rule_id": "S3"})
    error = visitor.text("resolve-msg")
    assert f"no safety rule applies to {pid}" in error, error
    # The return starts at the reset's reward (a missed deadline until the release ships).
    assert _return_value(visitor.text("return-box")) == pytest.approx(rewards.OPENING_REWARD - 0.25)
    visitor.shot("05_invalid_block")
    visitor.call("approve_proposal", {"proposal_id": pid})
    assert visitor.errors() == ""
    # An approved proposal leaves the menu: nothing is picked, and the menu says why.
    assert visitor.shown("proposal-dd") == ""
    assert f"{pid} is approved" in visitor.page.locator("#proposal-dd").inner_text()
    visitor.page.click("#approve-btn")  # nothing picked: nothing is sent, nothing is charged
    visitor.page.wait_for_selector("#resolve-msg .ro-error")
    assert "Not sent: choose a proposal first" in visitor.text("resolve-msg") and visitor.calls() == 2
    assert _return_value(visitor.text("return-box")) == pytest.approx(rewards.OPENING_REWARD - 0.25)
    assert "Traceback" not in visitor.page.content()
    visitor.shot("06_invalid_already_approved")


def test_two_visitors_have_independent_episodes(playwright, web_url):
    a, b = Visitor(playwright, web_url), Visitor(playwright, web_url)
    try:
        a.start(SEED_A["title"])
        b.start(SEED_B["title"])
        b_board, b_meters = b.text("board"), b.text("meters")
        first, second = (p["id"] for p in SEED_A_BOARD[:2])  # two of three: the phase stays open
        a.call("approve_proposal", {"proposal_id": first})
        a.call("approve_proposal", {"proposal_id": second})
        assert a.page.locator(f"#board [data-proposal={first}]").get_attribute("data-status") == "approved"
        assert a.calls() == 2
        assert b.text("board") == b_board and b.text("meters") == b_meters and b.calls() == 0
        # B's own call is a round trip after A's calls: had A's calls leaked into B's session, B's
        # history would hold them by then. It holds exactly B's one call, and A is as it was.
        a_board = a.text("board")
        first_b = b.page.locator("#board .ro-card").first.get_attribute("data-proposal")
        b.call("approve_proposal", {"proposal_id": first_b})
        assert b.calls() == 1 and a.text("board") == a_board and a.calls() == 2
        assert b.page.locator("#board [data-status=approved]").count() == 1
        a.shot("07_visitor_a")
        b.shot("08_visitor_b")
    finally:
        a.close()
        b.close()


def test_watch_replays_the_policies(visitor):
    from releaseops_arena.policies import POLICIES
    from server.web_handlers import WATCH_POLICIES, WATCH_SHOWN

    page = visitor.page
    page.click("button[role=tab]:has-text('Watch')")
    visitor.pick("preset-dd", SEED_A["title"])
    page.click("#watch-btn")
    page.wait_for_selector("#watch-scores")
    expected = {name: play(POLICIES[name](), SEED_A["scenario"]) for name in WATCH_POLICIES}
    for name in ("naive", "rule", "oracle"):  # the demo's recorded transcripts are what the tab replays
        assert expected[name]["metrics"]["outcome"] == SEED_A["transcripts"][name]["outcome"]
    # every policy in the score table, in order, with what it sees: only the oracle is privileged
    rows = page.locator("#watch-scores tr[id^=score-]")
    assert [r.get_attribute("id") for r in rows.all()] == [f"score-{n}" for n in WATCH_POLICIES]
    for name, run in expected.items():
        row = page.locator(f"#score-{name}").inner_text()
        assert run["metrics"]["outcome"] in row and f"{run['return']:+.2f}" in row
        assert ("hidden world (privileged)" if name == "oracle" else "the board only") in row
    # the transcripts shown by default: the board-only deciders, one list item per call
    assert [c.get_attribute("id") for c in page.locator("#watch-view .col").all()] == [
        f"watch-{n}" for n in WATCH_SHOWN
    ]
    for name in WATCH_SHOWN:
        column = page.locator(f"#watch-{name}")
        assert column.get_attribute("data-outcome") == expected[name]["metrics"]["outcome"]
        assert column.locator("li").count() == len(expected[name]["steps"])
    # tick the oracle: its column joins, in table order (last)
    page.click("#watch-show label:has-text('oracle')")
    page.wait_for_selector("#watch-oracle")
    assert page.locator("#watch-view .col").last.get_attribute("id") == "watch-oracle"
    assert page.locator("#watch-oracle li").count() == len(SEED_A["transcripts"]["oracle"]["steps"])
    # step through: slider to step 2 highlights step 2 of every shown transcript and dims the rest
    page.fill("#watch-step input[type=number]", "2")
    page.press("#watch-step input[type=number]", "Enter")
    page.wait_for_function(
        "n => document.querySelectorAll('#watch-view li.cur').length === n", arg=len(WATCH_SHOWN) + 1
    )
    assert "2." in page.locator("#watch-oracle li.cur").inner_text()
    assert page.locator("#watch-trained li.later").count() == len(expected["trained"]["steps"]) - 2
    visitor.shot("09_watch")
    page.click("button[role=tab]:has-text('Results')")
    page.wait_for_selector("#results-slices .ro-slice")
    results = visitor.text("results-table")
    assert "heldout_seeds/medium" in results and "calibration report" in results
    slices = json.loads((REPO_ROOT / "server" / "assets" / "results.json").read_text())["slices"]
    assert page.locator("#results-slices .ro-slice").count() == len(slices)
    for section in page.locator("#results-slices .ro-slice").all():  # one chart and one table per slice
        assert section.locator(".ro-bars").count() == 1 and section.locator("table").count() == 1
    visitor.shot("10_results")


def test_seed_a_blocks_the_proposal_shown_selected(visitor):
    """The issue's steps: pick the CI fixer's proposal and S2, inspect its diff, press Block. The call sent
    blocks that proposal under S2 (the menus are not reset to the first pending proposal and S1)."""
    pid, pr = SEED_A_CI["id"], next(r for r in SEED_A_CI["refs"] if r.startswith("pr_"))
    visitor.start(SEED_A["title"])
    visitor.pick("proposal-dd", pid)
    visitor.pick("rule-dd", "S2")
    visitor.call("inspect_pr_diff", {"pr_id": pr})
    assert visitor.shown("proposal-dd").startswith(pid + " ") and visitor.shown("rule-dd").startswith("S2 ")
    assert "disables" in visitor.text("result-sentence") or "skip" in visitor.text("result-sentence")
    before = visitor.calls()
    visitor.page.click("#block-btn")
    visitor.wait_calls(before + 1)
    assert f"block_proposal(proposal_id='{pid}', rule_id='S2')" in visitor.text("result-box")
    assert visitor.page.locator(f"#board [data-proposal={pid}]").get_attribute("data-status") == "blocked"
    assert visitor.errors() == ""
    # The blocked proposal left the menu: nothing is picked (another is never picked silently), and it says so.
    assert visitor.shown("proposal-dd") == ""
    assert f"{pid} is blocked" in visitor.page.locator("#proposal-dd").inner_text()
    assert visitor.shown("rule-dd").startswith("S2 ")
    visitor.shot("11_seed_a_blocked_as_shown")


def test_a_refused_call_keeps_the_selection_for_the_next_click(visitor):
    pid = SEED_A_NO_RULE
    visitor.start(SEED_A["title"])
    other = next(p["id"] for p in SEED_A_BOARD if p["id"] != pid)
    visitor.pick("proposal-dd", other)
    visitor.pick("proposal-dd", pid)
    visitor.call("block_proposal", {"proposal_id": pid, "rule_id": "S3"})  # refused: no rule applies
    assert f"no safety rule applies to {pid}" in visitor.text("resolve-msg")
    assert visitor.shown("proposal-dd").startswith(pid + " ") and visitor.shown("rule-dd").startswith("S3 ")
    before = visitor.calls()
    visitor.page.click("#approve-btn")  # the second click acts on what is still shown: pid
    visitor.wait_calls(before + 1)
    assert f"approve_proposal(proposal_id='{pid}')" in visitor.text("result-box")
    assert visitor.page.locator(f"#board [data-proposal={pid}]").get_attribute("data-status") == "approved"
    assert visitor.errors() == ""


def test_impossible_actions_are_disabled_and_say_why(visitor):
    visitor.start(SEED_A["title"])
    refs = [r for p in SEED_A_BOARD for r in p["refs"] if r.startswith("ticket_")]
    for _ in range(SEED_A_EVIDENCE):
        visitor.call("inspect_ticket", {"ticket_id": refs[0]})
    page = visitor.page
    page.wait_for_selector("#inspect-pr-btn[disabled]")
    for button in ("inspect-pr-btn", "inspect-run-btn", "inspect-ticket-btn", "ask-btn"):
        assert page.locator(f"#{button}").is_disabled(), button
    assert "No evidence actions left this phase" in visitor.text("evidence-msg")
    assert not page.locator("#approve-btn").is_disabled() and not page.locator("#hold-btn").is_disabled()
    assert visitor.errors() == ""
    visitor.shot("12_evidence_spent")


def test_a_bad_seed_gets_one_message_beside_the_field(visitor, server_log):
    page = visitor.page
    page.fill("#seed-num input", "-5")
    page.press("#seed-num input", "Tab")
    page.wait_for_function("() => document.querySelector('#preset-dd input').value.startsWith('Custom')")
    page.click("#start-btn")
    page.wait_for_selector("#setup-msg .ro-error")
    assert "seed -5 is not a whole number from 0 to 2147483647" in visitor.text("setup-msg")
    assert page.locator(".ro-error").count() == 1  # one message, beside the field
    assert page.locator(".toast-body, .toast-wrap .error").count() == 0
    assert (
        page.evaluate("() => [...document.querySelectorAll('span')].filter(s => s.innerText === 'Error').length") == 0
    )
    assert page.locator("#approve-btn").is_disabled()
    page.click("button[role=tab]:has-text('Watch')")
    page.click("#watch-btn")
    page.wait_for_function("() => document.querySelector('#setup-msg').innerText.includes('Could not run')")
    assert "Traceback" not in server_log.read_text(errors="replace")
    visitor.shot("13_bad_seed")


@pytest.mark.parametrize("typed", ["", "-5", "2.5", "1e30"])
def test_a_refused_start_keeps_the_running_episode(visitor, typed):
    """The issue's steps: start Seed A, inspect pr_259, clear the Seed field (or type -5) and press Start.
    The board went back to its placeholder and every button was disabled, while the menus still showed
    p2 and pr_259. Now the episode, its board and menus stay, and one message beside the seed says why."""
    page, pr = visitor.page, next(r for r in SEED_A_CI["refs"] if r.startswith("pr_"))
    visitor.start(SEED_A["title"])
    visitor.call("inspect_pr_diff", {"pr_id": pr})
    board, meters, result = visitor.text("board"), visitor.text("meters"), visitor.text("result-box")
    proposal = visitor.shown("proposal-dd")
    page.fill("#seed-num input", typed)
    page.press("#seed-num input", "Tab")
    page.wait_for_function("() => document.querySelector('#preset-dd input').value.startsWith('Custom')")
    page.click("#start-btn")
    page.wait_for_selector("#setup-msg .ro-error")
    message = visitor.text("setup-msg")
    assert "Could not start" in message and "Your episode is unchanged" in message, message
    assert ("enter a seed" if typed == "" else "is not a whole number from 0 to 2147483647") in message
    assert "1000000000000000019884624838656" not in message
    assert page.locator(".ro-error").count() == 1 and page.locator(".toast-body").count() == 0
    # Exactly as it was: board, meters, the last result, the menus' picks, the buttons.
    assert visitor.text("board") == board and visitor.text("meters") == meters and visitor.text("result-box") == result
    assert visitor.shown("proposal-dd") == proposal and visitor.shown("pr-dd") == pr
    assert not page.locator("#approve-btn").is_disabled() and not page.locator("#hold-btn").is_disabled()
    # ... and it plays on: the next call is the episode's second.
    visitor.call("approve_proposal", {"proposal_id": SEED_A_NO_RULE})
    assert visitor.calls() == 2 and visitor.errors() == ""
    if typed == "-5":
        visitor.shot("13b_refused_start_kept")


def test_the_start_button_is_near_the_top_on_a_phone(playwright, web_url):
    """The issue: at 390 px, Start episode sat about 1,250 px down, under the story and the chart. The
    preset, the seed and Start fit in a phone's first screen (844 px); the story is a tap away."""
    v = Visitor(playwright, web_url, 390)
    try:
        page = v.page
        for elem in ("preset-dd", "seed-num", "start-btn"):
            box = page.locator(f"#{elem}").bounding_box()
            assert box and box["y"] + box["height"] <= 844, (elem, box)
        assert not page.locator("#story-seed-a").is_visible()  # folded on a phone
        page.click("#story-more summary")
        assert page.locator("#story-seed-a").is_visible() and page.locator("#headline-chart").is_visible()
        assert v.width() <= 390
    finally:
        v.close()


def test_replay_of_a_collect_file_beside_the_baselines(visitor, tmp_path):
    from releaseops_arena.policies import POLICIES
    from releaseops_arena.splits import task_scenario
    from training.collect import to_record

    scenario = task_scenario("heldout_seeds", 0, "medium")
    run = play(POLICIES["planner"](), scenario)
    good = tmp_path / "results.jsonl"
    good.write_text(json.dumps(asdict(to_record(run, "planner|heldout_seeds|medium|0", "heldout_seeds", 0))) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    page = visitor.page
    page.click("button[role=tab]:has-text('Watch')")
    page.click("#replay-acc .label-wrap")
    page.set_input_files("#replay-file input[type=file]", str(bad))
    page.wait_for_selector("#replay-msg .ro-error")
    assert "line 1 is not JSON" in visitor.text("replay-msg")
    page.set_input_files("#replay-file input[type=file]", str(good))
    page.wait_for_selector("#replay-ok")
    visitor.pick("replay-dd", "1.")
    page.wait_for_selector("#watch-replay")
    assert "every answer matches the file" in visitor.text("replay-msg")
    column = page.locator("#watch-replay")
    assert column.get_attribute("data-outcome") == run["metrics"]["outcome"]
    assert column.locator("li").count() == len(run["steps"])
    assert page.locator("#score-replay").count() == 1 and page.locator("#score-naive").count() == 1
    assert "heldout_seeds #0" in visitor.text("replay-story")
    visitor.shot("14_replay")
    page.click("#watch-btn")  # back to the preset: the replay's column and tick go, with no error
    page.wait_for_function("() => !document.querySelector('#watch-replay') && document.querySelector('#watch-scores')")
    assert page.locator("#score-replay").count() == 0 and visitor.errors() == ""
    assert page.locator(".toast-body").count() == 0
    # The upload route enforces the published limit (gradio's mount would otherwise reset it to none).
    from server.web_replay import MAX_BYTES

    upload = web_url_of(page) + "gradio_api/upload"
    big = {"files": {"name": "big.jsonl", "mimeType": "application/json", "buffer": b" " * (MAX_BYTES + 1024)}}
    assert page.request.post(upload, multipart=big).status == 413
    small = {"files": {"name": "small.jsonl", "mimeType": "application/json", "buffer": b"{}"}}
    assert page.request.post(upload, multipart=small).ok


def test_preset_change_clears_stale_watch_results(visitor):
    page = visitor.page
    page.click("button[role=tab]:has-text('Watch')")
    page.click("#watch-btn")
    page.wait_for_selector("#watch-scores")
    visitor.pick("preset-dd", SEED_B["title"])
    page.wait_for_function("() => !document.querySelector('#watch-scores')")
    assert visitor.text("watch-story").strip() == ""
    page.wait_for_function(
        "() => [...document.querySelectorAll('#watch-show input:checked')].length === 3"
        " && document.querySelector('#watch-show').innerText.includes('inspect everything')"
    )
    page.click("#watch-btn")
    page.wait_for_selector("#watch-inspect_everything")  # Seed B's point: inspecting everything fails
    assert page.locator("#watch-inspect_everything").get_attribute("data-outcome") != "safe_ship"
    assert page.locator("#watch-planner").get_attribute("data-outcome") == "safe_ship"
    first = page.locator("#watch-planner li").first
    assert first.locator("details.ro-raw").count() == 1 and "{" not in first.locator(".say").inner_text()
    visitor.shot("15_watch_seed_b")


@pytest.mark.parametrize("width", [390, 1400])
def test_no_horizontal_overflow(playwright, web_url, width):
    v = Visitor(playwright, web_url, width)
    try:
        assert v.width() <= width, ("loaded", v.width())
        v.start(SEED_A["title"])
        v.call("inspect_pr_diff", {"pr_id": next(r for r in SEED_A_CI["refs"] if r.startswith("pr_"))})
        v.call("block_proposal", {"proposal_id": SEED_A_NO_RULE, "rule_id": "S3"})  # refused: a message shows
        assert v.errors()
        assert v.width() <= width, ("play", v.width())
        v.shot(f"16_play_{width}")
        v.page.click("button[role=tab]:has-text('Watch')")
        v.page.click("#watch-btn")
        v.page.wait_for_selector("#watch-scores")
        v.page.click("#replay-acc .label-wrap")
        assert v.width() <= width, ("watch", v.width())
        v.shot(f"17_watch_{width}")
        v.page.click("button[role=tab]:has-text('Results')")
        v.page.wait_for_selector("#results-slices")
        assert v.width() <= width, ("results", v.width())
        v.shot(f"18_results_{width}")
    finally:
        v.close()


# ------------------------------------------ no browser: what the tab renders


def test_rendered_board_never_names_hidden_truth():
    """Every board, meter and result the Play tab renders mid-episode is free of hidden fields."""
    from server import web_render as render
    from server.web_session import Session

    checked = 0
    for family in (*FAMILIES, *HELDOUT_FAMILIES):
        for difficulty in DIFFICULTIES:
            scenario = {"family": family, "seed": 3, "difficulty": difficulty, "archetype_mix": "random"}
            run = play(RandomPolicy(), scenario, rng_seed=3)
            sess = Session.start(scenario, title="seed 3")
            for step in run["steps"]:
                result = sess.step(step["tool"], step["arguments"])
                if sess.episode.done:
                    break
                for html in (
                    render.board_html(sess),
                    render.meters_html(sess),
                    render.return_html(sess),
                    render.result_html(step["tool"], step["arguments"], result),
                    render.error_html(result.error),
                    render.history_html(sess),
                ):
                    assert not FORBIDDEN.search(html), html
                    checked += 1
    assert checked > 100


def test_handlers_return_view_models_without_a_browser():
    from releaseops_arena.catalog import ARTIFACT_KINDS, inspect_call
    from releaseops_arena.scenario_builder import EVIDENCE_PER_ROUND
    from server import web_handlers as handlers
    from server.web_content import load_presets

    presets = load_presets()
    assert "press Start episode first" in handlers.act(None, "approve_proposal", {"proposal_id": "p1"}).error
    bad = handlers.start(presets, handlers.CUSTOM, "nope", 1, "medium", "random")
    assert bad.session is None and "Could not start" in bad.setup and "family" in bad.setup
    assert bad.kept  # the page keeps what it shows: before any Start, the placeholder and disabled buttons
    view = handlers.start(presets, SEED_A["title"], None, None, None, None)  # a preset wins over the fields
    sess = view.session
    assert sess.episode.config == SEED_A["scenario"] and all(view.enabled.values())
    assert [pid for _, pid in view.proposal.choices] == [p["id"] for p in SEED_A_BOARD]
    assert view.proposal.value == SEED_A_BOARD[0]["id"]  # a fresh board: the first pending one
    assert list(view.refs) == [k.kind for k in ARTIFACT_KINDS]
    assert {r for m in view.refs.values() for _, r in m.choices} == {r for p in SEED_A_BOARD for r in p["refs"]}
    assert f"/ {EVIDENCE_PER_ROUND}</div>" in view.meters and "0 calls" in view.meters
    unpicked = handlers.act(sess, "block_proposal", {"proposal_id": SEED_A_CI["id"], "rule_id": None})
    assert "choose a rule first" in unpicked.error and sess.episode.counters.tool_calls == 0  # nothing sent
    ref = SEED_A_CI["refs"][-1]
    tool, args = inspect_call(ref)
    inspected = handlers.act(sess, tool, args, handlers.Picks(SEED_A_CI["id"]))
    assert inspected.error == "" and tool in inspected.result and "1 call" in inspected.meters
    assert inspected.proposal.value == SEED_A_CI["id"]  # the visitor's pick stays
    for pid in [p["id"] for p in SEED_A_BOARD]:  # approve the rest of triage: the phase ends
        view = handlers.act(sess, "approve_proposal", {"proposal_id": pid})
    # The menus offer this phase's artifacts only: triage's are gone with their phase (test_web_views.py).
    offered = {r for m in view.refs.values() for _, r in m.choices}
    assert offered == {r for p in sess.board()["proposals"] for r in p["refs"]} and not offered & set(SEED_A_CI["refs"])
    watched = handlers.watch(presets, SEED_A["title"], None, None, None, None)
    assert (
        list(watched.runs)
        == list(handlers.WATCH_POLICIES)
        == ["naive", "rule", "inspect_everything", "planner", "trained", "oracle"]
    )
    assert all(f"score-{n}" in watched.html for n in handlers.WATCH_POLICIES)
    assert "watch-trained" in watched.html and "watch-oracle" not in watched.html  # not shown by default
    assert "watch-oracle" in handlers.watch(presets, SEED_A["title"], None, None, None, None, shown=["oracle"]).html
    assert handlers.fill_preset(presets, SEED_B["title"])[0] == SEED_B["scenario"]["family"]
    assert handlers.fill_preset(presets, handlers.CUSTOM) is None


def test_watch_html_says_what_each_policy_sees_and_which_made_the_same_calls():
    from server import web_handlers as handlers
    from server import web_render as render

    runs = {name: handlers.watch_run(name, SEED_B["scenario"]) for name in ("rule", "trained", "oracle")}
    assert [r["sees"] for r in runs.values()] == ["the board only", "the board only", "the hidden world (privileged)"]
    runs["copy"] = {**runs["rule"], "label": "copy of rule"}
    html = render.watch_html(runs, 0, shown=["copy"])
    row = re.search(r"<tr id='score-copy'>.*?</tr>", html).group(0)
    assert "same calls as rule" in row and "same calls as" not in re.search(
        r"<tr id='score-rule'>.*?</tr>", html
    ).group(0)
    assert "id='watch-copy'" in html and "id='watch-rule'" not in html and "--cols:1" in html
    assert "Tick a policy" in render.watch_html(runs, 0, shown=[]) and "class='col'" not in render.watch_html(
        runs, 0, []
    )
    assert not FORBIDDEN.search(render.watch_scores_html(runs))  # the labels name no hidden field


def test_the_board_shows_the_benchmark_version_and_stamps_its_episode_json():
    import html

    from server import web_handlers as handlers
    from server.web_content import load_presets
    from server.web_ui import INTRO

    assert "id='benchmark-version'" in INTRO and f"benchmark {BENCHMARK_VERSION}</span></h1>" in INTRO
    watched = handlers.watch(load_presets(), handlers.CUSTOM, FAMILIES[0], 3, "easy", "random", shown=[])
    shown = json.loads(html.unescape(re.search(r"<code>(.*?)</code>", watched.story).group(1)))
    assert shown == {
        "family": FAMILIES[0],
        "seed": 3,
        "difficulty": "easy",
        "archetype_mix": "random",
        "benchmark_version": BENCHMARK_VERSION,
    }


def test_builder_returns_blocks_without_web_manager():
    import gradio as gr

    from server.web_content import load_presets
    from server.web_ui import build_release_board

    assert isinstance(build_release_board(None, [], None, False, "t", ""), gr.Blocks)
    presets = load_presets()
    assert presets[SEED_A["title"]]["scenario"] == SEED_A["scenario"]
    assert presets[SEED_B["title"]]["scenario"] == SEED_B["scenario"]


def test_the_replay_reads_only_files_uploaded_through_the_upload_route(web_url, tmp_path):
    """A client can name any path in the upload event's data; the board reads only what Gradio received."""
    import pathlib
    import uuid

    import httpx
    from gradio.utils import get_upload_folder

    secret = tmp_path / f"results-{uuid.uuid4().hex}.jsonl"  # a collect file elsewhere on the server's disk
    secret.write_text(json.dumps({"task": {"benchmark_version": "SECRET-TOKEN"}}) + "\n")
    api = web_url + "gradio_api"
    config = httpx.get(web_url + "config", timeout=30).json()
    files = {c["id"] for c in config["components"] if c.get("type") == "file"}
    upload = next(
        i for i, d in enumerate(config["dependencies"]) if any(t[0] in files and t[1] == "upload" for t in d["targets"])
    )
    for path in (str(secret), "/no/such/file.jsonl"):
        session = uuid.uuid4().hex[:10]
        event = {"path": path, "meta": {"_type": "gradio.FileData"}, "orig_name": "x.jsonl"}
        joined = httpx.post(
            f"{api}/queue/join", json={"data": [event], "fn_index": upload, "session_hash": session}, timeout=30
        )
        assert joined.status_code == 200, joined.text
        with httpx.stream("GET", f"{api}/queue/data", params={"session_hash": session}, timeout=30) as stream:
            for line in itertools.islice(stream.iter_lines(), 200):
                if line.startswith("data:") and json.loads(line[5:]).get("msg") == "process_completed":
                    output = json.dumps(json.loads(line[5:]).get("output"))
                    break
            else:
                pytest.fail("no reply to the upload event")
        assert "SECRET-TOKEN" not in output and "No such file" not in output and "not JSON" not in output, output
        assert "Cannot replay" not in output and "episode(s) read" not in output, output  # refused before any read
    assert not any(pathlib.Path(get_upload_folder()).rglob(secret.name)), "a named file was copied into the cache"
