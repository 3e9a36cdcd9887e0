"""What the Release board shows from files: the demo presets, the latest results, its stylesheet.

They are package data (server/assets, installed as `releaseops_arena.server/assets`),
read through `importlib.resources`, so a pip-installed server finds them as the
checkout and the Space image do. The full calibration report is a document of the
repository (docs/calibration.md); the board links to it rather than shipping it.
"""

from __future__ import annotations

import base64
import html
import json
import os
from importlib import resources

ASSETS = resources.files(__package__) / "assets"
PRESET_FILES = ("seed_a_bad_ci.json", "seed_b_budget_restraint.json")
# The transcripts the Watch tab opens with for each preset: Seed B's point is that spending the budget on
# whatever is in sight fails, so it opens with inspect_everything against the planner.
PRESET_WATCH = {
    "seed_a_bad_ci.json": ("naive", "planner", "trained"),
    "seed_b_budget_restraint.json": ("inspect_everything", "planner", "trained"),
}
CHART = "metrics.png"
REPORT = "docs/calibration.md"  # in the repository and the Space, not in the wheel
# The policies of the headline, in order, with the names the board uses.
HEADLINE = {
    "naive": "naive",
    "rule": "rule",
    "planner": "reference planner",
    "trained": "trained",
    "oracle": "oracle (privileged)",
}
HEADLINE_SLICE = "heldout_seeds/medium"


def load_presets() -> dict[str, dict]:
    """The demo scenarios: title -> {scenario, story}."""
    presets: dict[str, dict] = {}
    for name in PRESET_FILES:
        data = json.loads((ASSETS / name).read_text())
        presets[data["title"]] = {
            "scenario": dict(data["scenario"]),
            "story": data.get("story", ""),
            "watch": list(PRESET_WATCH.get(name, ())),
        }
    return presets


def stylesheet() -> str:
    """The board's CSS as a <style> element (a gr.HTML carries it: the tab cannot set the page's css)."""
    return f"<style>\n{(ASSETS / 'web.css').read_text()}</style>\n"


def results() -> dict:
    """The headline numbers the calibration report wrote for the board (research/calibrate.py)."""
    return json.loads((ASSETS / "results.json").read_text())


def report_link(report: str = REPORT) -> str:
    """A link to the full calibration report: on a Hugging Face Space (SPACE_ID set) its file in the Space,
    else the path in the repository."""
    space = os.environ.get("SPACE_ID")
    if space:
        url = f"https://huggingface.co/spaces/{space}/blob/main/{report}"
        return (
            f"<a href='{html.escape(url)}' target='_blank' rel='noopener' id='report-link'>"
            "the full calibration report</a>"
        )
    return f"the full calibration report (<code id='report-link'>{html.escape(report)}</code> in the repository)"


def bars_html(rows: dict, labels: dict | None = None, elem_id: str = "") -> str:
    """A small bar chart of safe-ship rates, one bar per policy, in HTML (it scales to any width)."""
    items = []
    for policy, row in rows.items():
        name = (labels or {}).get(policy, policy)
        pct = 100 * row["safe_ship"]
        items.append(
            f"<div class='ro-barrow' data-policy='{html.escape(policy)}'><span class='name'>"
            f"{html.escape(name).replace('_', '_<wbr>')}</span><span class='track'><span class='fill "
            f"{html.escape(policy)}' style='width:{pct:.1f}%'></span></span><span class='num'>{pct:.0f}%</span></div>"
        )
    ident = f" id='{elem_id}'" if elem_id else ""
    return f"<div class='ro-bars'{ident} role='img' aria-label='safe-ship rate per policy'>{''.join(items)}</div>"


def headline_html() -> str:
    """The headline: safe-ship rate of naive, rule, planner, trained and oracle on held-out seeds."""
    data = results()
    rows = data["slices"].get(HEADLINE_SLICE, {})
    shown = {p: rows[p] for p in HEADLINE if p in rows}
    missing = [HEADLINE[p] for p in HEADLINE if p not in rows]
    note = f" Not in this calibration yet: {', '.join(missing)}." if missing else ""
    return (
        f"<div class='ro-h' style='margin-top:0'>Safe-ship rate on {data['n']:,} held-out seeds (medium)</div>"
        f"{bars_html(shown, HEADLINE, 'headline-chart')}"
        f"<div class='ro-muted' style='font-size:12px'>Benchmark {html.escape(data['benchmark_version'])}; "
        f"every slice on the Results tab.{html.escape(note)}</div>"
        f"<div id='headline-plot'>{results_plot_html()}</div>"
    )


def results_html() -> str:
    """Per slice: one chart and one short table (safe ship, mean return), and a link to the full report."""
    data = results()
    parts = [
        f"<p class='ro-muted'>Benchmark {html.escape(data['benchmark_version'])}, {data['n']:,} tasks per slice. "
        f"Intervals, exploits and targets are in {report_link(data.get('report', REPORT))}.</p>"
    ]
    for name, rows in data["slices"].items():
        table = "".join(
            f"<tr><td><code>{html.escape(policy).replace('_', '_<wbr>')}</code></td><td>{row['safe_ship']:.1%}</td>"
            f"<td>{row['mean_return']:+.2f}</td></tr>"
            for policy, row in rows.items()
        )
        slug = name.replace("/", "-")
        parts.append(
            f"<section class='ro-slice' id='slice-{html.escape(slug)}'><div class='ro-h'>{html.escape(name)}</div>"
            f"<div class='ro-slice-body'>{bars_html(rows)}<table class='ro-table'><tr><th>policy</th>"
            f"<th>safe ship</th><th>mean return</th></tr>{table}</table></div></section>"
        )
    return f"<div id='results-slices'>{''.join(parts)}</div>"


def results_plot_html() -> str:
    data = base64.b64encode((ASSETS / CHART).read_bytes()).decode("ascii")
    return (
        f"<img src='data:image/png;base64,{data}' alt='Baselines on held-out seeds' "
        "style='width:100%;max-width:1000px;height:auto;display:block;margin:6px auto 0'>"
    )
