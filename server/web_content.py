"""What the Release board shows from files: the demo presets, the latest results, its stylesheet.

They are package data (server/assets, installed as `releaseops_arena.server/assets`),
read through `importlib.resources`, so a pip-installed server finds them as the
checkout and the Space image do. The full calibration report is a document of the
repository (docs/calibration.md); the board links to it rather than shipping it.
"""

from __future__ import annotations

import base64
import json
from importlib import resources

ASSETS = resources.files(__package__) / "assets"
PRESET_FILES = ("seed_a_bad_ci.json", "seed_b_budget_restraint.json")
CHART = "metrics.png"
REPORT = "docs/calibration.md"  # in the repository and the Space, not in the wheel


def load_presets() -> dict[str, dict]:
    """The demo scenarios: title -> {scenario, story}."""
    presets: dict[str, dict] = {}
    for name in PRESET_FILES:
        data = json.loads((ASSETS / name).read_text())
        presets[data["title"]] = {"scenario": dict(data["scenario"]), "story": data.get("story", "")}
    return presets


def stylesheet() -> str:
    """The board's CSS as a <style> element (a gr.HTML carries it: the tab cannot set the page's css)."""
    return f"<style>\n{(ASSETS / 'web.css').read_text()}</style>\n"


def results() -> dict:
    """The headline numbers the calibration report wrote for the board (research/calibrate.py)."""
    return json.loads((ASSETS / "results.json").read_text())


def results_tables_markdown() -> str:
    """One short table per slice: each headline policy's safe-ship rate and mean return."""
    data = results()
    lines = [
        f"Benchmark {data['benchmark_version']}, {data['n']:,} tasks per slice. "
        f"The full report, with intervals, exploits and targets: `{data['report']}`.",
        "",
    ]
    for name, rows in data["slices"].items():
        lines += [f"**{name}**", "", "| policy | safe ship | mean return |", "|---|---:|---:|"]
        lines += [f"| {policy} | {row['safe_ship']:.1%} | {row['mean_return']:+.2f} |" for policy, row in rows.items()]
        lines.append("")
    return "\n".join(lines)


def results_plot_html() -> str:
    data = base64.b64encode((ASSETS / CHART).read_bytes()).decode("ascii")
    return (
        f"<img src='data:image/png;base64,{data}' alt='Baselines on held-out seeds' "
        "style='width:100%;max-width:1000px;height:auto;display:block;margin:0 auto'>"
    )
