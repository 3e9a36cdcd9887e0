"""The Release board's HTML: pure functions from a session's state to markup.

Nothing here changes a session or imports gradio, so every piece renders in a
plain test. What is shown is the engine's own: the public board
(`Episode.board()`), its messages, `Episode.metrics()` and `Episode.audit`;
names and numbers come from the catalogue, the reward table and the engine's
constants, never from copies.
"""

from __future__ import annotations

import html
import json
from typing import Any

from releaseops_arena import catalog, rewards
from releaseops_arena.episode import StepResult
from releaseops_arena.scenario_builder import EVIDENCE_PER_ROUND

from .web_session import Session

OUTCOME_TEXT = {
    "safe_ship": "Shipped safely: every safety rule held in the true world state.",
    "unsafe_ship": "Shipped unsafely: a safety rule was broken in the true world state.",
    "missed_deadline": "Missed the deadline: the release did not ship in time.",
}


def escape(value: Any) -> str:
    return html.escape(str(value))


def wordy(value: Any) -> str:
    """An identifier for reading: escaped, with a line-break chance after each underscore (never mid-word)."""
    return escape(value).replace("_", "_<wbr>").replace("/", "/<wbr>")


def signed(x: float) -> str:
    return f"{x:+.2f}"


def call_text(tool: str, args: dict) -> str:
    return f"{tool}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def _tone(x: float) -> str:
    return "ro-neg" if x < 0 else "ro-pos" if x > 0 else ""


def _bar(value: float, total: float) -> str:
    pct = 0 if total <= 0 else max(0, min(100, round(100 * value / total)))
    cls = "out" if value <= 0 else "low" if pct <= 34 else ""
    return (
        f"<div class='ro-bar' role='progressbar' aria-valuenow='{value}' aria-valuemax='{total}'>"
        f"<div class='{cls}' style='width:{pct}%'></div></div>"
    )


def _meter(elem_id: str, label: str, note: str, value: str, bar: str) -> str:
    return (
        f"<div class='ro-meter' id='{elem_id}'><div class='lbl'><span>{label}</span><span>{note}</span></div>"
        f"<div class='val'>{value}</div>{bar}</div>"
    )


def _reward_note() -> str:
    return (
        f"<div class='ro-muted' style='font-size:11px;line-height:1.3'>ship {signed(rewards.SAFE_SHIP)} / "
        f"{signed(rewards.UNSAFE_SHIP)} unsafe / {signed(rewards.MISSED_DEADLINE)} late · budget unit "
        f"{signed(rewards.BUDGET_UNIT)} · invalid {signed(rewards.INVALID_ACTION)} · discovery "
        f"{signed(rewards.DISCOVERY)} each, paid at the end</div>"
    )


def meters_html(sess: Session | None) -> str:
    if sess is None:
        return "<div class='ro-muted'>Pick a scenario and press <b>Start episode</b>.</div>"
    b, ep = sess.board(), sess.episode
    stage = b["phase_index"]
    phases = []
    for i, name in enumerate(catalog.PHASES):
        cls = "now" if i == stage and not ep.done else "done" if i < stage or ep.done else ""
        phases.append(f"<span class='{cls}'>{escape(name)}</span>")
    hours, budget, evidence = b["hours_to_deadline"], b["review_budget_remaining"], b["evidence_actions_remaining"]
    evidence_total = max(evidence, EVIDENCE_PER_ROUND)
    calls, ret = ep.counters.tool_calls, ep.episode_return
    return (
        f"<div class='ro-phases' data-phase='{escape(b['phase'])}'>{' → '.join(phases)}"
        f"<span class='ro-muted' style='border:none'>{escape(sess.title)}</span></div>"
        "<div class='ro-meters'>"
        + _meter("meter-clock", "clock", "hours left", f"{hours} h", _bar(hours, sess.hours0))
        + _meter("meter-budget", "review budget", "global", f"{budget} / {sess.budget0}", _bar(budget, sess.budget0))
        + _meter(
            "meter-evidence",
            "evidence actions",
            "this phase",
            f"{evidence} / {evidence_total}",
            _bar(evidence, evidence_total),
        )
        + (
            f"<div class='ro-meter' id='meter-return'><div class='lbl'><span>return</span>"
            f"<span>{calls} call{'' if calls == 1 else 's'}</span></div>"
            f"<div class='val {_tone(ret)}'>{ret:+.2f}</div>{_reward_note()}</div>"
        )
        + "</div>"
    )


def card_html(p: dict) -> str:
    status = p.get("status", "pending")
    refs = (
        "".join(f"<span class='ro-chip'>{escape(r)}</span>" for r in p["refs"])
        or "<span class='ro-muted'>no refs</span>"
    )
    risk = "".join(f"<span class='ro-chip risk'>{escape(t)}</span>" for t in p["risk"])
    return (
        f"<div class='ro-card {status}' data-proposal='{escape(p['id'])}' data-status='{status}'>"
        f"<div class='top'><span class='pid'>{escape(p['id'])}</span><span class='worker'>{wordy(p['worker'])}</span>"
        f"<span class='ro-status {status}'>{status}</span></div>"
        f"<div class='claim'>“{escape(p['claim'])}”</div>"
        f"<div class='req'>request: <b>{wordy(p['request'])}</b></div>"
        f"<div class='row'>refs: {refs}</div>"
        f"<div class='row'>risk: {risk}<span class='ro-chip conf'>confidence: {escape(p['confidence'])}</span></div>"
        "</div>"
    )


def board_html(sess: Session | None) -> str:
    if sess is None:
        return (
            "<div class='ro-muted'>The board appears here: proposals, their refs and risk tags, and worker stats.</div>"
        )
    b = sess.board()
    cards = "".join(card_html(p) for p in b["proposals"]) or "<div class='ro-muted'>No proposals on the board.</div>"
    stats = "".join(
        f"<tr><td><code>{wordy(s['worker'])}</code></td><td>{wordy(s['hint'])}</td>"
        f"<td>{s['recent']['correct']}</td><td>{s['recent']['incorrect']}</td></tr>"
        for s in b["worker_stats"]
    )
    rules = " · ".join(f"<code>{rid}</code> {escape(rule.name)}" for rid, rule in catalog.RULES.items())
    return (
        f"<div class='ro-section-title'>Proposals · phase <code>{escape(b['phase'])}</code> · "
        f"release <code>{escape(b['release']['service'])}</code> {escape(b['release']['stage'])}</div>"
        f"<div class='ro-cards'>{cards}</div>"
        "<div class='ro-h'>Worker stats</div>"
        "<table class='ro-table'><tr><th>worker</th><th>hint</th><th>recent ok</th><th>recent wrong</th></tr>"
        f"{stats}</table>"
        f"<div class='ro-muted' style='font-size:12px;margin-top:6px'>Rules: {rules}</div>"
    )


def result_html(tool: str, args: dict, result: StepResult | None) -> str:
    if result is None:
        return ""
    head = (
        f"<div class='ro-section-title'>Last call: <code class='ro-mono'>{escape(call_text(tool, args))}</code></div>"
    )
    if result.error:
        return (
            f"<div class='ro-result'>{head}<div class='ro-muted'>Refused by the engine (see the error above): "
            f"the board is unchanged; the call cost {signed(result.reward)}.</div></div>"
        )
    try:
        data = json.loads(result.text)
    except ValueError:
        return f"<div class='ro-result'>{head}<pre>{escape(result.text)}</pre></div>"  # not JSON: shown as is
    nxt = data.pop("next", None)
    note = ""
    if data.get("phase_end") and nxt:
        note = (
            f"<div class='ro-info' style='margin-top:6px'>Phase ended. Next: <code>{escape(nxt['phase'])}</code>, "
            f"{nxt['hours_to_deadline']} h to deadline, {len(nxt['proposals'])} proposal(s) on the board.</div>"
        )
    body = json.dumps(data, indent=1, ensure_ascii=False)
    said = f"<div class='ro-say' id='result-sentence'>{wordy(sentence(tool, args, result.text))}</div>"
    raw = f"<details class='ro-raw' id='result-raw'><summary>raw JSON</summary><pre>{escape(body)}</pre></details>"
    return f"<div class='ro-result'>{head}{said}{raw}{note}</div>"


def return_html(sess: Session | None) -> str:
    if sess is None:
        return ""
    r, total = sess.last_reward, sess.episode.episode_return
    return (
        f"<div class='ro-return'><span>step reward <b class='{_tone(r)}'>{signed(r)}</b></span>"
        f"<span>return <b class='{_tone(total)}'>{signed(total)}</b></span></div>"
    )


def error_html(message: str | None, charged: bool = True) -> str:
    if not message:
        return ""
    head = f"Invalid call ({signed(rewards.INVALID_ACTION)} to the return)" if charged else "Not sent"
    return f"<div class='ro-error' role='alert'><b>{head}:</b> <code>{wordy(message)}</code></div>"


def outcome_html(sess: Session | None) -> str:
    if sess is None:
        return ""
    ep = sess.episode
    if not ep.done:
        return "<div class='ro-muted'>Outcome: the episode is running.</div>"
    m = ep.metrics()
    rules = ", ".join(m["rules_violated"]) or "none"
    story = f"<div style='margin-top:6px'><b>What was going on:</b> {escape(sess.story)}</div>" if sess.story else ""
    return (
        f"<div class='ro-outcome {m['outcome']}' data-outcome='{m['outcome']}'>"
        f"<div class='code'>{escape(m['outcome'])}</div><div>{escape(OUTCOME_TEXT.get(m['outcome'], ''))}</div>"
        f"<div class='ro-muted'>terminal reason <code>{escape(m['terminal_reason'])}</code> · rules violated at "
        f"ship: <code>{escape(rules)}</code> · return <b>{signed(m['episode_return'])}</b></div>{story}</div>"
    )


def metrics_html(sess: Session | None) -> str:
    if sess is None or not sess.episode.done:
        return ""
    cells = "".join(
        f"<div><span>{wordy(k)}</span><b>{wordy(', '.join(v) or '—' if isinstance(v, list) else v)}</b></div>"
        for k, v in sess.episode.metrics().items()
    )
    return f"<div class='ro-h'>Metrics (Episode.metrics())</div><div class='ro-metrics'>{cells}</div>"


def brief(text: str | None, limit: int = 240) -> str:
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
    return text if len(text) <= limit else text[: limit - 3] + "..."


def history_html(sess: Session | None) -> str:
    if sess is None or not sess.episode.audit:
        return ""
    # The reset's reward first (the opening reward: a missed deadline until the release ships), so the
    # column sums to the return shown beside it.
    rows = [
        f"<tr><td>0</td><td><code>{escape(catalog.PHASES[0])}</code></td><td><code>reset</code></td><td>0</td>"
        f"<td>{signed(sess.episode.opening_reward)}</td><td><code>counts as a missed deadline until the release "
        "ships</code></td></tr>"
    ]
    for a in sess.episode.audit:
        outcome = a["error"] or sentence(a["tool"], a["arguments"], a["result"])
        style = " style='color:#b42318'" if a["error"] else ""
        rows.append(
            f"<tr><td>{a['step']}</td><td><code>{escape(a['phase'])}</code></td>"
            f"<td><code>{wordy(call_text(a['tool'], a['arguments']))}</code></td>"
            f"<td>{a['budget_cost']}</td><td>{signed(a['reward'])}</td>"
            f"<td{style}><code>{wordy(outcome)}</code></td></tr>"
        )
    return (
        "<table class='ro-table'><tr><th>#</th><th>phase</th><th>call</th><th>budget</th><th>reward</th>"
        f"<th>result / error</th></tr>{''.join(rows)}</table>"
    )


def _calls(run: dict) -> list[tuple[str, dict]]:
    return [(s["tool"], s["arguments"]) for s in run["steps"]]


def watch_scores_html(runs: dict) -> str:
    """One row per policy: what it sees, how its episode ended, and which earlier policy made the same calls."""
    rows = []
    for k, (name, run) in enumerate(runs.items()):
        m = run["metrics"]
        twin = next((other["label"] for other in list(runs.values())[:k] if _calls(other) == _calls(run)), None)
        rows.append(
            f"<tr id='score-{escape(name)}'><td><b>{wordy(run['label'])}</b><div class='ro-muted'>"
            f"{escape(run['role'])}</div></td><td>{escape(run['sees'])}</td>"
            f"<td><span class='ro-badge {escape(m['outcome'])}'>{wordy(m['outcome'])}</span></td>"
            f"<td class='{_tone(run['return'])}'>{signed(run['return'])}</td>"
            f"<td>{m['budget_used']} / {m['budget_total']}</td><td>{m['false_blocks']}</td>"
            f"<td>{len(run['steps'])}</td><td>{escape(f'same calls as {twin}') if twin else ''}</td></tr>"
        )
    return (
        "<table class='ro-table' id='watch-scores'><tr><th>policy</th><th>sees</th><th>outcome</th>"
        "<th>return</th><th>budget</th><th>false blocks</th><th>calls</th><th></th></tr>"
        f"{''.join(rows)}</table>"
    )


def watch_html(runs: dict, upto: int, shown=None) -> str:
    """The score table, then the transcripts of `shown` (every run if None) side by side, in the order
    of `runs`; steps after `upto` are dimmed, step `upto` highlighted."""
    cols = []
    for name, run in runs.items():
        if shown is not None and name not in shown:
            continue
        m = run["metrics"]
        items = []
        for i, s in enumerate(run["steps"], 1):
            cls = "cur" if i == upto else "later" if i > upto else ""
            err = " err" if "error" in s else ""
            said = sentence(s["tool"], s["arguments"], s.get("result"), s.get("error"))
            items.append(
                f"<li class='{cls}'><div class='say{err}'><b>{i}.</b> {wordy(said)}</div>"
                f"{raw_details(s['tool'], s['arguments'], s.get('result') or s.get('error'))}</li>"
            )
        cols.append(
            f"<div class='col' id='watch-{escape(name)}' data-outcome='{escape(m['outcome'])}'>"
            f"<h3>{wordy(run['label'])}</h3><div class='ro-muted sees'>sees {escape(run['sees'])}</div>"
            f"<span class='ro-badge {escape(m['outcome'])}'>{escape(m['outcome'])}</span>"
            f"<div class='ro-muted' style='font-size:12px'>return {signed(run['return'])} · budget used "
            f"{m['budget_used']} · {len(run['steps'])} calls</div><ol>{''.join(items)}</ol></div>"
        )
    grid = (
        f"<div class='ro-watch' style='--cols:{len(cols)}'>{''.join(cols)}</div>"
        if cols
        else "<p class='ro-muted'>Tick a policy above to read its calls.</p>"
    )
    return f"{watch_scores_html(runs)}{grid}"


# ------------------------------------------------------------ sentences

_EVIDENCE_PHRASES = {
    "tests_disabled": "disables",
    "skipped_payment_tests": "skips payment tests",
    "payment_assertions_weakened": "weakens payment assertions",
    "snapshots_changed": "changes snapshots",
}


def _evidence_text(evidence: dict) -> str:
    """The key evidence of an inspection in a few words: its summary, what it disables or skips, its status."""
    parts = []
    if evidence.get("summary"):
        parts.append(str(evidence["summary"]))
    for key, phrase in _EVIDENCE_PHRASES.items():
        value = evidence.get(key)
        if value:
            parts.append(f"{phrase} {', '.join(map(str, value)) if isinstance(value, list) else value}")
    for key, value in evidence.items():
        if key in _EVIDENCE_PHRASES or key == "summary" or key == "files" or value in (None, [], ""):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        parts.append(f"{key.replace('_', ' ')} {shown}")
    return "; ".join(parts[:5]) or "nothing notable"


def sentence(tool: str, args: dict, result_text: str | None = None, error: str | None = None) -> str:
    """One call as a plain sentence (text, not markup) with its key evidence."""
    if error:
        return f"tried {call_text(tool, args)}: refused ({error})"
    try:
        data = json.loads(result_text or "")
    except ValueError:
        data = {}
    data = data if isinstance(data, dict) else {}
    if tool == "approve_proposal":
        text = f"approved {args.get('proposal_id')}"
    elif tool == "block_proposal":
        text = f"blocked {args.get('proposal_id')} citing {args.get('rule_id')}"
    elif tool == "hold_release":
        text = f"held the release ({args.get('reason_code', '').replace('_', ' ')})"
    elif tool == "ask_worker":
        answer = data.get("answer") or ", ".join(f"{k} {v}" for k, v in data.items() if k not in ("tool", "worker"))
        text = f"asked {args.get('worker_id')} about {args.get('question_type', '').replace('_', ' ')}: “{answer}”"
    elif "evidence" in data:
        ref = next(iter(args.values()), "?")
        text = f"inspected {ref}: {_evidence_text(data['evidence'])}"
    else:
        text = call_text(tool, args)
    nxt = data.get("next")
    if nxt:
        text += f" → phase ends; next {nxt['phase']}, {nxt['hours_to_deadline']} h left"
    elif data.get("outcome") or data.get("done"):
        text += f" → {data.get('outcome', 'episode over')}"
    return text


def raw_details(tool: str, args: dict, raw: str | None) -> str:
    """The call and the engine's raw answer, one click away."""
    return (
        f"<details class='ro-raw'><summary>raw JSON</summary><pre>{escape(call_text(tool, args))}\n"
        f"{escape(raw or '')}</pre></details>"
    )
