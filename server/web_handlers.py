"""The Release board's handlers: each event in, a view model out (no gradio here).

`start`, `act` and `watch` return what the page should show as plain data
(`PlayView`, `WatchView`); `server/web_ui.py` only maps those onto components.
Every menu is built from the catalogue (`MENUS`, `ref_menu`), so the board
offers exactly the values the tools accept. After a call, refused or not, a menu
keeps the visitor's pick (`Picks`); a pick that is no longer offered (resolved, or
gone with its phase) becomes no pick, and the menu's label says why: another
proposal is never picked silently. Evidence menus offer this phase's artifacts
only. A button that cannot make a valid call is disabled, and its group says why
(`availability`). A refused Start changes only the message beside the setup
fields: the running episode and everything shown stay (`PlayView.keep`).
Over 400 lines: the Play handlers with their menus, and the Watch and replay handlers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from releaseops_arena import catalog
from releaseops_arena.episode import EpisodeOver, StepResult
from releaseops_arena.policies import POLICIES, play
from releaseops_arena.safety_rules import rules_for_risk

from . import web_render as render
from . import web_replay
from .web_session import Session

# The Watch tab's policies, in column order, with what each does (what it may see comes from the
# policy itself: `privileged`). The trained one plays the shipped weights (`releaseops_arena.policies.trained`).
WATCH_POLICIES: dict[str, tuple[str, str]] = {
    "naive": ("naive", "approves every proposal, the ship included"),
    "rule": ("rule", "a hand-made suspicion score over the visible cues"),
    "inspect_everything": ("inspect everything", "spends the evidence it can on whatever is in sight, then decides"),
    "planner": ("reference planner", "weighs every visible cue with the generator's published odds"),
    "trained": ("trained policy", "a small network trained on the train split: planner clone + RL (greedy)"),
    "oracle": ("oracle", "reads the hidden world state: the upper bound, not a fair player"),
}
# Transcripts shown side by side at first (a preset may name its own: `web_content.PRESET_WATCH`): the
# naive supervisor against two that look. Six columns are too narrow to read; the table above lists every result.
# Naive first: the only one that fails Seed A.
WATCH_SHOWN = ("naive", "planner", "trained")
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
class Menu:
    """One menu after an event: its choices, the value shown (None: nothing picked) and its label."""

    choices: list[tuple[str, str]]
    value: str | None
    label: str


@dataclass
class Picks:
    """What the visitor had selected when the event fired: kept unless the choice disappeared."""

    proposal: str | None = None
    refs: dict[str, str | None] | None = None  # artifact kind -> ref


@dataclass
class PlayView:
    """What the Play tab shows after an event. A menu left as None keeps what the visitor has."""

    session: Session | None
    meters: str
    board: str
    notes: dict[str, str]  # group (resolve, evidence, hold) -> its message: why disabled, or the call refused
    ret: str = ""
    result: str = ""
    outcome: str = ""
    metrics: str = ""
    history: str = ""
    setup: str = ""
    proposal: Menu | None = None
    refs: dict[str, Menu] | None = None  # artifact kind -> its menu
    enabled: dict[str, bool] | None = None  # button key -> enabled (see BUTTONS)
    error: str = ""  # the refused or unsent call's message (also in its group's note)
    kept: bool = False  # a refused Start: the page keeps all it shows (the episode too) but `setup`

    @classmethod
    def keep(cls, sess: Session | None, setup: str) -> "PlayView":
        """A refused Start: only the message beside the fields changes; the other fields are left empty."""
        return cls(sess, "", "", {}, setup=setup, kept=True)


# The call buttons, by key: the key of an inspect button is its artifact kind.
BUTTONS = ("approve", "block", *(k.kind for k in catalog.ARTIFACT_KINDS), "ask", "hold")
GROUP_OF_TOOL = {
    "approve_proposal": "resolve",
    "block_proposal": "resolve",
    "ask_worker": "evidence",
    "hold_release": "hold",
    **{k.tool: "evidence" for k in catalog.ARTIFACT_KINDS},
}
GROUPS = ("resolve", "evidence", "hold")


@dataclass
class WatchView:
    runs: dict | None  # policy name -> its `play` transcript, plus its label, role and what it sees
    steps: int | None  # the slider's range (and position); None keeps it
    story: str
    html: str
    setup: str = ""  # a message beside the scenario fields (a bad seed, say)
    shown: list[str] | None = None  # the transcripts to tick (a replay ticks its own column)


# ------------------------------------------------------------- menus


def pending_ids(board: dict) -> list[str]:
    return [p["id"] for p in board["proposals"] if p.get("status", "pending") == "pending"]


def proposal_menu(board: dict, picked: str | None, fresh: bool = False) -> Menu:
    """The pending proposals. The visitor's pick stays; if it is no longer pending, nothing is picked and the
    label says why (another proposal is never picked silently). A fresh board picks the first pending one."""
    pending = pending_ids(board)
    choices = [
        (f"{p['id']} · {p['worker']} · {p['request']}", p["id"]) for p in board["proposals"] if p["id"] in pending
    ]
    if fresh:
        return Menu(choices, pending[0] if pending else None, "Proposal")
    if picked in pending:
        return Menu(choices, picked, "Proposal")
    if not pending:
        return Menu(choices, None, "Proposal (none pending)")
    if not picked:
        return Menu(choices, None, "Proposal (choose one)")
    status = next((p.get("status") for p in board["proposals"] if p["id"] == picked), None)
    gone = f"{picked} is {status}" if status else f"{picked} left the board with its phase"
    return Menu(choices, None, f"Proposal ({gone}; choose another)")


def rule_hint(board: dict | None, pid: str | None) -> str:
    """The rules a block of this proposal may cite, from its visible risk tags (a hint, never a pick)."""
    if not board or not pid:
        return "Rule (for block)"
    for p in board["proposals"]:
        if p["id"] == pid:
            rules = rules_for_risk(p["risk"])
            return (
                f"Rule (for block; {pid}'s tags allow {', '.join(rules)})"
                if rules
                else (f"Rule (for block; no rule applies to {pid}'s tags)")
            )
    return "Rule (for block)"


def board_refs(board: dict, kind: catalog.ArtifactKind) -> list[str]:
    """The refs of one kind on this phase's board, in board order."""
    return list(dict.fromkeys(r for p in board["proposals"] for r in p["refs"] if r.startswith(kind.prefix)))


def ref_menu(sess: Session, kind: catalog.ArtifactKind, picked: str | None = None, fresh: bool = False) -> Menu:
    """Refs of one kind on this phase's board only. An earlier phase's ref is still a valid call, but it
    costs a budget unit and an evidence action like any other, for a proposal already gone: kept as a pick
    across the phase change, one click spent it unnoticed. So a pick that left with its phase becomes no
    pick, and the label says why (as the proposal menu does)."""
    refs = board_refs(sess.board(), kind)
    choices = [(r, r) for r in refs]
    if picked in refs:
        return Menu(choices, picked, kind.label)
    if fresh and refs:
        return Menu(choices, refs[0], kind.label)
    gone = f"{picked} left the board with its phase; " if picked and not fresh else ""
    return Menu(choices, None, f"{kind.label} ({gone}{'choose one' if refs else 'none on this board'})")


def availability(sess: Session | None) -> tuple[dict[str, bool], dict[str, str]]:
    """Which buttons can make a valid call now, and, per group, why the others cannot."""
    off = {key: False for key in BUTTONS}
    if sess is None:
        return off, {g: "" for g in GROUPS}
    if sess.episode.done:
        return off, {
            g: "<div class='ro-why'>The episode is over: press Start episode to play again.</div>" for g in GROUPS
        }
    b = sess.board()
    pending = bool(pending_ids(b))
    enabled = {"approve": pending, "block": pending, "hold": True}
    why = {g: "" for g in GROUPS}
    if not pending:
        why["resolve"] = "<div class='ro-why'>Nothing is pending: hold the release to move on.</div>"
    evidence_reason = ""
    if b["review_budget_remaining"] <= 0:
        evidence_reason = "The review budget is spent: inspecting or asking now would be refused."
    elif b["evidence_actions_remaining"] <= 0:
        evidence_reason = "No evidence actions left this phase: approve, block or hold to move on."
    absent = []
    for kind in catalog.ARTIFACT_KINDS:
        has = bool(board_refs(b, kind))
        enabled[kind.kind] = not evidence_reason and has
        if not has:
            absent.append(kind.label)
    enabled["ask"] = not evidence_reason
    if evidence_reason:
        why["evidence"] = f"<div class='ro-why'>{evidence_reason}</div>"
    elif absent:
        why["evidence"] = f"<div class='ro-why'>Nothing to inspect: no {' or '.join(absent)} on this board.</div>"
    return enabled, why


# ---------------------------------------------------------- handlers


def play_view(
    sess: Session | None,
    *,
    error: str | None = None,
    charged: bool = True,
    call: tuple[str, dict] | None = None,
    result: StepResult | None = None,
    setup: str = "",
    picks: Picks | None = None,
    group: str = "resolve",
) -> PlayView:
    """The Play tab after an event. `picks` None: a fresh board (Start), whose menus take their first choice."""
    enabled, notes = availability(sess)
    shown_error = render.error_html(error, charged)
    notes[group] = shown_error + notes[group]
    if sess is None:
        return PlayView(
            None,
            render.meters_html(None),
            render.board_html(None),
            notes,
            setup=setup,
            enabled=enabled,
            error=shown_error,
        )
    board = sess.board()
    fresh = picks is None
    picks = picks or Picks()
    refs = picks.refs or {}
    return PlayView(
        sess,
        render.meters_html(sess),
        render.board_html(sess),
        notes,
        ret=render.return_html(sess),
        result=render.result_html(call[0], call[1], result) if call else "",
        outcome=render.outcome_html(sess),
        metrics=render.metrics_html(sess),
        history=render.history_html(sess),
        setup=setup,
        proposal=proposal_menu(board, picks.proposal, fresh),
        refs={kind.kind: ref_menu(sess, kind, refs.get(kind.kind), fresh) for kind in catalog.ARTIFACT_KINDS},
        enabled=enabled,
        error=shown_error,
    )


class SetupError(ValueError):
    """A scenario field the visitor must fix: shown beside the fields, never as a traceback."""


def seed_of(value) -> int:
    """The Seed field as the engine's seed. The field delivers a number as typed (`gr.Number` without a
    precision: with one, gradio itself rounds 2.5 to 2 and 1e30 to a 31-digit integer); a whole float is its
    int (2.0 is 2), and the engine's one check (`catalog.check_seed`) says what else a seed may be."""
    if value is None or value == "":
        raise SetupError(f"enter a seed: {catalog.SEED_RANGE}")
    if type(value) is float and value.is_integer() and abs(value) < 2**53:
        value = int(value)  # exactly that integer (-5.0 is quoted as -5); 1e30 stays a float, quoted as 1e+30
    try:
        return catalog.check_seed(value)
    except catalog.SeedError as exc:  # the engine's range, without its note on JSON strings of digits
        raise SetupError(f"seed {exc.got} is not {catalog.SEED_RANGE}") from None


def scenario_of(presets: dict, preset_name: str, family, seed, difficulty, mix) -> tuple[dict, dict | None]:
    """The scenario asked for, and its preset if one was picked (a preset is authoritative: the fields
    only mirror it, and editing a field switches to Custom)."""
    chosen = presets.get(preset_name)
    if chosen is not None:
        return dict(chosen["scenario"]), chosen
    for name, value, valid in (
        ("family", family, catalog.ALL_FAMILIES),
        ("difficulty", difficulty, catalog.DIFFICULTIES),
        ("archetype mix", mix, catalog.ALL_MIXES),
    ):
        if value not in valid:
            raise SetupError(f"choose a {name} from the list (got {value!r})")
    return {"family": family, "seed": seed_of(seed), "difficulty": difficulty, "archetype_mix": mix}, None


def setup_error_html(message: str, elem_id: str = "setup-error") -> str:
    return f"<div class='ro-error' role='alert' id='{elem_id}'>{render.escape(message)}</div>"


def fill_preset(presets: dict, name: str) -> list | None:
    """The setup fields a preset fills (family, seed, difficulty, mix), or None for Custom."""
    p = presets.get(name)
    if p is None:
        return None
    s = p["scenario"]
    return [s["family"], s["seed"], s["difficulty"], s["archetype_mix"]]


def start(presets: dict, preset_name, family, seed, difficulty, mix, running: Session | None = None) -> PlayView:
    """A new episode from the setup fields. A refused one changes nothing but the message beside the
    fields: the `running` episode, its board, menus and buttons stay as they were (`PlayView.keep`)."""
    try:
        scenario, chosen = scenario_of(presets, preset_name, family, seed, difficulty, mix)
        # The meters name a preset, else only seed and difficulty: the family and mix the visitor
        # chose stay in the setup row, out of the board area.
        title = preset_name if chosen else f"seed {scenario['seed']} · {scenario['difficulty']}"
        sess = Session.start(scenario, title, chosen["story"] if chosen else "")
    except (ValueError, TypeError, OverflowError) as exc:  # the engine lists the valid values
        kept = " Your episode is unchanged." if running is not None else ""
        return PlayView.keep(running, setup_error_html(f"Could not start: {exc}.{kept}"))
    return play_view(sess, setup=f"<span class='ro-muted'>Started <b>{render.escape(title)}</b>.</span>")


def act(sess: Session | None, tool: str, args: dict, picks: Picks | None = None) -> PlayView:
    """One tool call from the buttons, with exactly the arguments shown selected; nothing is sent while an
    argument is unpicked. The menus keep the visitor's picks afterwards (`picks`), refused call or not."""
    picks = picks or Picks()
    group = GROUP_OF_TOOL.get(tool, "resolve")
    if sess is None:
        return play_view(None, error="press Start episode first", charged=False, group=group)
    missing = next((NEEDS[name] for name, value in args.items() if not value), None)
    if missing:
        return play_view(
            sess,
            error=f"choose {missing} first (nothing was sent to the engine)",
            charged=False,
            picks=picks,
            group=group,
        )
    try:
        result = sess.step(tool, args)
    except EpisodeOver as exc:
        return play_view(sess, error=str(exc), charged=False, picks=picks, group=group)
    except Exception as exc:  # never a stack trace in the page
        return play_view(sess, error=f"internal error ({type(exc).__name__}): {exc}", charged=False, picks=picks)
    return play_view(sess, error=result.error, call=(tool, args), result=result, picks=picks, group=group)


def watch_run(name: str, scenario: dict) -> dict:
    """One policy's episode through the engine's `play`, labelled for the page."""
    label, role = WATCH_POLICIES[name]
    policy = POLICIES[name]()
    sees = "the hidden world (privileged)" if policy.privileged else "the board only"
    return {**play(policy, scenario), "label": label, "role": role, "sees": sees}


def episode_json(scenario: dict) -> dict:
    """The scenario as a reset's keywords, stamped with the benchmark version it was played under."""
    return {**scenario, "benchmark_version": catalog.BENCHMARK_VERSION}


def shown_for(presets: dict, preset_name) -> list[str]:
    """The transcripts a preset opens with (Seed B: inspect_everything against the planner), else the default."""
    chosen = presets.get(preset_name) or {}
    return list(chosen.get("watch") or WATCH_SHOWN)


def watch_story(preset_name: str, chosen: dict | None, scenario: dict) -> str:
    if chosen:
        return f"<div class='ro-info'><b>{render.escape(preset_name)}.</b> {render.escape(chosen['story'])}</div>"
    scenario_json = render.escape(json.dumps(episode_json(scenario)))
    return f"<div class='ro-info'>Scenario <code>{scenario_json}</code></div>"


def watch(presets: dict, preset_name, family, seed, difficulty, mix, shown=WATCH_SHOWN) -> WatchView:
    """Every Watch policy on the chosen scenario; the transcripts of `shown` side by side."""
    try:
        scenario, chosen = scenario_of(presets, preset_name, family, seed, difficulty, mix)
        runs = {name: watch_run(name, scenario) for name in WATCH_POLICIES}
    except (ValueError, TypeError, OverflowError) as exc:
        return WatchView(None, None, "", "", setup=setup_error_html(f"Could not run: {exc}"))
    longest = max(len(r["steps"]) for r in runs.values())
    return WatchView(runs, longest, watch_story(preset_name, chosen, scenario), render.watch_html(runs, longest, shown))


REPLAY = "replay"  # the Watch column of an episode from a trajectory file


def replay(record: dict, shown=WATCH_SHOWN) -> tuple[WatchView, str]:
    """One episode of a `training.collect` file beside every Watch policy on the same task, and a note on it."""
    try:
        mine = web_replay.replay_run(record)
        runs = {REPLAY: mine, **{name: watch_run(name, mine["scenario"]) for name in WATCH_POLICIES}}
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        message = setup_error_html(f"Cannot replay this episode: {exc}", "replay-error")
        return WatchView(None, None, "", "", shown=list(shown)), message
    picked = [REPLAY, *[n for n in shown if n != REPLAY]][:3]
    longest = max(len(r["steps"]) for r in runs.values())
    task = record["task"]
    where = f"task {task['split']} #{task['index']}, " if "split" in task and "index" in task else ""
    story = (
        f"<div class='ro-info' id='replay-story'><b>{render.escape(mine['label'])}</b> on {render.escape(where)}"
        f"scenario <code>{render.escape(json.dumps(episode_json(mine['scenario'])))}</code>: "
        f"{render.escape(mine['metrics']['outcome'])}, return {render.signed(mine['return'])}. "
        "The baselines below play the same task.</div>"
    )
    note = (
        "<div class='ro-info' id='replay-ok'>Replayed through the engine: every answer matches the file.</div>"
        if mine["matches"]
        else "<div class='ro-error' id='replay-mismatch'>Replayed through the engine, but its answers differ "
        "from the file's (another engine version or a different task draw): the column shows the engine's.</div>"
    )
    return WatchView(runs, longest, story, render.watch_html(runs, longest, picked), shown=picked), note
