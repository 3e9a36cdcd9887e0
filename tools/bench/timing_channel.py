"""Does the engine's timing say whether a release holds a shortcut? (a side-channel check)

    PYTHONPATH=. .venv/bin/python -m tools.bench.timing_channel -n 2000      # about a minute on one core

For the first `n` held-out-seed tasks at medium, it times in process (the minimum of `--repeats`
runs, to strip scheduler noise) `reset`, and the call that ends triage (which builds the deploy-gate
stage), and asks how well each time alone predicts whether that stage holds a shortcut: the area
under the ROC curve (0.5: no information). The generator
draws different evidence for a shortcut's artifacts, so some difference is expected; the number is
kept in docs/benchmarks.md so that a change that widens it is seen. Over the wire the network's
jitter is far larger than these microseconds; this script does not measure the wire.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from releaseops_arena.episode import Episode
from releaseops_arena.mechanisms import REGISTRY
from releaseops_arena.scenario_builder import mechanism_of
from releaseops_arena.splits import scenarios


def auc(positives: list[float], negatives: list[float]) -> float:
    """P(a random positive's time > a random negative's), ties counting half (Mann-Whitney)."""
    ranked = sorted([(t, 1) for t in positives] + [(t, 0) for t in negatives])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mid = (i + j + 1) / 2  # average 1-based rank of the tie group
        rank_sum += mid * sum(label for _, label in ranked[i:j])
        i = j
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def _end_triage(scenario: dict) -> tuple[float, Episode]:
    """Seconds the call that approves the last triage proposal takes."""
    episode = Episode(**scenario)
    pending = list(episode.world.active)
    for pid in pending[:-1]:
        episode.step("approve_proposal", {"proposal_id": pid})
    start = time.perf_counter()
    episode.step("approve_proposal", {"proposal_id": pending[-1]})
    return time.perf_counter() - start, episode


def _stage_has_shortcut(episode: Episode, stage: int) -> bool:
    return any(REGISTRY[mechanism_of(k)].stage == stage for k in episode.world.hazards)


def measure(n: int, repeats: int, difficulty: str = "medium") -> dict:
    rows = []
    for s in scenarios("heldout_seeds", n, difficulty):
        reset = end = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            episode = Episode(**s)
            reset = min(reset, time.perf_counter() - start)
            end = min(end, _end_triage(s)[0])
        rows.append((reset * 1e6, _stage_has_shortcut(episode, 0), end * 1e6, _stage_has_shortcut(episode, 1)))
    out = {"n": n, "repeats": repeats, "difficulty": difficulty}
    for name, t, y in (("reset", 0, 1), ("end_of_triage", 2, 3)):
        pos = [r[t] for r in rows if r[y]]
        neg = [r[t] for r in rows if not r[y]]
        out[name] = {
            "share_with_shortcut": round(len(pos) / n, 3),
            "median_us_with": round(statistics.median(pos), 1),
            "median_us_without": round(statistics.median(neg), 1),
            "auc": round(auc(pos, neg), 3),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="500 tasks")
    parser.add_argument("--json", type=Path, default=None, help="also write the result here (tools.bench.run_all)")
    args = parser.parse_args(argv)
    result = measure(500 if args.quick else args.n, args.repeats)
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)


def section(result: dict) -> str:
    """The report's section (tools/bench/report.py)."""
    rows = "\n".join(
        f"| {name.replace('_', ' ')} | {r['share_with_shortcut']:.0%} | {r['median_us_with']} | "
        f"{r['median_us_without']} | {r['auc']:.3f} |"
        for name, r in (("reset", result["reset"]), ("the call that ends triage", result["end_of_triage"]))
    )
    return (
        "## Timing side channel\n\n"
        f"`tools/bench/timing_channel.py`: the first {result['n']:,} held-out-seed tasks at "
        f"{result['difficulty']}, each "
        f"call timed in process as the minimum of {result['repeats']} runs. AUC: how well the time alone predicts "
        "whether the stage being built holds a shortcut (0.5: not at all). The wire adds far more jitter than "
        "these microseconds and is not measured here.\n\n"
        "| call | stages with a shortcut | median us, with | median us, without | AUC |\n|---|---|---|---|---|\n" + rows
    )


if __name__ == "__main__":
    main()
