"""Choose a finished GRPO run's checkpoint on validation, as the LM study does with `grpo_save_steps`.

    python -m research.lm_select runs/lm_seed4/grpo --episodes 200

A GRPO run of the study's copy model saved with `--save-steps N` (by `research.pointer_grpo` or by the
study itself) leaves a `checkpoint-<step>/` every N steps beside its final model. Each one the run
saved (up to the Trainer's `global_step` in `run.json`; older folders are ignored) plays the same
train-split validation tasks greedily, never the held-out ones, and the best mean return is kept, the
earliest step on a tie. This is the study's own selection (`grpo_checkpoints`, `pick_grpo_step`,
`evaluation`), for a run trained by hand or one that stopped before it chose. It prints each step's
return and valid calls, then the folder kept, which `research.lm_paired` can play against the warm
start on held-out tasks. `--out` keeps the selection as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .lm_learnability import DIFFICULTIES, DIFFICULTY, evaluation, grpo_checkpoints, pick_grpo_step
from .lm_report import valid_calls
from .lm_settings import SETTINGS


def select(grpo_dir: Path, episodes: int, start: int, workers: int, difficulty: str) -> dict:
    """{"selection": [{"step", "checkpoint", "validation": SUMMARY}], "kept_step", "kept"} for one GRPO run."""
    run = grpo_dir / "run.json"
    if not run.is_file():
        raise FileNotFoundError(f"{run}: not a finished GRPO run (the GRPO trainer writes run.json when it ends)")
    steps = json.loads(run.read_text())["global_step"]
    selection = [
        {
            "step": step,
            "checkpoint": str(path),
            "validation": evaluation(
                path, episodes, workers=workers, start=start, split="train", difficulty=difficulty
            ),
        }
        for step, path in grpo_checkpoints(grpo_dir, steps)
    ]
    kept = pick_grpo_step(selection)
    return {
        "validation_tasks": {"split": "train", "difficulty": difficulty, "start": start, "n": episodes},
        "selection": selection,
        "kept_step": kept,
        "kept": next(s["checkpoint"] for s in selection if s["step"] == kept),
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("grpo_dir", type=Path, help="a GRPO output folder (its run.json and checkpoint-<step>/ folders)")
    p.add_argument("--episodes", type=int, default=SETTINGS["select_episodes"], help="validation tasks")
    p.add_argument(
        "--start", type=int, default=SETTINGS["select_start"], help="first train-split validation task (the study's)"
    )
    p.add_argument("--difficulty", choices=DIFFICULTIES, default=DIFFICULTY)
    p.add_argument("--workers", type=int, default=2, help="processes, one torch thread each")
    p.add_argument("--out", type=Path, default=None, help="write the selection here as JSON")
    args = p.parse_args(argv)
    if args.episodes < 1:
        p.error(f"--episodes {args.episodes}: at least 1 validation task")
    try:
        result = select(args.grpo_dir, args.episodes, args.start, args.workers, args.difficulty)
    except FileNotFoundError as e:
        p.error(str(e))
    for s in result["selection"]:
        m = s["validation"]
        lo, hi = m["mean_return"]["ci95"]
        print(f"step {s['step']}: mean return {m['mean_return']['mean']:.3f} [{lo:.3f}, {hi:.3f}], {valid_calls(m)}")
    print(f"kept step {result['kept_step']}: {result['kept']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
