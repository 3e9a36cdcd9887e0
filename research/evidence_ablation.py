"""What the shared evidence reader's knowledge of the held-out artifacts is worth on the unseen family.

    python -m research.evidence_ablation --structured-checkpoint runs/structured_c2.pt -n 2000 \\
        --into research/results/learnability.json      # then: python -m research.learnability --rerender ...

Every policy reads an inspected artifact through `releaseops_arena.policies.base.evidence_violation`,
which is hand-written and knows every mechanism's artifact, the held-out ones
included: a P1 closed while errors continue (`error_rate_since_fix`) and
payment snapshots rewritten (`payment_assertions_weakened`) are fields only
held-out mechanisms write. This plays the rule, `evidence_first`, the planner
and a structured checkpoint on the unseen family twice: with that reader, and
with one that reads those two fields as absent (what a reader written from the
train split alone would make of them). A waived deploy check shows in the
deploy run a train mechanism also writes, so it is read in both.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
from contextlib import contextmanager
from pathlib import Path

from releaseops_arena.policies import base as policy
from releaseops_arena.policies import baselines
from releaseops_arena.policies import trained as trained_policy
from research import exploits
from training.evaluate import evaluate

HELD_OUT_FIELDS = ("error_rate_since_fix", "payment_assertions_weakened")
READERS = ("every artifact", "train artifacts")
_SHIPPED = policy.evidence_violation
# Every module that imported the reader by name holds its own reference to it.
_HOLDERS = (policy, trained_policy, baselines, exploits)


def train_artifacts_only(evidence: dict) -> str | None:
    """The shipped reading of an artifact with the fields only held-out mechanisms write left out."""
    return _SHIPPED({k: v for k, v in evidence.items() if k not in HELD_OUT_FIELDS})


@contextmanager
def evidence_reader(name: str):
    """Every policy in this process reads evidence with reader `name` (READERS) inside the block."""
    if name not in READERS:
        raise ValueError(f"unknown evidence reader {name!r}; valid: {', '.join(READERS)}")
    reader = _SHIPPED if name == READERS[0] else train_artifacts_only
    try:
        for module in _HOLDERS:
            module.evidence_violation = reader
        yield
    finally:
        for module in _HOLDERS:
            module.evidence_violation = _SHIPPED


def evidence_ablation(checkpoint: Path, n: int, workers: int = 1) -> dict:
    """{unseen_family/<difficulty>: {policy: {reader: {safe_ship, mean_return}}}} on the first `n` tasks.
    The reader is swapped in one process's modules only, so each row is played whole in one process:
    `workers` processes play rows side by side (the same numbers as one)."""
    policies = {
        "rule": "rule",
        "evidence_first": "evidence_first",
        "planner": "planner",
        "trained": f"structured:{checkpoint}",
    }
    jobs = [(name, difficulty, n) for difficulty in ("medium", "hard") for name in policies.values()]
    if workers > 1:
        with mp.get_context("spawn").Pool(workers) as pool:  # spawn: torch may be loaded here (see evaluate)
            rows = pool.starmap(_registered_row, jobs, chunksize=1)
    else:
        rows = [_registered_row(*job) for job in jobs]
    rows = iter(rows)
    return {
        f"unseen_family/{difficulty}": {label: next(rows) for label in policies} for difficulty in ("medium", "hard")
    }


def _registered_row(policy_name: str, difficulty: str, n: int) -> dict:
    from .structured_policy import register

    register()  # a spawned process knows `structured:` checkpoints once registered
    return ablation_row(policy_name, difficulty, n)


def ablation_row(policy_name: str, difficulty: str, n: int) -> dict:
    """One policy on the first `n` unseen-family tasks at `difficulty`: {reader: {safe_ship, mean_return}}."""
    row = {}
    for reader in READERS:
        with evidence_reader(reader):
            m = evaluate(policy_name, "unseen_family", n, difficulty, workers=1, progress=False)["metrics"]
        row[reader] = {"safe_ship": m["safe_ship"], "mean_return": m["mean_return"]}
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--structured-checkpoint", type=Path, required=True)
    parser.add_argument("-n", type=int, default=1000, help="unseen-family tasks per difficulty")
    parser.add_argument("--workers", type=int, default=1, help="processes, each playing whole rows")
    parser.add_argument(
        "--into",
        type=Path,
        default=None,
        help="add the result to this learnability.json's structured part (the report renders it)",
    )
    args = parser.parse_args(argv)
    if not args.structured_checkpoint.is_file():
        parser.error(f"no checkpoint at {args.structured_checkpoint}")
    result = {
        "n": args.n,
        "checkpoint": str(args.structured_checkpoint),
        "slices": evidence_ablation(args.structured_checkpoint, args.n, args.workers),
    }
    if args.into is not None:
        data = json.loads(args.into.read_text())
        data.setdefault("structured", {})["evidence_ablation"] = result
        args.into.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
