"""The "Release board" tab at /web: play an episode, watch the baselines, read the results.

`build_release_board` is OpenEnv's `gradio_builder`. It is called once when the
app is created, with OpenEnv's `web_manager`, and ignores it on purpose: that
manager holds ONE environment shared by every visitor (the Playground tab's).
Here each browser session keeps its own engine `Episode` in a `gr.State`, so
two visitors never share an episode, and web play runs in-process: it never
takes one of the server's WebSocket training slots (MAX_CONCURRENT_ENVS).

No game logic lives here. Every call goes through `Episode.step`, the board
comes from `Episode.board()` (the public observation: it never carries the
family, archetypes, truth labels or latent violation ids), invalid calls show
the engine's own message, and the end shows `Episode.metrics()`. Watch runs
the reference policies with the engine's `play`.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from releaseops_arena import catalog, rewards
from releaseops_arena.baselines import POLICIES, play
from releaseops_arena.episode import Episode, EpisodeOver, StepResult
from releaseops_arena.safety_rules import rules_for_risk

WATCH_POLICIES = ("naive", "rule", "oracle")
CUSTOM = "Custom (pick below)"
REF_KINDS = (("pr", "pr_", "inspect_pr_diff", "pr_id"),
             ("ci_run", "ci_run_", "inspect_ci_run", "run_id"),
             ("ticket", "ticket_", "inspect_ticket", "ticket_id"))
OUTCOME_TEXT = {
    "safe_ship": "Shipped safely: every safety rule held in the true world state.",
    "unsafe_ship": "Shipped unsafely: a safety rule was broken in the true world state.",
    "missed_deadline": "Missed the deadline: the release did not ship in time.",
}


# ----------------------------------------------------------------- files


def _repo_file(relative: str) -> Path | None:
    """A file of the repository checkout (the server runs from it; the Space image copies it)."""
    for root in (Path(__file__).resolve().parent.parent, Path.cwd()):
        path = root / relative
        if path.is_file():
            return path
    return None


def load_presets() -> dict[str, dict]:
    """Demo scenarios from demo/*.json: title -> {scenario, story}."""
    presets: dict[str, dict] = {}
    for name in ("demo/seed_a_bad_ci.json", "demo/seed_b_budget_restraint.json"):
        path = _repo_file(name)
        if path is None:
            continue
        data = json.loads(path.read_text())
        presets[data["title"]] = {"scenario": dict(data["scenario"]), "story": data.get("story", "")}
    return presets


def _results_plot_html() -> str:
    path = _repo_file("docs/metrics.png")
    if path is None:
        return "<p class='ro-muted'>docs/metrics.png is not in this deployment.</p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f"<img src='data:image/png;base64,{data}' alt='Baselines on held-out seeds (docs/metrics.png)' "
            "style='width:100%;max-width:1000px;height:auto;display:block;margin:0 auto'>")


def _results_markdown() -> str:
    path = _repo_file("docs/calibration.md")
    return path.read_text() if path else "docs/calibration.md is not in this deployment."


# --------------------------------------------------------------- styling

CSS = """
<style>
.ro-muted { color: var(--body-text-color-subdued); }
.ro-intro p { margin: 0 0 6px; }
.ro-meters { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 10px; }
.ro-meter { border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 8px 12px; }
.ro-meter .lbl { font-size: 12px; color: var(--body-text-color-subdued); display: flex; justify-content: space-between; }
.ro-meter .val { font-family: var(--font-mono); font-size: 18px; font-weight: 600; margin: 2px 0 6px; }
.ro-bar { height: 8px; border-radius: 4px; background: #eef0f2; overflow: hidden; }
.ro-bar > div { height: 100%; border-radius: 4px; background: #1a7f37; }
.ro-bar > div.low { background: #d97706; }
.ro-bar > div.out { background: #b42318; }
.ro-phases { display: flex; gap: 6px; align-items: center; margin: 0 0 10px; font-family: var(--font-mono); font-size: 13px; flex-wrap: wrap; }
.ro-phases span { padding: 3px 10px; border-radius: 999px; border: 1px solid var(--border-color-primary); color: var(--body-text-color-subdued); }
.ro-phases span.done { background: #f4f4f5; }
.ro-phases span.now { background: #0a0a0a; color: #fff; border-color: #0a0a0a; }
.ro-cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 10px; }
.ro-card { border: 1px solid var(--border-color-primary); border-radius: 12px; padding: 10px 12px; background: #fff; }
.ro-card.approved { border-color: #6fcc8b; background: #f3fbf5; }
.ro-card.blocked { border-color: #f0a8a0; background: #fdf4f3; }
.ro-card .top { display: flex; justify-content: space-between; align-items: baseline; gap: 6px; }
.ro-card .pid { font-family: var(--font-mono); font-weight: 700; font-size: 15px; }
.ro-card .worker { font-family: var(--font-mono); font-size: 12px; color: var(--body-text-color-subdued); }
.ro-card .claim { margin: 6px 0; font-size: 14px; line-height: 1.35; }
.ro-card .req { font-family: var(--font-mono); font-size: 12px; }
.ro-card .row { display: flex; flex-wrap: wrap; gap: 4px; margin-top: 6px; align-items: center; }
.ro-chip { font-family: var(--font-mono); font-size: 11px; padding: 1px 7px; border-radius: 999px; border: 1px solid var(--border-color-primary); background: #fafafa; }
.ro-chip.risk { background: #fff7e6; border-color: #f5d28a; }
.ro-chip.conf { background: #eef4ff; border-color: #bcd0f7; }
.ro-status { font-family: var(--font-mono); font-size: 11px; padding: 1px 8px; border-radius: 999px; background: #f4f4f5; }
.ro-status.approved { background: #1a7f37; color: #fff; }
.ro-status.blocked { background: #b42318; color: #fff; }
.ro-table { width: 100%; border-collapse: collapse; font-size: 13px; }
.ro-table { border: none !important; }
.ro-table tr { border: none !important; background: none !important; }
.ro-table th, .ro-table td { text-align: left; padding: 4px 8px !important; border: none !important; border-bottom: 1px solid var(--border-color-primary) !important; vertical-align: top; background: none !important; }
.ro-table th { font-weight: 600; color: var(--body-text-color-subdued); font-size: 12px; }
.ro-table td code, .ro-mono { font-family: var(--font-mono); font-size: 12px; word-break: break-word; }
.ro-h { font-size: 15px; font-weight: 600; margin: 12px 0 6px; }
.ro-result { border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 8px 12px; }
.ro-result pre { margin: 6px 0 0; font-family: var(--font-mono); font-size: 12px; white-space: pre-wrap; word-break: break-word; background: #fafafa; padding: 6px 8px; border-radius: 6px; }
.ro-return { display: flex; gap: 18px; font-family: var(--font-mono); font-size: 14px; padding: 6px 2px; }
.ro-return b { font-size: 18px; }
.ro-pos { color: #1a7f37 !important; } .ro-neg { color: #b42318 !important; }
.ro-error { border: 1px solid #f0a8a0; background: #fdf4f3; color: #8a1c12; border-radius: 10px; padding: 8px 12px; font-size: 14px; }
.ro-error code { font-family: var(--font-mono); font-size: 13px; }
.ro-info { border: 1px solid #bcd0f7; background: #eef4ff; border-radius: 10px; padding: 8px 12px; font-size: 14px; }
.ro-outcome { border-radius: 12px; padding: 12px 14px; font-size: 15px; }
.ro-outcome .code { font-family: var(--font-mono); font-size: 20px; font-weight: 700; }
.ro-outcome.safe_ship { background: #e6f4ea; border: 1px solid #6fcc8b; }
.ro-outcome.unsafe_ship { background: #fdecea; border: 1px solid #f0a8a0; }
.ro-outcome.missed_deadline { background: #fff7e6; border: 1px solid #f5d28a; }
.ro-metrics { display: grid; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr)); gap: 4px 18px; margin-top: 8px; font-size: 13px; }
.ro-metrics div { display: flex; justify-content: space-between; gap: 8px; border-bottom: 1px dotted var(--border-color-primary); }
.ro-metrics span { color: var(--body-text-color-subdued); font-family: var(--font-mono); font-size: 12px; }
.ro-watch { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 12px; }
.ro-watch .col { border: 1px solid var(--border-color-primary); border-radius: 12px; padding: 10px 12px; min-width: 0; }
.ro-watch h3 { margin: 0; font-size: 16px; font-family: var(--font-mono); }
.ro-watch ol { margin: 8px 0 0 !important; padding: 0 !important; list-style: none !important; }
.ro-watch li { padding: 6px 4px !important; margin: 0 !important; border-top: 1px solid var(--border-color-primary); font-size: 12px; list-style: none !important; }
.ro-watch li.cur { background: #fffbe6; }
.ro-watch li.later { opacity: .35; }
.ro-watch li code { font-family: var(--font-mono); font-size: 12px; font-weight: 600; word-break: break-word; }
.ro-watch li div { font-family: var(--font-mono); font-size: 11px; color: #3f3f46; word-break: break-word; margin-top: 2px; }
.ro-watch li div.err { color: #b42318; }
.ro-badge { display: inline-block; font-family: var(--font-mono); font-size: 12px; font-weight: 700; padding: 2px 9px; border-radius: 999px; margin: 4px 0; }
.ro-badge.safe_ship { background: #1a7f37; color: #fff; }
.ro-badge.unsafe_ship { background: #b42318; color: #fff; }
.ro-badge.missed_deadline { background: #d97706; color: #fff; }
.ro-section-title { font-weight: 600; font-size: 14px; margin: 0 0 4px; }
#results-table table { font-size: 12.5px; }
#results-table th, #results-table td { padding: 3px 7px !important; border-color: #e4e4e7 !important; }
#results-table tr { border-color: #e4e4e7 !important; }
#results-table td:first-child { white-space: nowrap; font-family: var(--font-mono); font-size: 12px; }
@media (max-width: 900px) { .ro-meters { grid-template-columns: repeat(2, minmax(0, 1fr)); } .ro-watch { grid-template-columns: 1fr; } }
</style>
"""


# ------------------------------------------------------------- sessions


@dataclass
class Session:
    """One browser session's episode (held in a gr.State, never shared)."""

    episode: Episode
    title: str
    story: str = ""
    refs: list[str] = field(default_factory=list)  # every ref seen on a board so far, in order
    hours0: int = 0
    budget0: int = 0
    last_reward: float = 0.0

    def absorb(self) -> dict:
        board = self.episode.board()
        for p in board["proposals"]:
            for ref in p["refs"]:
                if ref not in self.refs:
                    self.refs.append(ref)
        return board


def _e(value: Any) -> str:
    return html.escape(str(value))


def _signed(x: float) -> str:
    return f"{x:+.2f}"


def _call_text(tool: str, args: dict) -> str:
    return f"{tool}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def _bar(value: float, total: float) -> str:
    pct = 0 if total <= 0 else max(0, min(100, round(100 * value / total)))
    cls = "out" if value <= 0 else "low" if pct <= 34 else ""
    return (f"<div class='ro-bar' role='progressbar' aria-valuenow='{value}' aria-valuemax='{total}'>"
            f"<div class='{cls}' style='width:{pct}%'></div></div>")


# -------------------------------------------------------------- renderers


def meters_html(sess: Session | None) -> str:
    if sess is None:
        return "<div class='ro-muted'>Pick a scenario and press <b>Start episode</b>.</div>"
    b = sess.episode.board()
    ep = sess.episode
    stage = b["phase_index"]
    phases = []
    for i, name in enumerate(catalog.PHASES):
        cls = "now" if i == stage and not ep.done else "done" if i < stage or ep.done else ""
        phases.append(f"<span class='{cls}'>{_e(name)}</span>")
    evid_total = max(b["evidence_actions_remaining"], 2)
    ret = ep.episode_return
    return (
        f"<div class='ro-phases' data-phase='{_e(b['phase'])}'>{' → '.join(phases)}"
        f"<span class='ro-muted' style='border:none'>{_e(sess.title)}</span></div>"
        "<div class='ro-meters'>"
        f"<div class='ro-meter' id='meter-clock'><div class='lbl'><span>clock</span><span>hours_to_deadline</span></div>"
        f"<div class='val'>{b['hours_to_deadline']} h</div>{_bar(b['hours_to_deadline'], sess.hours0)}</div>"
        f"<div class='ro-meter' id='meter-budget'><div class='lbl'><span>review budget</span><span>global</span></div>"
        f"<div class='val'>{b['review_budget_remaining']} / {sess.budget0}</div>"
        f"{_bar(b['review_budget_remaining'], sess.budget0)}</div>"
        f"<div class='ro-meter' id='meter-evidence'><div class='lbl'><span>evidence actions</span><span>this phase</span></div>"
        f"<div class='val'>{b['evidence_actions_remaining']} / {evid_total}</div>"
        f"{_bar(b['evidence_actions_remaining'], evid_total)}</div>"
        f"<div class='ro-meter' id='meter-return'><div class='lbl'><span>return</span><span>{ep.counters.tool_calls} call{'' if ep.counters.tool_calls == 1 else 's'}</span></div>"
        f"<div class='val {'ro-neg' if ret < 0 else 'ro-pos' if ret > 0 else ''}'>{ret:+.2f}</div>"
        f"<div class='ro-muted' style='font-size:11px;line-height:1.3'>ship {_signed(rewards.SAFE_SHIP)} / "
        f"{_signed(rewards.UNSAFE_SHIP)} unsafe / {_signed(rewards.MISSED_DEADLINE)} late · budget unit "
        f"{_signed(rewards.BUDGET_UNIT)} · invalid {_signed(rewards.INVALID_ACTION)} · discovery "
        f"{_signed(rewards.DISCOVERY)} each, paid at the end</div></div>"
        "</div>"
    )


def _card(p: dict) -> str:
    status = p.get("status", "pending")
    refs = "".join(f"<span class='ro-chip'>{_e(r)}</span>" for r in p["refs"]) or "<span class='ro-muted'>no refs</span>"
    risk = "".join(f"<span class='ro-chip risk'>{_e(t)}</span>" for t in p["risk"])
    return (
        f"<div class='ro-card {status}' data-proposal='{_e(p['id'])}' data-status='{status}'>"
        f"<div class='top'><span class='pid'>{_e(p['id'])}</span><span class='worker'>{_e(p['worker'])}</span>"
        f"<span class='ro-status {status}'>{status}</span></div>"
        f"<div class='claim'>“{_e(p['claim'])}”</div>"
        f"<div class='req'>request: <b>{_e(p['request'])}</b></div>"
        f"<div class='row'>refs: {refs}</div>"
        f"<div class='row'>risk: {risk}<span class='ro-chip conf'>confidence: {_e(p['confidence'])}</span></div>"
        "</div>"
    )


def board_html(sess: Session | None) -> str:
    if sess is None:
        return "<div class='ro-muted'>The board appears here: proposals, their refs and risk tags, and worker stats.</div>"
    b = sess.episode.board()
    cards = "".join(_card(p) for p in b["proposals"]) or "<div class='ro-muted'>No proposals on the board.</div>"
    stats = "".join(
        f"<tr><td><code>{_e(s['worker'])}</code></td><td>{_e(s['hint'])}</td>"
        f"<td>{s['recent']['correct']}</td><td>{s['recent']['incorrect']}</td></tr>"
        for s in b["worker_stats"])
    rules = " · ".join(f"<code>{rid}</code> {_e(name)}" for rid, (name, _) in catalog.RULES.items())
    return (
        f"<div class='ro-section-title'>Proposals · phase <code>{_e(b['phase'])}</code> · "
        f"release <code>{_e(b['release']['service'])}</code> {_e(b['release']['stage'])}</div>"
        f"<div class='ro-cards'>{cards}</div>"
        "<div class='ro-h'>Worker stats</div>"
        "<table class='ro-table'><tr><th>worker</th><th>hint</th><th>recent correct</th><th>recent incorrect</th></tr>"
        f"{stats}</table>"
        f"<div class='ro-muted' style='font-size:12px;margin-top:6px'>Rules: {rules}</div>"
    )


def result_html(tool: str, args: dict, result: StepResult | None) -> str:
    if result is None:
        return ""
    head = f"<div class='ro-section-title'>Last call: <code class='ro-mono'>{_e(_call_text(tool, args))}</code></div>"
    if result.error:
        return (f"<div class='ro-result'>{head}<div class='ro-muted'>Refused by the engine (see the error above): "
                f"the board is unchanged; the call cost {_signed(result.reward)}.</div></div>")
    try:
        data = json.loads(result.text)
    except ValueError:
        return f"<div class='ro-result'>{head}<pre>{_e(result.text)}</pre></div>"
    nxt = data.pop("next", None)
    note = ""
    if data.get("phase_end") and nxt:
        note = (f"<div class='ro-info' style='margin-top:6px'>Phase ended. Next: <code>{_e(nxt['phase'])}</code>, "
                f"{nxt['hours_to_deadline']} h to deadline, {len(nxt['proposals'])} proposal(s) on the board.</div>")
    body = json.dumps(data, indent=1, ensure_ascii=False)
    return f"<div class='ro-result'>{head}<pre>{_e(body)}</pre>{note}</div>"


def return_html(sess: Session | None) -> str:
    if sess is None:
        return ""
    r, total = sess.last_reward, sess.episode.episode_return
    return (f"<div class='ro-return'><span>step reward <b class='{'ro-neg' if r < 0 else 'ro-pos' if r > 0 else ''}'>"
            f"{_signed(r)}</b></span><span>return <b class='{'ro-neg' if total < 0 else 'ro-pos' if total > 0 else ''}'>"
            f"{_signed(total)}</b></span></div>")


def error_html(message: str | None, charged: bool = True) -> str:
    if not message:
        return ""
    cost = f" ({_signed(rewards.INVALID_ACTION)}, rule V1)" if charged else ""
    return f"<div class='ro-error' role='alert'><b>Invalid call{cost}:</b> <code>{_e(message)}</code></div>"


def outcome_html(sess: Session | None) -> str:
    if sess is None:
        return ""
    ep = sess.episode
    if not ep.done:
        return "<div class='ro-muted'>Outcome: the episode is running.</div>"
    m = ep.metrics()
    rules = ", ".join(m["rules_violated"]) or "none"
    story = f"<div style='margin-top:6px'><b>What was going on:</b> {_e(sess.story)}</div>" if sess.story else ""
    return (f"<div class='ro-outcome {m['outcome']}' data-outcome='{m['outcome']}'>"
            f"<div class='code'>{_e(m['outcome'])}</div><div>{_e(OUTCOME_TEXT.get(m['outcome'], ''))}</div>"
            f"<div class='ro-muted'>terminal reason <code>{_e(m['terminal_reason'])}</code> · rules violated at ship: "
            f"<code>{_e(rules)}</code> · return <b>{_signed(m['episode_return'])}</b></div>{story}</div>")


def metrics_html(sess: Session | None) -> str:
    if sess is None or not sess.episode.done:
        return ""
    m = sess.episode.metrics()
    cells = "".join(f"<div><span>{_e(k)}</span><b>{_e(v if not isinstance(v, list) else ', '.join(v) or '—')}</b></div>"
                    for k, v in m.items())
    return f"<div class='ro-h'>Metrics (Episode.metrics())</div><div class='ro-metrics'>{cells}</div>"


def history_html(sess: Session | None) -> str:
    if sess is None or not sess.episode.audit:
        return ""
    rows = []
    for a in sess.episode.audit:
        outcome = a["error"] or _brief(a["result"], limit=260)
        style = " style='color:#b42318'" if a["error"] else ""
        rows.append(f"<tr><td>{a['step']}</td><td><code>{_e(a['phase'])}</code></td>"
                    f"<td><code>{_e(_call_text(a['tool'], a['arguments']))}</code></td>"
                    f"<td>{a['budget_cost']}</td><td>{_signed(a['reward'])}</td><td{style}><code>{_e(outcome)}</code></td></tr>")
    return ("<table class='ro-table'><tr><th>#</th><th>phase</th><th>call</th><th>budget</th><th>reward</th>"
            f"<th>result / error</th></tr>{''.join(rows)}</table>")


# ----------------------------------------------------------- dropdowns


def _proposal_choices(board: dict) -> tuple[list[tuple[str, str]], str | None]:
    choices, first_pending = [], None
    for p in board["proposals"]:
        status = p.get("status", "pending")
        label = f"{p['id']} · {p['worker']} · {p['request']}" + ("" if status == "pending" else f" [{status}]")
        choices.append((label, p["id"]))
        if status == "pending" and first_pending is None:
            first_pending = p["id"]
    return choices, first_pending or (choices[0][1] if choices else None)


def _rule_for(board: dict | None, pid: str | None) -> str | None:
    """The first rule a block of this proposal may cite (from its visible risk tags), as a default."""
    if not board or not pid:
        return None
    for p in board["proposals"]:
        if p["id"] == pid:
            rules = rules_for_risk(p["risk"])
            return rules[0] if rules else None
    return None


def _ref_update(sess: Session, board: dict, prefix: str):
    """Refs of one kind: those on the current board first, then ones seen in earlier phases (still valid)."""
    current = [r for p in board["proposals"] for r in p["refs"] if r.startswith(prefix)]
    current = list(dict.fromkeys(current))
    older = [r for r in sess.refs if r.startswith(prefix) and r not in current]
    choices = [(r, r) for r in current] + [(f"{r} (earlier phase)", r) for r in older]
    name = {"pr_": "PR", "ci_run_": "CI / deploy-check run", "ticket_": "Ticket"}[prefix]
    label = name if choices else f"{name} (none seen yet)"
    return gr.update(choices=choices, value=(current or older or [None])[0], label=label)


RULE_SHORT = {"S1": "open P1 bug", "S2": "payment tests", "S3": "deploy checks"}
RULE_CHOICES = [(f"{rid} · {RULE_SHORT.get(rid, name)}", rid) for rid, (name, _) in catalog.RULES.items()]


# -------------------------------------------------------------- the tab


def build_release_board(web_manager=None, action_fields=None, metadata=None, is_chat_env=False,
                        title: str = "ReleaseOps Arena", quick_start_md: str = "") -> gr.Blocks:
    """OpenEnv `gradio_builder`: the "Release board" tab (Play, Watch, Results)."""
    del web_manager, action_fields, metadata, is_chat_env, quick_start_md  # see the module docstring
    presets = load_presets()
    preset_names = [*presets, CUSTOM]
    first = next(iter(presets.values()), {"scenario": dict(catalog.DEFAULT_SCENARIO)})["scenario"]

    with gr.Blocks(title=title) as blocks:
        gr.HTML(
            CSS + "<div class='ro-intro'><h2 style='margin:4px 0 6px'>ReleaseOps Arena · Release board</h2>"
            "<p>You are the supervisor of a risky release. Workers put proposals on the board; some take "
            "shortcuts. Inspect evidence with a small review budget, then approve, block (citing S1, S2 or S3) "
            "or hold, and ship before the deadline without breaking a safety rule. Pick a preset (it fills the "
            "fields below) or set your own scenario, then press <b>Start episode</b>.</p>"
            "<p class='ro-muted' style='font-size:13px'>Web play runs the engine in-process: each browser session "
            "has its own episode in the page's session state (two visitors never share one), and it never takes "
            "one of the server's WebSocket training slots (<code>MAX_CONCURRENT_ENVS</code>). The Playground tab "
            "drives the server's single shared environment instead.</p></div>",
            js_on_load=None,
        )

        sess_state = gr.State(None)
        watch_state = gr.State(None)

        with gr.Column(elem_classes="oe-card"):
            with gr.Row(equal_height=True):
                preset = gr.Dropdown(preset_names, value=preset_names[0], label="Scenario preset",
                                     elem_id="preset-dd", scale=3, min_width=260)
                seed = gr.Number(value=first["seed"], precision=0, minimum=0, label="Seed", elem_id="seed-num",
                                 scale=1, min_width=90)
                difficulty = gr.Dropdown(list(catalog.DIFFICULTIES), value=first["difficulty"], label="Difficulty",
                                         elem_id="difficulty-dd", scale=1, min_width=130)
            with gr.Row(equal_height=True):
                family = gr.Dropdown(list(catalog.ALL_FAMILIES), value=first["family"], label="Family",
                                     elem_id="family-dd", scale=1, min_width=300)
                mix = gr.Dropdown(list(catalog.ALL_MIXES), value=first["archetype_mix"], label="Archetype mix",
                                  elem_id="mix-dd", scale=1, min_width=300)

        with gr.Tabs(elem_id="board-tabs"):
            # ---------------------------------------------------------- Play
            with gr.Tab("Play", id="play", elem_id="play-tab"):
                with gr.Row():
                    start_btn = gr.Button("Start episode", variant="primary", elem_id="start-btn", scale=0,
                                          min_width=180)
                    setup_msg = gr.HTML("", elem_id="setup-msg", js_on_load=None)
                meters = gr.HTML(meters_html(None), elem_id="meters", js_on_load=None)
                with gr.Row(equal_height=False):
                    with gr.Column(scale=1, min_width=420):
                        board = gr.HTML(board_html(None), elem_id="board", js_on_load=None)
                    with gr.Column(scale=1, min_width=400):
                        with gr.Group():
                            gr.HTML("<div class='ro-section-title' style='padding:8px 10px 0'>Resolve "
                                    "<span class='ro-muted'>(free)</span></div>", js_on_load=None)
                            proposal_dd = gr.Dropdown([], label="Proposal", elem_id="proposal-dd", interactive=True)
                            with gr.Row(equal_height=True):
                                rule_dd = gr.Dropdown(RULE_CHOICES, value="S2", label="Rule (for block)",
                                                      elem_id="rule-dd", scale=2, min_width=180, interactive=True)
                                approve_btn = gr.Button("Approve", elem_id="approve-btn", variant="primary", interactive=False, scale=1,
                                                        min_width=90)
                                block_btn = gr.Button("Block", elem_id="block-btn", variant="stop", interactive=False, scale=1,
                                                      min_width=90)
                        with gr.Group():
                            gr.HTML("<div class='ro-section-title' style='padding:8px 10px 0'>Evidence "
                                    "<span class='ro-muted'>(1 budget unit + 1 evidence action each)</span></div>",
                                    js_on_load=None)
                            with gr.Row(equal_height=True):
                                pr_dd = gr.Dropdown([], label="PR", elem_id="pr-dd", scale=2, min_width=150,
                                                    interactive=True)
                                pr_btn = gr.Button("Inspect PR diff", elem_id="inspect-pr-btn", scale=1,
                                                   min_width=130, interactive=False)
                            with gr.Row(equal_height=True):
                                run_dd = gr.Dropdown([], label="CI / deploy-check run", elem_id="run-dd", scale=2,
                                                     min_width=150, interactive=True)
                                run_btn = gr.Button("Inspect CI run", elem_id="inspect-run-btn", scale=1,
                                                    min_width=130, interactive=False)
                            with gr.Row(equal_height=True):
                                ticket_dd = gr.Dropdown([], label="Ticket", elem_id="ticket-dd", scale=2,
                                                        min_width=150, interactive=True)
                                ticket_btn = gr.Button("Inspect ticket", elem_id="inspect-ticket-btn", scale=1,
                                                       min_width=130, interactive=False)
                            with gr.Row(equal_height=True):
                                worker_dd = gr.Dropdown(list(catalog.WORKERS), value=catalog.WORKERS[0],
                                                        label="Worker", elem_id="worker-dd", scale=4, min_width=120)
                                question_dd = gr.Dropdown(list(catalog.QUESTION_TYPES), value=catalog.QUESTION_TYPES[0],
                                                          label="Question", elem_id="question-dd", scale=5,
                                                          min_width=140)
                                ask_btn = gr.Button("Ask worker", elem_id="ask-btn", scale=3, min_width=100,
                                                    interactive=False)
                        with gr.Group():
                            gr.HTML("<div class='ro-section-title' style='padding:8px 10px 0'>Hold "
                                    "<span class='ro-muted'>(ends the phase; spends a phase of time)</span></div>",
                                    js_on_load=None)
                            with gr.Row(equal_height=True):
                                hold_dd = gr.Dropdown(list(catalog.HOLD_REASONS), value=catalog.HOLD_REASONS[0],
                                                      label="Reason", elem_id="hold-dd", scale=2, min_width=140)
                                hold_btn = gr.Button("Hold release", elem_id="hold-btn", scale=1, min_width=120,
                                                     interactive=False)
                        error_box = gr.HTML("", elem_id="error-box", js_on_load=None)
                        return_box = gr.HTML("", elem_id="return-box", js_on_load=None)
                        result_box = gr.HTML("", elem_id="result-box", js_on_load=None)
                        outcome = gr.HTML("", elem_id="outcome", js_on_load=None)
                metrics = gr.HTML("", elem_id="metrics", js_on_load=None)
                with gr.Accordion("Calls so far (Episode.audit)", open=True, elem_id="history-acc"):
                    history = gr.HTML("", elem_id="history", js_on_load=None)

            # --------------------------------------------------------- Watch
            with gr.Tab("Watch", id="watch", elem_id="watch-tab"):
                gr.HTML("<p class='ro-muted'>Runs the reference policies on the scenario chosen above with the "
                        "engine's <code>play</code>: <b>naive</b> approves everything, <b>rule</b> is the best "
                        "fixed heuristic on visible information, <b>oracle</b> reads the hidden truth (the upper "
                        "bound). Drag the slider to replay them step by step.</p>", js_on_load=None)
                with gr.Row(equal_height=True):
                    watch_btn = gr.Button("Run naive, rule and oracle", variant="primary", elem_id="watch-btn",
                                          scale=0, min_width=260)
                    watch_step = gr.Slider(0, 1, value=0, step=1, label="Step", elem_id="watch-step",
                                           interactive=True, scale=3)
                watch_story = gr.HTML("", elem_id="watch-story", js_on_load=None)
                watch_view = gr.HTML("", elem_id="watch-view", js_on_load=None)

            # ------------------------------------------------------- Results
            with gr.Tab("Results", id="results", elem_id="results-tab"):
                gr.HTML("<p class='ro-muted'>Latest evaluation: every baseline on held-out seeds "
                        "(<code>python -m training.calibrate</code>; docs/metrics.png and docs/calibration.md).</p>",
                        js_on_load=None)
                gr.HTML(_results_plot_html(), elem_id="results-plot", js_on_load=None)
                gr.Markdown(_results_markdown(), elem_id="results-table")

        # -------------------------------------------------------- wiring
        buttons = [approve_btn, block_btn, pr_btn, run_btn, ticket_btn, ask_btn, hold_btn]
        outputs = [sess_state, meters, board, proposal_dd, rule_dd, pr_dd, run_dd, ticket_dd, error_box,
                   return_box, result_box, outcome, metrics, history, setup_msg, *buttons]

        def render(sess: Session | None, *, error: str | None = None, charged: bool = True,
                   call: tuple[str, dict] | None = None, result: StepResult | None = None,
                   setup: str = "") -> list:
            if sess is None:
                keep = [gr.update()] * 5
                return [None, meters_html(None), board_html(None), *keep, error_html(error, charged), "", "", "",
                        "", "", setup, *[gr.update(interactive=False)] * len(buttons)]
            b = sess.absorb()
            choices, pick = _proposal_choices(b)
            ref_updates = [_ref_update(sess, b, prefix) for _, prefix, _, _ in REF_KINDS]
            live = not sess.episode.done
            rule = _rule_for(b, pick)
            return [
                sess, meters_html(sess), board_html(sess),
                gr.update(choices=choices, value=pick),
                gr.update(value=rule) if rule else gr.update(),
                *ref_updates,
                error_html(error, charged), return_html(sess),
                result_html(call[0], call[1], result) if call else "",
                outcome_html(sess), metrics_html(sess), history_html(sess), setup,
                *[gr.update(interactive=live)] * len(buttons),
            ]

        def fill_preset(name: str):
            p = presets.get(name)
            if p is None:
                return [gr.update()] * 4
            s = p["scenario"]
            return [s["family"], s["seed"], s["difficulty"], s["archetype_mix"]]

        preset.change(fill_preset, [preset], [family, seed, difficulty, mix], queue=False)
        for comp in (family, seed, difficulty, mix):
            comp.input(lambda: CUSTOM, None, [preset], queue=False)

        def scenario_of(preset_name, fam, sd, diff, mx) -> tuple[dict, dict | None]:
            # A preset is authoritative (the fields only mirror it; editing a field switches to Custom).
            chosen = presets.get(preset_name)
            if chosen is not None:
                return dict(chosen["scenario"]), chosen
            return {"family": fam, "seed": int(sd if sd is not None else 0), "difficulty": diff,
                    "archetype_mix": mx}, None

        def start(preset_name, fam, sd, diff, mx):
            try:
                scenario, chosen = scenario_of(preset_name, fam, sd, diff, mx)
                ep = Episode(**scenario)
            except (ValueError, TypeError) as exc:  # the engine lists the valid values
                return render(None, error=f"could not start: {exc}", charged=False)
            # The meters name a preset, else only seed and difficulty: the family and mix the visitor
            # chose stay in the setup row, out of the board area.
            title = preset_name if chosen else f"seed {scenario['seed']} · {scenario['difficulty']}"
            b = ep.board()
            sess = Session(ep, title=title, story=chosen["story"] if chosen else "",
                           hours0=b["hours_to_deadline"], budget0=b["review_budget_remaining"])
            return render(sess, setup=f"<span class='ro-muted'>Started <b>{_e(title)}</b>.</span>")

        start_btn.click(start, [preset, family, seed, difficulty, mix], outputs)

        def act(sess: Session | None, tool: str, args: dict, missing: str | None = None):
            if sess is None:
                return render(None, error="press Start episode first", charged=False)
            if missing:
                return render(sess, error=missing, charged=False)
            try:
                result = sess.episode.step(tool, args)
            except EpisodeOver as exc:
                return render(sess, error=str(exc), charged=False)
            except Exception as exc:  # never a stack trace in the page
                return render(sess, error=f"internal error ({type(exc).__name__}): {exc}", charged=False)
            sess.last_reward = result.reward
            return render(sess, error=result.error, call=(tool, args), result=result)

        def need(value, what: str) -> str | None:
            return None if value else f"choose {what} first (nothing was sent to the engine)"

        approve_btn.click(lambda s, pid: act(s, "approve_proposal", {"proposal_id": pid}, need(pid, "a proposal")),
                          [sess_state, proposal_dd], outputs)
        block_btn.click(lambda s, pid, rid: act(s, "block_proposal", {"proposal_id": pid, "rule_id": rid},
                                                need(pid, "a proposal") or need(rid, "a rule")),
                        [sess_state, proposal_dd, rule_dd], outputs)
        for (kind, _, tool, arg), btn, dd in zip(REF_KINDS, (pr_btn, run_btn, ticket_btn), (pr_dd, run_dd, ticket_dd)):
            what = {"pr": "a PR", "ci_run": "a CI run", "ticket": "a ticket"}[kind]
            btn.click(lambda s, ref, tool=tool, arg=arg, what=what: act(s, tool, {arg: ref}, need(ref, what)),
                      [sess_state, dd], outputs)
        ask_btn.click(lambda s, w, q: act(s, "ask_worker", {"worker_id": w, "question_type": q},
                                          need(w, "a worker") or need(q, "a question type")),
                      [sess_state, worker_dd, question_dd], outputs)
        hold_btn.click(lambda s, r: act(s, "hold_release", {"reason_code": r}, need(r, "a hold reason")),
                       [sess_state, hold_dd], outputs)

        def pick_rule(sess: Session | None, pid):
            rule = _rule_for(sess.episode.board() if sess else None, pid)
            return gr.update(value=rule) if rule else gr.update()

        proposal_dd.input(pick_rule, [sess_state, proposal_dd], [rule_dd], queue=False)

        # ---------------------------------------------------------- watch
        def run_watch(preset_name, fam, sd, diff, mx):
            try:
                scenario, chosen = scenario_of(preset_name, fam, sd, diff, mx)
                runs = {name: play(POLICIES[name](), scenario) for name in WATCH_POLICIES}
            except (ValueError, TypeError) as exc:
                return None, gr.update(), "", error_html(f"could not run: {exc}", charged=False)
            longest = max(len(r["steps"]) for r in runs.values())
            story = (f"<div class='ro-info'><b>{_e(preset_name)}.</b> {_e(chosen['story'])}</div>" if chosen else
                     f"<div class='ro-info'>Scenario <code>{_e(json.dumps(scenario))}</code></div>")
            return (runs, gr.update(minimum=0, maximum=longest, value=longest), story,
                    watch_html(runs, longest))

        watch_btn.click(run_watch, [preset, family, seed, difficulty, mix],
                        [watch_state, watch_step, watch_story, watch_view])
        watch_step.change(lambda runs, k: watch_html(runs, int(k or 0)) if runs else gr.update(),
                          [watch_state, watch_step], [watch_view], queue=False)

    return blocks


def _brief(text: str | None, limit: int = 240) -> str:
    """A tool result for a transcript line: the next phase's board (shown in full on Play) becomes one note."""
    try:
        data = json.loads(text or "")
    except ValueError:
        data = None
    if isinstance(data, dict):
        nxt = data.pop("next", None)
        data.pop("tool", None)
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        if nxt:
            ids = ", ".join(p["id"] for p in nxt["proposals"])
            text += f" → next: {nxt['phase']}, {nxt['hours_to_deadline']} h left, proposals {ids}"
    text = text or ""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def watch_html(runs: dict, upto: int) -> str:
    """The three transcripts side by side; steps after `upto` are dimmed, step `upto` highlighted."""
    cols = []
    for name in WATCH_POLICIES:
        run = runs[name]
        m = run["metrics"]
        items = []
        for i, s in enumerate(run["steps"], 1):
            cls = "cur" if i == upto else "later" if i > upto else ""
            text = _brief(s.get("result")) if "result" in s else s.get("error") or ""
            err = " err" if "error" in s else ""
            items.append(f"<li class='{cls}'><code>{i}. {_e(_call_text(s['tool'], s['arguments']))}</code>"
                         f"<div class='{err.strip()}'>{_e(text)}</div></li>")
        cols.append(
            f"<div class='col' id='watch-{name}' data-outcome='{_e(m['outcome'])}'>"
            f"<h3>{_e(name)}</h3><span class='ro-badge {m['outcome']}'>{_e(m['outcome'])}</span>"
            f"<div class='ro-muted' style='font-size:12px'>return {_signed(run['return'])} · budget used "
            f"{m['budget_used']} · {len(run['steps'])} calls</div><ol>{''.join(items)}</ol></div>")
    return f"<div class='ro-watch'>{''.join(cols)}</div>"
