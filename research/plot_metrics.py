"""The seed's evaluation chart: safe ship, P1 catch, false blocks and budget used, per policy.

python -m research.plot_metrics research/results/calibration.json --policies rule,oracle --out server/assets/metrics.png
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


def load_results(paths: list[Path]) -> list[dict]:
    results = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        results.extend(data["results"] if "results" in data else [data])
    return results


def plot(results: list[dict], out: Path, title: str = "Evaluation: policies on held-out seeds") -> Path:
    """Grouped bars in percent with 95% interval error bars (none for budget used, a ratio of totals)."""
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=120)
    width = 0.8 / max(1, len(results))
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
        ax.bar(xs, heights, width, yerr=[lower, upper], capsize=3, label=r["policy"])
    ax.set_xticks(range(len(BARS)), [label for _, label in BARS])
    ax.set_ylim(0, 122)  # headroom for the legend
    ax.set_ylabel("Percent")
    ax.set_title(title)
    ax.legend(ncol=min(4, len(results)), fontsize=8, loc="upper center")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="JSON files written by training.evaluate")
    parser.add_argument("--policies", default=None, help="comma-separated subset, in this order")
    parser.add_argument("--out", type=Path, default=Path("server/assets/metrics.png"))
    parser.add_argument("--title", default="Evaluation: policies on held-out seeds")
    args = parser.parse_args(argv)
    results = load_results(args.results)
    if args.policies:
        order = [p.strip() for p in args.policies.split(",")]
        by_name = {r["policy"]: r for r in results}
        missing = [p for p in order if p not in by_name]
        if missing:
            raise SystemExit(f"no results for {', '.join(missing)}; have: {', '.join(by_name)}")
        results = [by_name[p] for p in order]
    print(plot(results, args.out, args.title))


if __name__ == "__main__":
    main()
