"""How fast the `hf:` policy plays a checkpoint: with its prompt-lookup drafts and without them.

    .venv/bin/python -m research.hf_decode --checkpoint runs/lm/grpo [-n 20] [--rounds 3] [--json out.json]

One torch thread. Each round plays the same `-n` train-split validation tasks
(easy, from 100,000) twice, drafting and not, in alternating order; per round the
seconds and forward passes per episode of each, and the ratio. The medians over
rounds are reported. The transcripts of the two must be identical (greedy
decoding: the drafts save forward passes, never change a token); the script
exits non-zero if they are not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from releaseops_arena.policies import play
from releaseops_arena.splits import task_scenario


def episodes(policy, tasks: list[int], draft: bool) -> tuple[list, float, float]:
    """(transcripts, seconds per episode, forward passes per episode) of `policy` on `tasks`."""
    lookup = type(policy)._draft.__get__(policy)
    policy._draft = lookup if draft else (lambda *a, **k: [])
    forward, calls = policy.model.forward, [0]

    def counting(*args, **kwargs):
        calls[0] += 1
        return forward(*args, **kwargs)

    policy.model.forward = counting
    start = time.perf_counter()
    try:
        runs = [play(policy, task_scenario("train", i, "easy")) for i in tasks]
    finally:
        policy.model.forward = forward
    seconds = time.perf_counter() - start
    return (
        [[(s["tool"], s["arguments"]) for s in r["steps"]] for r in runs],
        seconds / len(tasks),
        calls[0] / len(tasks),
    )


def main(argv: list[str] | None = None) -> None:
    from training.llm_policy import LLMPolicy

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("-n", type=int, default=20, help="episodes per round and mode")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    policy = LLMPolicy(args.checkpoint)
    tasks = list(range(100_000, 100_000 + args.n))
    episodes(policy, tasks[:1], True)  # load and warm the cache of the shared prefix
    rounds = []
    for r in range(args.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        got = {draft: episodes(policy, tasks, draft) for draft in order}
        if got[True][0] != got[False][0]:
            sys.exit(f"round {r}: the drafted transcripts differ from the plain ones")
        rounds.append(
            {
                "draft_s": got[True][1],
                "plain_s": got[False][1],
                "draft_forwards": got[True][2],
                "plain_forwards": got[False][2],
                "speedup": got[False][1] / got[True][1],
            }
        )
    med = {k: round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]}
    result = {
        "checkpoint": args.checkpoint,
        "episodes": args.n,
        "rounds": rounds,
        "median": med,
        "identical_transcripts": True,
    }
    print(json.dumps(med))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
