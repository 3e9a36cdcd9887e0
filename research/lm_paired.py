"""Two checkpoints on the same held-out tasks: each one's summary, and the gain task by task.

    python -m research.lm_paired runs/lm_seed2/sft_seed3 runs/lm_seed2/grpo_long/checkpoint-10 \
        --start 2000 -n 2000 --out runs/eval/paired_seed2.json

The LM study's verdict compares two 95% intervals, each over the tasks' spread in return. Both
checkpoints play the very same tasks greedily, so the difference task by task also has an interval,
which leaves out the spread between tasks that both share. This prints both: each checkpoint's
summary (as `research.lm_learnability.evaluation` gives it), whether their return intervals are apart,
and the paired gain with its interval and how many tasks got better, worse or stayed the same.
The episodes are kept in `--out` under `<checkpoint>@<split>/<difficulty>/<start>+<n>`, so a second run
with the same arguments only reads them (a checkpoint retrained in place needs a new `--out`). With
`--into` (an lm_learnability results file) the comparison joins its `paired` list under `--name`
(replacing one of that name), and the report renders it.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from releaseops_arena.splits import task_scenario
from training.evaluate import mean_ci, run_episodes

from .lm_learnability import DIFFICULTIES, DIFFICULTY, SPLIT, checkpoint_policy, one_thread_children, summary
from .lm_report import intervals, valid_calls


def played(checkpoint: str, start: int, n: int, workers: int, split: str, difficulty: str) -> list[dict]:
    """Each episode's metrics (training.evaluate), tasks `start`..`start + n - 1` of `split`, greedy."""
    scenarios = [task_scenario(split, i, difficulty) for i in range(start, start + n)]
    with one_thread_children():
        return [
            runs[0] for runs in run_episodes(checkpoint_policy(checkpoint), scenarios, workers=workers, progress=False)
        ]


def paired(before: list[dict], after: list[dict]) -> dict:
    """Both summaries, how their return intervals lie ("after above", "after below" or "overlapping") and
    the paired gain: after's return minus before's, task by task, with its normal 95% interval."""
    if [e["seed"] for e in before] != [e["seed"] for e in after]:
        raise ValueError("the two checkpoints were not played on the same tasks")
    gains = [late["episode_return"] - early["episode_return"] for early, late in zip(before, after)]
    first, second = summary(before), summary(after)
    return {
        "before": first,
        "after": second,
        "intervals": intervals(first, second),
        "gain": {"mean": round(sum(gains) / len(gains), 4), "ci95": mean_ci(gains)},
        "tasks": {
            "better": sum(g > 1e-9 for g in gains),
            "worse": sum(g < -1e-9 for g in gains),
            "same": sum(abs(g) <= 1e-9 for g in gains),
        },
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("before", help="checkpoint folder (a copy model): the warm start")
    p.add_argument("after", help="checkpoint folder: the model after GRPO")
    p.add_argument("--split", default=SPLIT)
    p.add_argument("--difficulty", choices=DIFFICULTIES, default=DIFFICULTY)
    p.add_argument("--start", type=int, default=2000, help="first task (the published evaluation starts at 2000)")
    p.add_argument("-n", type=int, default=1000, help="tasks (at least 30: the intervals are normal approximations)")
    p.add_argument("--workers", type=int, default=2, help="processes, one torch thread each")
    p.add_argument("--out", type=Path, default=None, help="JSON file that keeps the episodes (read when present)")
    p.add_argument("--into", type=Path, default=None, help="add the comparison to this lm_learnability results file")
    p.add_argument("--name", default=None, help="its name in the report (with --into)")
    p.add_argument("--note", default="", help="what the two checkpoints are (with --into)")
    args = p.parse_args(argv)
    if args.n < 30:
        p.error(f"-n {args.n}: at least 30 tasks, for the normal-approximation intervals to hold")
    if args.into and not args.name:
        p.error("--into needs --name: the comparison's name in the report")
    if args.into and not args.into.is_file():
        p.error(f"--into {args.into}: no such results file (an lm_learnability results file)")
    kept = json.loads(args.out.read_text()) if args.out and args.out.exists() else {}
    runs = []
    for checkpoint in (args.before, args.after):
        key = f"{checkpoint}@{args.split}/{args.difficulty}/{args.start}+{args.n}"
        if key not in kept:
            kept[key] = played(checkpoint, args.start, args.n, args.workers, args.split, args.difficulty)
            if args.out:
                args.out.write_text(json.dumps(kept))
        runs.append(kept[key])
    result = paired(*runs)
    for label, m in (("before", result["before"]), ("after", result["after"])):
        lo, hi = m["mean_return"]["ci95"]
        print(
            f"{label}: mean return {m['mean_return']['mean']:.3f} [{lo:.3f}, {hi:.3f}], "
            f"{valid_calls(m)}, missed deadlines {100 * m['missed_deadline']['rate']:.1f}%"
        )
    g, t = result["gain"], result["tasks"]
    print(
        f"intervals {result['intervals']}; paired gain {g['mean']:+.3f} "
        f"[{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}] over {args.n} tasks: {t['better']} better, "
        f"{t['worse']} worse, {t['same']} the same"
    )
    if args.into:
        record(args, result, replay_command(args))
    return result


def replay_command(args) -> str:
    """The command that plays this comparison again: the checkpoints and tasks, not where it was written."""
    words = [
        "python",
        "-m",
        "research.lm_paired",
        args.before,
        args.after,
        "--start",
        str(args.start),
        "-n",
        str(args.n),
    ]
    words += ["--split", args.split] if args.split != SPLIT else []
    words += ["--difficulty", args.difficulty] if args.difficulty != DIFFICULTY else []
    return shlex.join(words)


def record(args, result: dict, command: str) -> None:
    """Put the comparison into the results file's `paired` list, one entry per name, in the order added."""
    results = json.loads(args.into.read_text())
    entry = {
        "name": args.name,
        "note": args.note,
        "command": command,
        "checkpoints": [args.before, args.after],
        "tasks_played": {"split": args.split, "difficulty": args.difficulty, "start": args.start},
        **result,
    }
    others = [e for e in results.get("paired", []) if e["name"] != args.name]
    results["paired"] = others + [entry]
    args.into.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
