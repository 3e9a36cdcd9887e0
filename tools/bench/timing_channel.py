"""Does the engine's timing say whether a release holds a shortcut? (a side-channel check)

    PYTHONPATH=. .venv/bin/python -m tools.bench.timing_channel -n 2000      # about a minute on one core

For the first `n` held-out-seed tasks at medium, it times in process (the minimum of `--repeats`
runs, to strip scheduler noise; taken in passes over every task, so that drift weighs on all alike
and no call finds its caches warmed by the same task just before) `reset`, and the call that ends
triage (which builds the deploy-gate stage), and asks how well each time alone predicts whether that
stage holds a shortcut: the area under the ROC curve (0.5: no information). The goal is an AUC of at
most `BOUND` for each call. Two things hold it: the generator does the same work for a shortcut site
as for a correct one (mechanisms.evidence_for, scenario_builder.site and deploy_gate), and each
stage's build ends with the timing blind (scenario_builder.timing_blind), a spin of a length no
hidden draw decides, which buries the fraction of a microsecond that equal work leaves (cache and
branch-predictor state). `--no-blind` measures without it. The numbers are kept in
docs/benchmarks.md so that a change that widens the channel is seen. Over the wire the network's
jitter is far larger than these microseconds; this script does not measure the wire.

On a loaded machine, `--clock thread` times with the thread's CPU time, which leaves out the time
the scheduler gives other processes (caches they share still add noise); raise `--repeats` too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from releaseops_arena import scenario_builder
from releaseops_arena.episode import Episode
from releaseops_arena.mechanisms import REGISTRY
from releaseops_arena.scenario_builder import mechanism_of
from releaseops_arena.splits import scenarios

BOUND = 0.55  # the most AUC a timed call may show
CLOCKS = {"perf": time.perf_counter, "thread": time.thread_time}
_clock = time.perf_counter


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
    start = _clock()
    episode.step("approve_proposal", {"proposal_id": pending[-1]})
    return _clock() - start, episode


def _stage_has_shortcut(episode: Episode, stage: int) -> bool:
    return any(REGISTRY[mechanism_of(k)].stage == stage for k in episode.world.hazards)


def measure(n: int, repeats: int, difficulty: str = "medium", clock: str = "perf", blind: bool = True) -> dict:
    global _clock
    _clock = CLOCKS[clock]
    if not blind:  # what equal work alone leaves
        real_spin, scenario_builder.spin = scenario_builder.spin, lambda turns: None
        try:
            return {**measure(n, repeats, difficulty, clock), "blind": False}
        finally:
            scenario_builder.spin = real_spin
    tasks = list(scenarios("heldout_seeds", n, difficulty))
    reset, end = [float("inf")] * n, [float("inf")] * n
    # Round-robin: each pass times every task once, so a task's repeats are spread over the whole run and
    # a machine that slows down or speeds up (another process starting, a frequency change) weighs on
    # every task alike instead of on the tasks that happened to be timed then.
    for _ in range(repeats):
        for i, s in enumerate(tasks):
            start = _clock()
            Episode(**s)
            reset[i] = min(reset[i], _clock() - start)
            end[i] = min(end[i], _end_triage(s)[0])
    rows = []
    for i, s in enumerate(tasks):
        episode = _end_triage(s)[1]
        rows.append((reset[i] * 1e6, _stage_has_shortcut(episode, 0), end[i] * 1e6, _stage_has_shortcut(episode, 1)))
    out = {"n": n, "repeats": repeats, "difficulty": difficulty, "clock": clock, "bound": BOUND, "blind": True}
    for name, t, y in (("reset", 0, 1), ("end_of_triage", 2, 3)):
        pos = [r[t] for r in rows if r[y]]
        neg = [r[t] for r in rows if not r[y]]
        out[name] = {
            "share_with_shortcut": round(len(pos) / n, 3),
            "median_us_with": round(statistics.median(pos), 1),
            "median_us_without": round(statistics.median(neg), 1),
            "auc": round(auc(pos, neg), 3),
        }
        out[name]["met"] = out[name]["auc"] <= BOUND
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--difficulty", default="medium", choices=("easy", "medium", "hard"))
    parser.add_argument("--clock", default="perf", choices=tuple(CLOCKS), help="thread: CPU time (a loaded machine)")
    parser.add_argument("--quick", action="store_true", help="500 tasks")
    parser.add_argument("--no-blind", action="store_true", help="without the timing blind (equal work alone)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result here (tools.bench.run_all)")
    args = parser.parse_args(argv)
    n = 500 if args.quick else args.n
    result = measure(n, args.repeats, args.difficulty, args.clock, not args.no_blind)
    if not args.no_blind:  # the report shows what the blind takes away
        bare = measure(n, args.repeats, args.difficulty, args.clock, blind=False)
        result["without_blind"] = {name: bare[name] for name in ("reset", "end_of_triage")}
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)
    for name in ("reset", "end_of_triage"):
        r = result[name]
        print(f"{name}: AUC {r['auc']:.3f} (bound {BOUND}): {'met' if r['met'] else 'NOT met'}")


def section(result: dict) -> str:
    """The report's section (tools/bench/report.py)."""
    rows = "\n".join(
        f"| {name.replace('_', ' ')} | {r['share_with_shortcut']:.0%} | {r['median_us_with']} | "
        f"{r['median_us_without']} | {r['auc']:.3f} | {'**met**' if r['auc'] <= BOUND else '**not met**'} |"
        for name, r in (("reset", result["reset"]), ("the call that ends triage", result["end_of_triage"]))
    )
    return (
        "## Timing side channel\n\n"
        f"`tools/bench/timing_channel.py`: the first {result['n']:,} held-out-seed tasks at "
        f"{result['difficulty']}, each "
        f"call timed in process ({result.get('clock', 'perf')} clock) as the minimum of {result['repeats']} "
        "passes over every task. "
        "AUC: how well the time alone predicts whether the stage being built holds a shortcut (0.5: not at "
        f"all); the goal is at most {BOUND}. Every stage's build ends with the timing blind "
        f"(`scenario_builder.timing_blind`: a spin of up to {scenario_builder.BLIND_TURNS:,} loop turns, as many "
        "as a keyed hash of the scenario says, the same on every repeat and independent of every hidden draw)"
        + (
            "; without it, equal work alone leaves an AUC of "
            f"{result['without_blind']['reset']['auc']:.3f} at reset and "
            f"{result['without_blind']['end_of_triage']['auc']:.3f} at the end of triage (same run)"
            if "without_blind" in result
            else ""
        )
        + ". The wire adds far more jitter than these microseconds and is not "
        "measured here. This run: `PYTHONPATH=. .venv/bin/python -m tools.bench.timing_channel "
        f"-n {result['n']} --repeats {result['repeats']}"
        + (f" --clock {result['clock']}" if result.get("clock", "perf") != "perf" else "")
        + (f" --difficulty {result['difficulty']}" if result["difficulty"] != "medium" else "")
        + "`.\n\n"
        "| call | stages with a shortcut | median us, with | median us, without | AUC | goal |\n"
        "|---|---|---|---|---|---|\n" + rows
    )


if __name__ == "__main__":
    main()
