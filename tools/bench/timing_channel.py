"""Does the engine's timing say what the hidden world holds? (a side-channel check)

    PYTHONPATH=. .venv/bin/python -m tools.bench.timing_channel -n 2000   # a few minutes on one core

For the first `n` held-out-seed tasks at medium, it times in process (the minimum of `--repeats`
runs, to strip scheduler noise; taken in passes over every task, so that drift weighs on all alike
and no call finds its caches warmed by the same task just before) four calls, and asks how well each
time alone predicts its hidden side: the area under the ROC curve (0.5: no information).

* `reset` and the call that ends triage build a stage: does it hold a shortcut? (the goal's calls)
* approving, and blocking, a triage site card that does not end the phase: was it a shortcut? (a
  block's verdict stays hidden until its phase ends)

The goal is an AUC of at most `BOUND` for each call. Two things hold it: the generator and the
decisions do the same work either way (mechanisms.evidence_for, scenario_builder.site and
deploy_gate, episode's approve and block), and the timing blind (scenario_builder.blind_turns): every
stage's build and every block ends with a spin of a length no hidden draw decides, which buries what
equal work leaves (tens to hundreds of nanoseconds of cache and branch-predictor state).
`--no-blind` measures without the spin, and the report shows both. The numbers are kept in
docs/benchmarks.md so that a change that widens the channel is seen. Over the wire the network's
jitter is far larger than these microseconds; this script does not measure the wire.

On a loaded machine, `--clock thread` times with the thread's CPU time, which leaves out the time
the scheduler gives other processes (caches they share still add noise); raise `--repeats` too.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from pathlib import Path

from releaseops_arena import scenario_builder
from releaseops_arena.episode import BLOCK_BLIND_TURNS, Episode
from releaseops_arena.mechanisms import REGISTRY
from releaseops_arena.safety_rules import relevant_rules
from releaseops_arena.scenario_builder import mechanism_of
from releaseops_arena.splits import scenarios
from tools.bench.common import commit

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


def _end_triage(scenario: dict) -> tuple[float, bool]:
    """Seconds the call that approves the last triage proposal takes; whether the deploy stage it
    builds holds a shortcut."""
    episode = Episode(**scenario)
    pending = list(episode.world.active)
    for pid in pending[:-1]:
        episode.step("approve_proposal", {"proposal_id": pid})
    start = _clock()
    episode.step("approve_proposal", {"proposal_id": pending[-1]})
    return _clock() - start, _stage_has_shortcut(episode, 1)


def _site_card(episode: Episode) -> str | None:
    """The first triage site card that is not the last pending one (deciding it ends no phase)."""
    for pid in episode.world.active[:-1]:
        p = episode.world.proposals[pid]
        if p.truth.label in ("shortcut", "correct") and p.truth.critical and relevant_rules(p.card):
            return pid
    return None


def _decide(scenario: dict, tool: str) -> tuple[float, bool] | None:
    """Seconds approving (or blocking, with the first rule its risk allows) a triage site card takes;
    whether it was a shortcut. Its verdict stays hidden until the phase ends."""
    episode = Episode(**scenario)
    pid = _site_card(episode)
    if pid is None:
        return None
    p = episode.world.proposals[pid]
    args = {"proposal_id": pid} | ({"rule_id": relevant_rules(p.card)[0]} if tool == "block_proposal" else {})
    start = _clock()
    episode.step(tool, args)
    return _clock() - start, p.truth.label == "shortcut"


def _reset(scenario: dict) -> tuple[float, bool]:
    start = _clock()
    episode = Episode(**scenario)
    return _clock() - start, _stage_has_shortcut(episode, 0)


def _stage_has_shortcut(episode: Episode, stage: int) -> bool:
    return any(REGISTRY[mechanism_of(k)].stage == stage for k in episode.world.hazards)


# The timed calls: (name, what it takes a scenario to, the label it is scored against). The first two
# are the goal's (they build a stage); a decision on a site card is timed too, as an adversary would.
CALLS = (
    ("reset", _reset),
    ("end_of_triage", _end_triage),
    ("approve_site", lambda s: _decide(s, "approve_proposal")),
    ("block_site", lambda s: _decide(s, "block_proposal")),
)


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
    best: dict[str, list[float]] = {name: [float("inf")] * n for name, _ in CALLS}
    label: dict[str, list[bool | None]] = {name: [None] * n for name, _ in CALLS}
    # Round-robin: each pass times every task once, so a task's repeats are spread over the whole run and
    # a machine that slows down or speeds up (another process starting, a frequency change) weighs on
    # every task alike instead of on the tasks that happened to be timed then.
    for _ in range(repeats):
        for i, s in enumerate(tasks):
            for name, call in CALLS:
                timed = call(s)
                if timed is not None:
                    best[name][i] = min(best[name][i], timed[0])
                    label[name][i] = timed[1]
    out = {"n": n, "repeats": repeats, "difficulty": difficulty, "clock": clock, "bound": BOUND, "blind": True}
    for name, _ in CALLS:
        pos = [t * 1e6 for t, y in zip(best[name], label[name]) if y is True]
        neg = [t * 1e6 for t, y in zip(best[name], label[name]) if y is False]
        out[name] = {
            "timed": len(pos) + len(neg),
            "share_with_shortcut": round(len(pos) / (len(pos) + len(neg)), 3),
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
    if not args.no_blind:  # the report shows what the blind takes away, and what it costs
        bare = measure(n, args.repeats, args.difficulty, args.clock, blind=False)
        result["without_blind"] = {name: bare[name] for name, _ in CALLS}
        # Timed as the difference of the median times with and without it (shortcut or not alike).
        result["blind_cost_us"] = {
            name: round(_median_us(result[name]) - _median_us(bare[name]), 1) for name in ("reset", "end_of_triage")
        } | {"block_site": round(_median_us(result["block_site"]) - _median_us(bare["block_site"]), 1)}
    result |= {"date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"), "commit": commit()}
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)
    for name, _ in CALLS:
        r = result[name]
        print(f"{name}: AUC {r['auc']:.3f} (bound {BOUND}): {'met' if r['met'] else 'NOT met'}")


def _median_us(row: dict) -> float:
    return statistics.median([row["median_us_with"], row["median_us_without"]])


# What each call's time is scored against, for the report.
PREDICTS = {
    "reset": ("reset", "the triage stage it builds holds a shortcut"),
    "end_of_triage": ("the call that ends triage", "the deploy stage it builds holds a shortcut"),
    "approve_site": ("approving a triage site card (not the phase's last)", "the card is a shortcut"),
    "block_site": ("blocking a triage site card (not the phase's last)", "the card is a shortcut (a true block)"),
}


def section(result: dict, meta: dict | None = None) -> str:
    """The report's section (tools/bench/report.py); says so when it was measured apart from the report's run."""
    from tools.bench.abuse import _separate_run

    apart = _separate_run(result, meta or {})
    bare = result.get("without_blind", {})
    rows = "\n".join(
        f"| {call} | {predicts} | {r['share_with_shortcut']:.0%} | {r['median_us_with']} | {r['median_us_without']} | "
        f"{r['auc']:.3f} | {bare[name]['auc']:.3f} | {'**met**' if r['auc'] <= BOUND else '**not met**'} |"
        for name, (call, predicts) in PREDICTS.items()
        if name in result
        for r in (result[name],)
        if name in bare
    )
    cost = result.get("blind_cost_us", {})
    return (
        "## Timing side channel\n\n"
        + (f"Measured apart from the run above, on {apart} at commit {result.get('commit')}. " if apart else "")
        + f"`tools/bench/timing_channel.py`: the first {result['n']:,} held-out-seed tasks at "
        f"{result['difficulty']}, each "
        f"call timed in process ({result.get('clock', 'perf')} clock) as the minimum of {result['repeats']} "
        "passes over every task. "
        "AUC: how well the time alone predicts what the call's hidden side holds (0.5: not at all); the goal is "
        f"at most {BOUND}. The generator and the decisions do the same work either way, and what equal work leaves "
        "(tens to hundreds of nanoseconds from the CPU's caches and predictors) goes under the timing blind: every "
        f"stage's build ends with a spin of up to {scenario_builder.BLIND_TURNS:,} loop turns, and every block with "
        f"one of up to {BLOCK_BLIND_TURNS:,}, as many as a hash keyed by the scenario says (`scenario_builder."
        "blind_turns`; a block's also hashes every call before it): the same whenever the same calls are repeated, "
        "independent of every hidden draw, unknown without the salt. "
        "The column 'AUC, no blind' is the same run with the spin left out"
        + (
            f". The blind adds {cost['reset']} us to a reset's median time, {cost['end_of_triage']} us to the "
            f"call that ends triage and {cost['block_site']} us to a block"
            if cost
            else ""
        )
        + ". The wire adds far more jitter than these microseconds and is not "
        "measured here. This run: `PYTHONPATH=. .venv/bin/python -m tools.bench.timing_channel "
        f"-n {result['n']} --repeats {result['repeats']}"
        + (f" --clock {result['clock']}" if result.get("clock", "perf") != "perf" else "")
        + (f" --difficulty {result['difficulty']}" if result["difficulty"] != "medium" else "")
        + "`.\n\n"
        "| call | its time predicts whether | share with a shortcut | median us, with | median us, without | AUC | "
        "AUC, no blind | goal |\n"
        "|---|---|---|---|---|---|---|---|\n" + rows
    )


if __name__ == "__main__":
    main()
