"""The evaluation chart: safe ship, P1 catch, false blocks and budget used, per policy.

python -m research.plot_metrics research/results/calibration.json --policies rule,oracle --out docs/x.png
python -m research.plot_metrics --headline   # the web board's chart: server/assets/metrics.png

The board shows the chart at 300-400 px wide (beside its safe-ship bars, or on a phone), so the figure is
small in inches with large type, and the legend sits under the bars. `--headline` plots exactly the
policies of the board's bars (`server.web_content.HEADLINE`, in its order, with its names and colours):
the calibration report's baselines, and the trained policy from the learnability results.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: CI and servers have no display
import matplotlib.pyplot as plt  # noqa: E402

BARS = [
    ("safe_ship", "Safe ship"),
    ("p1_catch", "P1 catch"),
    ("false_block", "False blocks"),
    ("budget_used", "Budget used"),
]
ROOT = Path(__file__).resolve().parent.parent
CALIBRATION = ROOT / "research" / "results" / "calibration.json"
LEARNABILITY = ROOT / "research" / "results" / "learnability.json"
HEADLINE_OUT = ROOT / "server" / "assets" / "metrics.png"
# The board's bar colours (server/assets/web.css, `.ro-barrow .fill`); rule a lighter blue than the
# planner, which shares the board's default blue, so that the two bars of a group tell apart.
COLOURS = {"naive": "#b42318", "rule": "#93b4f5", "planner": "#2563eb", "trained": "#1a7f37", "oracle": "#7c3aed"}


def load_results(paths: list[Path]) -> list[dict]:
    results = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        results.extend(data["results"] if "results" in data else [data])
    return results


def plot(
    results: list[dict],
    out: Path,
    title: str = "Evaluation: policies on held-out seeds",
    labels: dict[str, str] | None = None,
    colours: dict[str, str] | None = None,
) -> Path:
    """Grouped bars in percent with 95% interval error bars (none for budget used, a ratio of totals).
    `labels` and `colours` by policy name (defaults: the name, matplotlib's cycle)."""
    labels, colours = labels or {}, colours or {}
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=110)
    width = 0.84 / max(1, len(results))
    for i, r in enumerate(results):
        heights, lower, upper = [], [], []
        for key, _ in BARS:
            m = r["metrics"][key]
            value = 100 * (m["rate"] or 0.0)
            lo, hi = (100 * m["ci95"][0], 100 * m["ci95"][1]) if "ci95" in m else (value, value)
            heights.append(value)
            lower.append(max(0.0, value - lo))
            upper.append(max(0.0, hi - value))
        xs = [j + (i - (len(results) - 1) / 2) * width for j in range(len(BARS))]
        name = r["policy"]
        ax.bar(
            xs, heights, width, yerr=[lower, upper], capsize=2, label=labels.get(name, name), color=colours.get(name)
        )
    ax.set_xticks(range(len(BARS)), [label.replace(" ", "\n") for _, label in BARS], fontsize=13)
    ax.tick_params(axis="y", labelsize=12)
    ax.set_ylim(0, 105)
    ax.set_ylabel("Percent", fontsize=13)
    ax.set_title(title, fontsize=14)
    ax.spines[["top", "right"]].set_visible(False)
    # Under the bars, in as many rows as it takes: inside the axes it covered the 100% bars.
    ax.legend(ncol=min(3, len(results)), fontsize=12.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight", pad_inches=0.08)  # the legend under the axes included
    plt.close(fig)
    return out


def headline_results(calibration: Path = CALIBRATION, learnability: Path = LEARNABILITY) -> tuple[list[dict], int]:
    """The board's headline policies on its headline slice, in its order, and the episodes per policy:
    the baselines from the calibration report, the trained policy from the learnability results."""
    from server.web_content import HEADLINE, HEADLINE_SLICE

    rows = dict(json.loads(Path(calibration).read_text())["slices"][HEADLINE_SLICE])
    learned = json.loads(Path(learnability).read_text())["structured"]["slices"].get(HEADLINE_SLICE, {})
    rows.update({k: v for k, v in learned.get("results", {}).items() if k == "trained"})
    missing = [p for p in HEADLINE if p not in rows]
    if missing:
        raise SystemExit(f"no {HEADLINE_SLICE} results for {', '.join(missing)}")
    results = [{**rows[p], "policy": p} for p in HEADLINE]
    return results, results[0]["metrics"]["episodes"]


def headline(out: Path = HEADLINE_OUT, **paths) -> Path:
    """The web board's chart (server/assets/metrics.png): the policies of its bars, with their names."""
    from server.web_content import HEADLINE

    results, n = headline_results(**paths)
    return plot(results, out, f"Held-out seeds, medium ({n:,} episodes each)", HEADLINE, COLOURS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="*", type=Path, help="JSON files written by training.evaluate")
    parser.add_argument("--policies", default=None, help="comma-separated subset, in this order")
    parser.add_argument("--headline", action="store_true", help="the web board's chart (ignores the rest)")
    parser.add_argument("--out", type=Path, default=None, help="default: server/assets/metrics.png")
    parser.add_argument("--title", default="Evaluation: policies on held-out seeds")
    args = parser.parse_args(argv)
    if args.headline:
        print(headline(args.out or HEADLINE_OUT))
        return
    if not args.results:
        parser.error("name the results files, or pass --headline")
    results = load_results(args.results)
    if args.policies:
        order = [p.strip() for p in args.policies.split(",")]
        by_name = {r["policy"]: r for r in results}
        missing = [p for p in order if p not in by_name]
        if missing:
            raise SystemExit(f"no results for {', '.join(missing)}; have: {', '.join(by_name)}")
        results = [by_name[p] for p in order]
    print(plot(results, args.out or HEADLINE_OUT, args.title))


if __name__ == "__main__":
    main()
