"""Dataset rows for GRPO: `prompt, split, index, difficulty, benchmark_version, prompt_version`.

    python -m training.make_dataset --out data/ --train 512 --eval 128

`prompt` is chat-format messages: the task brief (`releaseops_arena.brief`) as the
system message, then a user turn ending in a newline, to which TRL appends the
reset's board (so the board starts on its own line). The other columns name a task of the Task
API (`releaseops_arena.splits.ReleaseTasks`), which `ReleaseOpsToolEnv.reset(**row)`
and a server's reset both take. A row names no family, mix or seed: the task
fixes them. `benchmark_version` (`catalog.BENCHMARK_VERSION`) names the version of
the world the rows were made for, `prompt_version` (`brief.PROMPT_VERSION`) the
brief's wording; a reset ignores both. Splits use disjoint seed
ranges, and the held-out family and mix never appear in `train`. Saved as
parquet; nothing is pushed anywhere.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from datasets import Dataset

from releaseops_arena.brief import PROMPT_VERSION, prompt_messages
from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.splits import EVALUATION_SPLITS, SECRET_ENV, ReleaseTasks, task_token

# The versions: so that datasets (and what is trained on them) of different worlds or briefs are never mixed.
COLUMNS = ["prompt", "split", "index", "difficulty", "benchmark_version", "prompt_version"]


def rows(split: str, n: int, difficulty: str | None = None) -> list[dict]:
    """With the operator's secret in the environment, evaluation rows carry their task tokens
    (a server with that secret refuses an evaluation task without one) and the levels the secret
    draws for them."""
    secret = os.environ.get(SECRET_ENV, "") if split in EVALUATION_SPLITS else ""
    tasks = ReleaseTasks(secret=secret)
    out = []
    for i in range(n):
        level = tasks.scenario(split, i, difficulty)["difficulty"]
        row = {
            "prompt": prompt_messages(),
            "split": split,
            "index": i,
            "difficulty": level,
            "benchmark_version": BENCHMARK_VERSION,
            "prompt_version": PROMPT_VERSION,
        }
        if secret:
            row["token"] = task_token(secret, split, i, level)
        out.append(row)
    return out


def build(split: str, n: int, difficulty: str | None = None) -> Dataset:
    """A deterministic `datasets.Dataset` for one split."""
    data = rows(split, n, difficulty)
    return Dataset.from_list(data).select_columns(COLUMNS + (["token"] if "token" in data[0] else []))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data"))
    parser.add_argument("--train", type=int, default=512, help="rows in the train split")
    parser.add_argument("--eval", type=int, default=128, help="rows in each evaluation split")
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard"], default=None)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = {"train": args.train, "heldout_seeds": args.eval, "unseen_family": args.eval, "unseen_mix": args.eval}
    for split, n in sizes.items():
        path = args.out / f"{split}.parquet"
        build(split, n, args.difficulty).to_parquet(str(path))
        print(f"{path}: {n} rows")


if __name__ == "__main__":
    main()
