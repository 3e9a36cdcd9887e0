"""Can sampling recover where the greedy warm start fails? The exploration bound on the LM study's GRPO.

    python -m research.lm_recovery runs/lm_both/sft_seed1 -n 100 --samples 8 --temperature 1.0

GRPO learns only from differences within a group of sampled rollouts: a task whose every rollout
fails teaches "fail less expensively", never "finish". This probe plays the checkpoint greedily on
train-split validation tasks (easy, from task 100000, the selection's tasks, never the held-out
ones), takes the episodes that do not end in a safe ship, and from each one's first refused call
(and from the call after it) samples `--samples` continuations at `--temperature`, the earlier calls
greedy as before. It prints, per task and start, the outcomes and returns the continuations reach,
and how many finished the release.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from releaseops_arena.catalog import OUTCOMES
from releaseops_arena.policies import play
from releaseops_arena.splits import task_scenario
from research import copy_model
from training.llm_policy import LLMPolicy

SHIPPED = tuple(o for o in OUTCOMES if o != "missed_deadline")  # the release ended by a ship decision
START = 100_000  # the warm-start selection's validation tasks (research.lm_settings select_start)


class ResampledPolicy(LLMPolicy):
    """Greedy until the episode has made `greedy_calls` calls, sampled at `temperature` from the turn after.
    Calls, not model turns, are counted (a result is observed per call), so the switch lands on the call
    index `first_refusal` gives when the model makes one call a turn, as the warm start's episodes teach it;
    a refusal in the middle of a several-call turn is resampled from the next turn."""

    def __init__(self, checkpoint: str, temperature: float, greedy_calls: int = 10**9):
        super().__init__(checkpoint)
        self.sample_temperature, self.greedy_calls = temperature, greedy_calls

    def begin(self, observation: str) -> None:
        super().begin(observation)
        self.temperature, self.stochastic, self.calls = 0.0, False, 0

    def observe(self, text: str) -> None:
        super().observe(text)
        self.calls += 1

    def _generate(self) -> dict:
        if self.calls >= self.greedy_calls:
            self.temperature, self.stochastic = self.sample_temperature, True
        return super()._generate()


def first_refusal(run: dict) -> int | None:
    """The index of an episode's first refused call, or None."""
    return next((i for i, step in enumerate(run["steps"]) if step.get("error")), None)


def probe(
    checkpoint: str,
    n: int,
    samples: int,
    temperature: float,
    start: int = START,
    difficulty: str = "easy",
    seed: int = 0,
) -> dict:
    """The greedy failures among train tasks `start`..`start + n - 1` and their sampled continuations:
    {"checkpoint", "start", "tasks": n, "samples", "temperature", "continuations", "finished", "prefix_drift",
     "failed": [{"task", "outcome", "return", "first_refusal", "from": {call: [[outcome, return, count]]}}]}.
    "finished": continuations that ship (safe or not: the release ended by a decision, not by its deadline);
    "prefix_drift": continuations whose greedy calls before the switch differ from the greedy episode's (the
    cache replays them; a near-tie could tip one), which should be 0."""
    import torch

    copy_model.register()
    torch.manual_seed(seed)
    policy = ResampledPolicy(checkpoint, temperature)
    failed, continuations, finished, drift = [], 0, 0, 0
    for task in range(start, start + n):
        scenario = task_scenario("train", task, difficulty)
        policy.greedy_calls = 10**9
        greedy = play(policy, scenario)
        if greedy["metrics"]["outcome"] == "safe_ship":
            continue
        first = first_refusal(greedy)
        row = {
            "task": task,
            "outcome": greedy["metrics"]["outcome"],
            "return": round(greedy["return"], 2),
            "first_refusal": first,
            "from": {},
        }
        for call in [] if first is None else [first, first + 1]:
            policy.greedy_calls = call
            ends = Counter()
            for _ in range(samples):
                run = play(policy, scenario)
                ends[(run["metrics"]["outcome"], round(run["return"], 2))] += 1
                finished += run["metrics"]["outcome"] in SHIPPED
                drift += run["steps"][:call] != greedy["steps"][:call]
                continuations += 1
            row["from"][call] = [[outcome, ret, count] for (outcome, ret), count in ends.most_common()]
        failed.append(row)
    return {
        "checkpoint": str(checkpoint),
        "start": start,
        "tasks": n,
        "samples": samples,
        "temperature": temperature,
        "continuations": continuations,
        "finished": finished,
        "prefix_drift": drift,
        "failed": failed,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "checkpoint", help="a copy-model checkpoint folder (the LM study's sft/, sft_seed<k>/ or grpo/)"
    )
    parser.add_argument("-n", type=int, default=100, help="train-split validation tasks played greedily")
    parser.add_argument("--samples", type=int, default=8, help="sampled continuations per failed task and start")
    parser.add_argument("--temperature", type=float, default=1.0, help="GRPO's sampling temperature")
    parser.add_argument("--start", type=int, default=START)
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard"], default="easy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(
        json.dumps(
            probe(args.checkpoint, args.n, args.samples, args.temperature, args.start, args.difficulty, args.seed),
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
