"""Warm-start episodes that show how to recover from a refused call.

A warm start cloned from clean planner episodes has never seen an error: after its
first refused call (most often a block citing a rule the proposal's risk tags do not
allow) it is off its data, and it closed the episode ("Done.") there, leaving the
release to miss its deadline (4 of the first 4 unfinished train-validation episodes
of one warm start). `Stumbling` wraps a policy so that some of its blocks are first
tried with a wrong rule; the engine refuses that call with its own message ("rule S1
does not apply to p2 (risk: payments); cite one of: S2") and the wrapped policy's
own call follows. The refused turn is kept in the conversation but never learned
from (`sft_warmup.encode` masks every assistant turn the environment refused), so
the warm start learns the recovery, not the mistake.
"""

from __future__ import annotations

import random

from releaseops_arena.policies import POLICIES, Policy, play
from releaseops_arena.policies.base import rules_for
from releaseops_arena.splits import task_scenario
from training.collect import conversation

RULES = ("S1", "S2", "S3")


class Stumbling(Policy):
    """`inner`'s calls, each block first tried with a rule it may not cite with probability `rate`."""

    def __init__(self, inner: Policy, rate: float, seed: int = 0):
        if not 0 <= rate <= 1:
            raise ValueError(f"rate must be in 0..1, not {rate!r}")
        self.inner, self.rate, self.stumble_rng = inner, rate, random.Random(seed)
        self.name = f"stumbling-{inner.name}"
        self.privileged = inner.privileged  # `play` hands a privileged policy the truth reader: pass it on
        self.pending: tuple[str, dict] | None = None

    def begin(self, observation: str) -> None:
        self.inner.rng = self.rng
        if self.privileged:
            self.inner.truth = self.truth
        self.inner.begin(observation)

    def observe(self, text: str) -> None:
        if self.pending is None:  # the refused call's error is ours, not the inner policy's
            self.inner.observe(text)

    def act(self, view):
        if self.pending is not None:
            call, self.pending = self.pending, None
            return call
        call = self.inner.act(view)
        if call and call[0] == "block_proposal" and self.stumble_rng.random() < self.rate:
            wrong = [r for r in RULES if r not in _allowed(view, call[1]["proposal_id"])]
            if wrong:
                self.pending = call
                return "block_proposal", {**call[1], "rule_id": self.stumble_rng.choice(wrong)}
        return call


def _allowed(view, proposal_id: str) -> list[str]:
    proposal = view.proposals.get(proposal_id)
    return rules_for(proposal) if proposal else list(RULES)


def stumbling_conversations(policy: str, split: str, n: int, difficulty: str, rate: float) -> list[list[dict]]:
    """The conversations (TRL's tool-loop format) of the safe ships among `n` episodes of `policy` on
    tasks 0..n-1 of `split`, with `Stumbling` blocks at `rate`."""
    out = []
    for i in range(n):
        run = play(Stumbling(POLICIES[policy](), rate, seed=i), task_scenario(split, i, difficulty), rng_seed=i * 7919)
        if run["metrics"]["outcome"] == "safe_ship":
            out.append(conversation(run))
    return out
