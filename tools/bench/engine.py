"""Engine throughput: tool calls per second, reset latency, and the cost of a step
against the serialization floor, for `ReleaseOpsToolEnv` on one core.

    PYTHONPATH=. .venv/bin/python -m tools.bench.engine [--quick] [--json out.json]

Method. The `rule` baseline plays `--per-cell` held-out-seed episodes of every
(family, difficulty) in-process first (the held-out family included, archetype
mixes cycling); its call sequences are recorded. The timed part replays those
calls directly on one `ReleaseOpsToolEnv` (`getattr(env, tool)(**arguments)`),
so policy time is excluded. Each repeat times, side by side:

* every `reset(**scenario)` (reset latency);
* every tool call (the per-step cost; tool calls/s = calls / summed call time);
* the serialization floor of the same steps: `json.dumps(episode.board())` right
  after each step (the observation board, built and serialized), and, for
  reference, `json.dumps` of the prebuilt board dict and of the tool's result
  dict alone.

Ratios are computed per repeat (step cost / floor) and their median is reported.
The process is pinned to one core (`os.sched_setaffinity`) where the OS allows it.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import time

from releaseops_arena.tool_env import ReleaseOpsToolEnv
from tools.bench import profiles
from tools.bench.common import allowed_cpus, med, percentile, pin, record, summary, workload_scenarios, write_json


def _prepare(episodes: list[dict]) -> tuple[list[dict], list[dict]]:
    """Boards and result dicts after every step of every episode (for the prebuilt-dict floors)."""
    env = ReleaseOpsToolEnv()
    boards, results = [], []
    for ep in episodes:
        env.reset(**ep["scenario"])
        for tool, args in ep["calls"]:
            try:
                text = getattr(env, tool)(**args)
                results.append(json.loads(text))
            except ValueError as exc:
                results.append({"error": str(exc)})
            boards.append(env.episode.board())
    return boards, results


def one_repeat(episodes: list[dict], boards: list[dict], results: list[dict]) -> dict:
    env = ReleaseOpsToolEnv()
    pc = time.perf_counter_ns
    reset_ns: list[int] = []
    reset_by_difficulty: dict[str, list[int]] = {}
    call_ns: list[int] = []
    by_tool: dict[str, list[int]] = {}
    errors = 0
    # 1. the steps (and resets), each call timed on its own
    for ep in episodes:
        t0 = pc()
        env.reset(**ep["scenario"])
        dt = pc() - t0
        reset_ns.append(dt)
        reset_by_difficulty.setdefault(ep["scenario"]["difficulty"], []).append(dt)
        for tool, args in ep["calls"]:
            fn = getattr(env, tool)
            t0 = pc()
            try:
                fn(**args)
            except ValueError:
                errors += 1
            dt = pc() - t0
            call_ns.append(dt)
            by_tool.setdefault(tool, []).append(dt)
    # 2. the floor at the same states: json.dumps(episode.board()) after each step
    floor_board_live_ns = 0
    for ep in episodes:
        env.reset(**ep["scenario"])
        for tool, args in ep["calls"]:
            try:
                getattr(env, tool)(**args)
            except ValueError:
                pass
            episode = env.episode
            t0 = pc()
            json.dumps(episode.board())
            floor_board_live_ns += pc() - t0
    # 3. pure serialization of prebuilt dicts (no board building)
    t0 = pc()
    for b in boards:
        json.dumps(b)
    floor_board_dict_ns = pc() - t0
    t0 = pc()
    for r in results:
        json.dumps(r)
    floor_result_ns = pc() - t0

    n = len(call_ns)
    step_total = sum(call_ns)
    return {
        "calls": n,
        "errors": errors,
        "calls_per_s": n / (step_total / 1e9),
        "step_mean_us": step_total / n / 1e3,
        "step_median_us": percentile(call_ns, 50) / 1e3,
        "step_p99_us": percentile(call_ns, 99) / 1e3,
        "reset_median_us": percentile(reset_ns, 50) / 1e3,
        "reset_p99_us": percentile(reset_ns, 99) / 1e3,
        "reset_median_us_by_difficulty": {d: percentile(v, 50) / 1e3 for d, v in reset_by_difficulty.items()},
        "episodes_per_s": len(episodes) / ((step_total + sum(reset_ns)) / 1e9),
        "floor_board_us": floor_board_live_ns / n / 1e3,
        "floor_board_dict_us": floor_board_dict_ns / n / 1e3,
        "floor_result_us": floor_result_ns / n / 1e3,
        "ratio_board": step_total / floor_board_live_ns,
        "ratio_board_dict": step_total / floor_board_dict_ns,
        "ratio_result": step_total / floor_result_ns,
        "step_median_us_by_tool": {t: percentile(v, 50) / 1e3 for t, v in sorted(by_tool.items())},
        "calls_by_tool": {t: len(v) for t, v in sorted(by_tool.items())},
    }


def profile(episodes: list[dict]) -> dict:
    """cProfile of the steps alone and of the resets alone (one replay each)."""
    env = ReleaseOpsToolEnv()
    steps, resets = cProfile.Profile(), cProfile.Profile()
    for ep in episodes:
        resets.enable()
        env.reset(**ep["scenario"])
        resets.disable()
        steps.enable()
        for tool, args in ep["calls"]:
            try:
                getattr(env, tool)(**args)
            except ValueError:
                pass
        steps.disable()
    return {name: profiles.top(pstats.Stats(prof)) for name, prof in (("steps", steps), ("resets", resets))}


def run(quick: bool = False, per_cell: int | None = None, repeats: int | None = None) -> dict:
    per_cell = per_cell or (6 if quick else 25)
    repeats = repeats or (3 if quick else 7)
    cpus = allowed_cpus()
    pinned = pin({cpus[-1]})
    t_rec = time.perf_counter()
    episodes = record("rule", workload_scenarios(per_cell))
    record_s = time.perf_counter() - t_rec
    boards, results = _prepare(episodes)
    one_repeat(episodes, boards, results)  # warm-up
    runs = []
    for _ in range(repeats):
        gc.collect()
        runs.append(one_repeat(episodes, boards, results))
    keys = [
        "calls_per_s",
        "step_mean_us",
        "step_median_us",
        "step_p99_us",
        "reset_median_us",
        "reset_p99_us",
        "episodes_per_s",
        "floor_board_us",
        "floor_board_dict_us",
        "floor_result_us",
        "ratio_board",
        "ratio_board_dict",
        "ratio_result",
    ]
    medians = {k: med([r[k] for r in runs]) for k in keys}
    spread = {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in keys}
    medians["reset_median_us_by_difficulty"] = {
        d: med([r["reset_median_us_by_difficulty"][d] for r in runs]) for d in runs[0]["reset_median_us_by_difficulty"]
    }
    medians["step_median_us_by_tool"] = {
        t: med([r["step_median_us_by_tool"][t] for r in runs]) for t in runs[0]["step_median_us_by_tool"]
    }
    calls_per_episode = [len(ep["calls"]) for ep in episodes]
    outcomes: dict[str, int] = {}
    for ep in episodes:
        outcomes[ep["metrics"]["outcome"]] = outcomes.get(ep["metrics"]["outcome"], 0) + 1
    return {
        "pinned_cpus": pinned,
        "repeats": repeats,
        "episodes": len(episodes),
        "per_cell": per_cell,
        "calls_per_repeat": runs[0]["calls"],
        "invalid_calls_per_repeat": runs[0]["errors"],
        "calls_by_tool": runs[0]["calls_by_tool"],
        "calls_per_episode": summary(calls_per_episode),
        "rule_outcomes": outcomes,
        "record_s": record_s,
        "median": medians,
        "range": spread,
        "runs": runs,
        "profile": profile(episodes),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="ReleaseOpsToolEnv throughput on one core.")
    parser.add_argument("--quick", action="store_true", help="fewer episodes and repeats (~10 s)")
    parser.add_argument("--per-cell", type=int, help="episodes per (family, difficulty)")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--json", help="write the results here (default: stdout)")
    args = parser.parse_args(argv)
    result = run(args.quick, args.per_cell, args.repeats)
    if args.json:
        write_json(args.json, result)
        m = result["median"]
        print(
            f"engine: {m['calls_per_s']:,.0f} calls/s, step {m['step_mean_us']:.1f} us, reset "
            f"{m['reset_median_us']:.0f} us, floor ratio {m['ratio_board']:.2f}x (board) "
            f"{m['ratio_result']:.2f}x (result)"
        )
    else:
        write_json(None, result)


if __name__ == "__main__":
    main()
