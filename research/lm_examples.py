"""The design's before/after behaviour examples for the language model: one held-out episode played by the
warm start and by the GRPO checkpoint, each call as a sentence.

    python -m research.lm_examples runs/lm --difficulty easy --into research/results/lm_learnability.json

For each checkpoint pair (`<run>/sft`, or the kept `<run>/sft_seed<k>` its results name, and
`<run>/grpo`) it plays held-out tasks from `--start` greedily (as `training.evaluate --policy hf:<dir>`
does) and keeps two: the first where the two end differently, and the first where both play the whole
release, so a reader sees what changed and what did not. The
sentences are the web board's (`server.web_render.sentence`): what was approved, blocked citing which
rule, inspected and what it showed, refused and why.
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


def examples(run_dir: Path, difficulty: str, start: int = 0, search: int = 40, warm: str = "sft") -> list[dict]:
    """Two held-out episodes before (warm start, `<run>/<warm>`) and after (GRPO): the first whose outcome or
    return differs, then the first where both finish the release (or the next task, when none does)."""
    copy_model.register()
    chosen: list[dict] = []
    same = None
    for i in range(start, start + search):
        scenario = task_scenario(SPLIT, i, difficulty)
        before, after = episode(run_dir / warm, scenario), episode(run_dir / "grpo", scenario)
        row = {"task": {"split": SPLIT, "index": i, "difficulty": difficulty}, "before": before, "after": after}
        if (before["outcome"], before["return"]) != (after["outcome"], after["return"]):
            if not any(c["kind"] == "differ" for c in chosen):
                chosen.append({**row, "kind": "differ"})
        elif same is None and before["outcome"] in OUTCOMES:
            same = {**row, "kind": "same"}
        if len(chosen) == 1 and same:
            break
    return chosen + ([same] if same else [])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="an lm_learnability --out folder (with grpo/, and sft/ or sft_seed<k>/)")
    parser.add_argument("--difficulty", default="easy", choices=("easy", "medium", "hard"))
    parser.add_argument("--start", type=int, default=2000, help="the first held-out task searched")
    parser.add_argument("--search", type=int, default=40)
    parser.add_argument("--into", type=Path, help="add the examples to this lm_learnability results file")
    args = parser.parse_args(argv)
    warm = "sft"
    if args.into:  # warm starts side by side: the kept one's folder, as the results name it
        kept = f"sft_seed{json.loads(args.into.read_text())['sft']['seed']}"
        warm = kept if (args.run / kept).exists() else warm
    if not (args.run / warm).exists():
        parser.error(f"{args.run / warm} is not a warm start; with sft_seeds > 1 pass --into the run's results")
    rows = examples(args.run, args.difficulty, args.start, args.search, warm)
    if args.into:
        data = json.loads(args.into.read_text())
        data["examples"] = rows
        args.into.write_text(json.dumps(data, indent=1))
    print("\n".join(examples_markdown(rows)))


if __name__ == "__main__":
    main()
