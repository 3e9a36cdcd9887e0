"""The Release board's handlers: each event in, a view model out (no gradio here).

`start`, `act` and `watch` return what the page should show as plain data
(`PlayView`, `WatchView`); `server/web_ui.py` only maps those onto components.
Every menu is built from the catalogue (`MENUS`, `ref_menu`), so the board
offers exactly the values the tools accept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from releaseops_arena import catalog
from releaseops_arena.episode import EpisodeOver, StepResult
from releaseops_arena.policies import POLICIES, play
from releaseops_arena.safety_rules import rules_for_risk

from . import web_render as render
from .web_session import Session

# The Watch tab's policies, in column order, with what each does (what it may see comes from the
# policy itself: `privileged`). The trained one plays the shipped weights (`releaseops_arena.policies.trained`).
WATCH_POLICIES: dict[str, tuple[str, str]] = {
    "naive": ("naive", "approves every proposal, the ship included"),
    "rule": ("rule", "a hand-made suspicion score over the visible cues"),
    "planner": ("reference planner", "weighs every visible cue with the generator's published odds"),
    "trained": ("trained policy", "a small network trained on the train split: planner clone + RL (greedy)"),
    "oracle": ("oracle", "reads the hidden world state: the upper bound, not a fair player"),
}
# Transcripts shown side by side at first: the three that see only the board and decide for themselves.
# Five columns of call transcripts are too narrow to read; every policy's result is in the table above them.
WATCH_SHOWN = ("rule", "planner", "trained")
CUSTOM = "Custom (pick below)"

# The menus of the closed tool arguments: (label, value) pairs, values straight from the catalogue.
MENUS: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("block_proposal", "rule_id"): [(f"{rid} · {rule.summary}", rid) for rid, rule in catalog.RULES.items()],
    ("ask_worker", "worker_id"): [(w, w) for w in catalog.WORKERS],
    ("ask_worker", "question_type"): [(q, q) for q in catalog.QUESTION_TYPES],
    ("hold_release", "reason_code"): [(r, r) for r in catalog.HOLD_REASONS],
}
# What a visitor must pick for each tool argument before a call is sent.
NEEDS: dict[str, str] = {
    "proposal_id": "a proposal",
    "rule_id": "a rule",
    "worker_id": "a worker",
    "question_type": "a question type",
    "reason_code": "a hold reason",
    **{a.argument: f"a {a.label}" for a in catalog.ARTIFACT_KINDS},
}


@dataclass
class RefMenu:
    choices: list[tuple[str, str]]
    value: str | None
    label: str


@dataclass
class PlayView:
    """What the Play tab shows after an event. A menu left as None keeps what the visitor has."""

    session: Session | None
    meters: str
    board: str
    error: str
    ret: str = ""
    result: str = ""
    outcome: str = ""
    metrics: str = ""
    history: str = ""
    setup: str = ""
    proposals: list[tuple[str, str]] | None = None
    proposal: str | None = None
    rule: str | None = None
    refs: dict[str, RefMenu] | None = None  # artifact kind -> its menu
    live: bool = False  # whether the call buttons are enabled


@dataclass
class WatchView:
    runs: dict | None  # policy name -> its `play` transcript, plus its label, role and what it sees
    steps: int | None  # the slider's range (and position); None keeps it
    story: str
    html: str


# ------------------------------------------------------------- menus


def proposal_choices(board: dict) -> tuple[list[tuple[str, str]], str | None]:
    """Every proposal on the board, labelled, and the first pending one (the default pick)."""
    choices, first_pending = [], None
    for p in board["proposals"]:
        status = p.get("status", "pending")
        label = f"{p['id']} · {p['worker']} · {p['request']}" + ("" if status == "pending" else f" [{status}]")
        choices.append((label, p["id"]))
        if status == "pending" and first_pending is None:
            first_pending = p["id"]
    return choices, first_pending or (choices[0][1] if choices else None)


def rule_for(board: dict | None, pid: str | None) -> str | None:
    """The first rule a block of this proposal may cite (from its visible risk tags), as a default."""
    if not board or not pid:
        return None
    for p in board["proposals"]:
        if p["id"] == pid:
            rules = rules_for_risk(p["risk"])
            return rules[0] if rules else None
    return None


def ref_menu(sess: Session, kind: catalog.ArtifactKind) -> RefMenu:
    """Refs of one kind: those on the current board first, then ones seen in earlier phases (still valid)."""
    current = [r for p in sess.board()["proposals"] for r in p["refs"] if r.startswith(kind.prefix)]
    current = list(dict.fromkeys(current))
    older = [r for r in sess.view.refs if r.startswith(kind.prefix) and r not in current]
    choices = [(r, r) for r in current] + [(f"{r} (earlier phase)", r) for r in older]
    return RefMenu(choices, (current or older or [None])[0], kind.label if choices else f"{kind.label} (none seen yet)")


# ---------------------------------------------------------- handlers


def play_view(
    sess: Session | None,
    *,
    error: str | None = None,
    charged: bool = True,
    call: tuple[str, dict] | None = None,
    result: StepResult | None = None,
    setup: str = "",
) -> PlayView:
    if sess is None:
        return PlayView(
            None, render.meters_html(None), render.board_html(None), render.error_html(error, charged), setup=setup
        )
    board = sess.board()
    choices, pick = proposal_choices(board)
    return PlayView(
        sess,
        render.meters_html(sess),
        render.board_html(sess),
        render.error_html(error, charged),
        ret=render.return_html(sess),
        result=render.result_html(call[0], call[1], result) if call else "",
        outcome=render.outcome_html(sess),
        metrics=render.metrics_html(sess),
        history=render.history_html(sess),
        setup=setup,
        proposals=choices,
        proposal=pick,
        rule=rule_for(board, pick),
        refs={kind.kind: ref_menu(sess, kind) for kind in catalog.ARTIFACT_KINDS},
        live=not sess.episode.done,
    )


def scenario_of(presets: dict, preset_name: str, family, seed, difficulty, mix) -> tuple[dict, dict | None]:
    """The scenario asked for, and its preset if one was picked (a preset is authoritative: the fields
    only mirror it, and editing a field switches to Custom)."""
    chosen = presets.get(preset_name)
    if chosen is not None:
        return dict(chosen["scenario"]), chosen
    return {
        "family": family,
        "seed": int(seed if seed is not None else 0),
        "difficulty": difficulty,
        "archetype_mix": mix,
    }, None


def fill_preset(presets: dict, name: str) -> list | None:
    """The setup fields a preset fills (family, seed, difficulty, mix), or None for Custom."""
    p = presets.get(name)
    if p is None:
        return None
    s = p["scenario"]
    return [s["family"], s["seed"], s["difficulty"], s["archetype_mix"]]


def start(presets: dict, preset_name, family, seed, difficulty, mix) -> PlayView:
    try:
        scenario, chosen = scenario_of(presets, preset_name, family, seed, difficulty, mix)
        # The meters name a preset, else only seed and difficulty: the family and mix the visitor
        # chose stay in the setup row, out of the board area.
        title = preset_name if chosen else f"seed {scenario['seed']} · {scenario['difficulty']}"
        sess = Session.start(scenario, title, chosen["story"] if chosen else "")
    except (ValueError, TypeError) as exc:  # the engine lists the valid values
        return play_view(None, error=f"could not start: {exc}", charged=False)
    return play_view(sess, setup=f"<span class='ro-muted'>Started <b>{render.escape(title)}</b>.</span>")


def act(sess: Session | None, tool: str, args: dict) -> PlayView:
    """One tool call from the buttons; nothing is sent while an argument is still unpicked."""
    if sess is None:
        return play_view(None, error="press Start episode first", charged=False)
    missing = next((NEEDS[name] for name, value in args.items() if not value), None)
    if missing:
        return play_view(sess, error=f"choose {missing} first (nothing was sent to the engine)", charged=False)
    try:
        result = sess.step(tool, args)
    except EpisodeOver as exc:
        return play_view(sess, error=str(exc), charged=False)
    except Exception as exc:  # never a stack trace in the page
        return play_view(sess, error=f"internal error ({type(exc).__name__}): {exc}", charged=False)
    return play_view(sess, error=result.error, call=(tool, args), result=result)


def pick_rule(sess: Session | None, pid: str | None) -> str | None:
    return rule_for(sess.board() if sess else None, pid)


def watch_run(name: str, scenario: dict) -> dict:
    """One policy's episode through the engine's `play`, labelled for the page."""
    label, role = WATCH_POLICIES[name]
    policy = POLICIES[name]()
    sees = "the hidden world (privileged)" if policy.privileged else "the board only"
    return {**play(policy, scenario), "label": label, "role": role, "sees": sees}


def episode_json(scenario: dict) -> dict:
    """An episode's scenario as the board shows it in JSON, stamped with the benchmark version
    (the same scenario plays differently under another version)."""
    return {**scenario, "benchmark_version": catalog.BENCHMARK_VERSION}


def watch(presets: dict, preset_name, family, seed, difficulty, mix, shown=WATCH_SHOWN) -> WatchView:
    """Every Watch policy on the chosen scenario; the transcripts of `shown` side by side."""
    try:
        scenario, chosen = scenario_of(presets, preset_name, family, seed, difficulty, mix)
        runs = {name: watch_run(name, scenario) for name in WATCH_POLICIES}
    except (ValueError, TypeError) as exc:
        return WatchView(None, None, "", render.error_html(f"could not run: {exc}", charged=False))
    longest = max(len(r["steps"]) for r in runs.values())
    scenario_json = render.escape(json.dumps(episode_json(scenario)))
    story = (
        f"<div class='ro-info'><b>{render.escape(preset_name)}.</b> {render.escape(chosen['story'])}</div>"
        if chosen
        else f"<div class='ro-info'>Scenario <code>{scenario_json}</code></div>"
    )
    return WatchView(runs, longest, story, render.watch_html(runs, longest, shown))
