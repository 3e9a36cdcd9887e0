"""The design's before/after behaviour examples for the language model: held-out episodes played by the
warm start and by the GRPO checkpoint, each call as a sentence.

    python -m research.lm_examples runs/lm --difficulty easy --into research/results/lm_learnability.json
    python -m research.lm_examples --paired NAME --into research/results/lm_learnability.json

For each checkpoint pair (`<run>/sft`, or the kept `<run>/sft_seed<k>` its results name, and `<run>/grpo`;
with `--paired`, the two checkpoints that `research.lm_paired` entry compared, on its split and level from
its first task, and the examples are kept on that entry) it plays held-out tasks from `--start` greedily (as
`training.evaluate --policy hf:<dir>` does) and keeps up to three: the first where GRPO ends better, the
first where it ends worse, and the first where both end alike, so a reader sees a gain, a loss and what did
not change. The sentences are the web board's (`server.web_render.sentence`): what was approved, blocked
citing which rule, inspected and what it showed, refused and why.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from releaseops_arena.catalog import OUTCOMES
from releaseops_arena.policies import play
from releaseops_arena.splits import task_scenario
from research import copy_model
from server.web_render import sentence
from training.evaluate import make_policy

from .lm_report import examples_markdown

SPLIT = "heldout_seeds"


def episode(checkpoint: Path, scenario: dict) -> dict:
    """One greedy episode of a checkpoint: outcome, return, and each call as a sentence."""
    run = play(make_policy(f"hf:{checkpoint}"), scenario)
    calls = []
    for step in run["steps"]:
        calls.append(sentence(step["tool"], step.get("arguments") or {}, step.get("result"), step.get("error")))
    m = run["metrics"]
    return {"outcome": m["outcome"], "return": round(run["return"], 2), "calls": calls}


def examples(
    warm: Path, grpo: Path, difficulty: str, start: int = 0, search: int = 40, split: str = SPLIT
) -> list[dict]:
    """Held-out episodes before (the warm start `warm`) and after (the GRPO checkpoint `grpo`): the first task
    where GRPO ends better (a higher return), the first where it ends worse, and the first where both finish
    the release alike, so a reader sees a gain, a loss and what stayed; a kind none of the `search` tasks
    shows is left out."""
    copy_model.register()
    found: dict[str, dict] = {}
    for i in range(start, start + search):
        scenario = task_scenario(split, i, difficulty)
        before, after = episode(warm, scenario), episode(grpo, scenario)
        row = {"task": {"split": split, "index": i, "difficulty": difficulty}, "before": before, "after": after}
        if after["return"] != before["return"]:
            kind = "better" if after["return"] > before["return"] else "worse"
        elif after["outcome"] == before["outcome"] and before["outcome"] in OUTCOMES:
            kind = "same"
        else:
            continue  # the same return, ended another way: neither a gain nor a loss
        found.setdefault(kind, {**row, "kind": kind})
        if len(found) == 3:
            break
    return [found[k] for k in ("better", "worse", "same") if k in found]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "run", type=Path, nargs="?", help="an lm_learnability --out folder (with grpo/, and sft/ or sft_seed<k>/)"
    )
    parser.add_argument("--difficulty", choices=("easy", "medium", "hard"), help="the level (default: easy)")
    parser.add_argument("--start", type=int, help="the first held-out task searched (default: 2000)")
    parser.add_argument("--search", type=int, default=40)
    parser.add_argument("--into", type=Path, help="add the examples to this lm_learnability results file")
    parser.add_argument(
        "--paired", metavar="NAME", help="the lm_paired entry of this name in --into: its two checkpoints, its tasks"
    )
    args = parser.parse_args(argv)
    if (args.run is None) == (args.paired is None):
        parser.error("give exactly one of: a run folder, --paired NAME")
    if args.paired:
        if not args.into:
            parser.error("--paired needs --into, the results file that holds the entry")
        if args.start is not None or args.difficulty is not None:
            parser.error("--paired plays the entry's own tasks and level: drop --start and --difficulty")
        entries = {e["name"]: e for e in json.loads(args.into.read_text()).get("paired", [])}
        if args.paired not in entries:
            parser.error(f"--paired {args.paired!r}: no such entry in {args.into}; one of: {', '.join(entries)}")
        entry = entries[args.paired]
        warm, grpo = map(Path, entry["checkpoints"])
        played = entry["tasks_played"]
        split, difficulty, start = played["split"], played["difficulty"], played["start"]
    else:
        warm, grpo, split = args.run / "sft", args.run / "grpo", SPLIT
        difficulty, start = args.difficulty or "easy", 2000 if args.start is None else args.start
        if args.into:  # warm starts side by side: the kept one's folder, as the results name it
            kept = args.run / f"sft_seed{json.loads(args.into.read_text())['sft']['seed']}"
            warm = kept if kept.exists() else warm
    if args.paired and not (warm.exists() and grpo.exists()):
        parser.error(f"--paired {args.paired!r}: its checkpoints {warm} and {grpo} must both be on this machine")
    if not warm.exists():
        parser.error(f"{warm} is not a warm start; with sft_seeds > 1 pass --into the run's results")
    rows = examples(warm, grpo, difficulty, start, args.search, split)
    if args.into:
        data = json.loads(args.into.read_text())
        if args.paired:
            next(e for e in data["paired"] if e["name"] == args.paired)["examples"] = rows
        else:
            data["examples"] = rows
        args.into.write_text(json.dumps(data, indent=1))
    print("\n".join(examples_markdown(rows)))


if __name__ == "__main__":
    main()
