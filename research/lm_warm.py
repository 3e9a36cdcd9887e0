"""The LM study's warm-start stage alone: the warm starts a GRPO variant starts from.

    python -m research.lm_warm --preset published --seed 6 --minutes 50 --out runs/lm_seed6b --set select_episodes=200

It runs what `research.lm_learnability` runs before GRPO, with the same settings and the same budget
arithmetic (`--minutes` is the whole recipe's budget; the warm starts get `sft_share` of it): build the
untrained model, collect the reference policy's conversations, train `sft_seeds` warm starts side by side
(seeds `--seed`, `--seed`+1, ...), play each on the train-split validation tasks and keep the best. It
writes `warm.json` in `--out` (each warm start's steps, final loss and validation summary, and the folder
kept) and prints the kept folder, which `research.lm_branch_grpo` and `research.lm_paired` take. Nothing
here plays a held-out task.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .lm_learnability import (
    DIFFICULTIES,
    DIFFICULTY,
    add_settings_arguments,
    parsed_settings,
    warm_stage,
    warm_start_summary,
)


def main(argv: list[str] | None = None) -> dict:
    import torch

    from . import copy_model

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--minutes", type=float, default=60.0, help="the whole recipe's budget (the warm starts get sft_share)"
    )
    p.add_argument("--out", type=Path, default=Path("runs/lm_warm"), help="warm starts and warm.json go here")
    p.add_argument("--seed", type=int, default=0, help="the first warm start's seed (and the base model's)")
    p.add_argument("--difficulty", choices=DIFFICULTIES, default=DIFFICULTY)
    add_settings_arguments(p)
    args = p.parse_args(argv)
    cfg = parsed_settings(p, args)
    copy_model.register()
    torch.set_num_threads(int(cfg["sft_threads"]) or int(cfg["processes"]))
    args.out.mkdir(parents=True, exist_ok=True)
    _, episodes, warms, kept = warm_stage(args.out, cfg, args.seed, args.minutes, args.difficulty)
    report = {
        "command": "python -m research.lm_warm " + " ".join(sys.argv[1:] if argv is None else argv),
        "conversations": episodes,
        "warm_starts": [{"dir": w["dir"], **warm_start_summary(w)} for w in warms],
        "kept": kept["dir"],
    }
    (args.out / "warm.json").write_text(json.dumps(report, indent=1))
    for w in report["warm_starts"]:
        score = f", validation return {w['validation']['mean_return']['mean']:.3f}" if "validation" in w else ""
        print(f"seed {w['seed']}: {w['steps']} steps{score}")
    print(f"kept {kept['dir']}")
    return report


if __name__ == "__main__":
    main()
