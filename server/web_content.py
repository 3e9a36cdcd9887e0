"""What the Release board shows from files: the demo presets, the latest results, its stylesheet."""

from __future__ import annotations

import base64
import json
from pathlib import Path

STYLESHEET = Path(__file__).resolve().parent / "web.css"
PRESET_FILES = ("demo/seed_a_bad_ci.json", "demo/seed_b_budget_restraint.json")


def repo_file(relative: str) -> Path | None:
    """A file of the repository checkout (the server runs from it; the Space image copies it)."""
    for root in (Path(__file__).resolve().parent.parent, Path.cwd()):
        path = root / relative
        if path.is_file():
            return path
    return None


def load_presets() -> dict[str, dict]:
    """Demo scenarios from demo/*.json: title -> {scenario, story}."""
    presets: dict[str, dict] = {}
    for name in PRESET_FILES:
        path = repo_file(name)
        if path is None:
            continue
        data = json.loads(path.read_text())
        presets[data["title"]] = {"scenario": dict(data["scenario"]), "story": data.get("story", "")}
    return presets


def stylesheet() -> str:
    """The board's CSS as a <style> element (a gr.HTML carries it: the tab cannot set the page's css)."""
    return f"<style>\n{STYLESHEET.read_text()}</style>\n"


def results_plot_html() -> str:
    path = repo_file("docs/metrics.png")
    if path is None:
        return "<p class='ro-muted'>docs/metrics.png is not in this deployment.</p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f"<img src='data:image/png;base64,{data}' alt='Baselines on held-out seeds (docs/metrics.png)' "
            "style='width:100%;max-width:1000px;height:auto;display:block;margin:0 auto'>")


def results_markdown() -> str:
    path = repo_file("docs/calibration.md")
    return path.read_text() if path else "docs/calibration.md is not in this deployment."
