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

A warm start trained on wrong-rule stumbles alone still fails after the other
refusals it makes: an inspection with the tool of another artifact kind, or an
argument the tool does not take (`research/lm_recovery.py` finds them). With
`call_rate`, that share of the approvals and inspections is first tried that way:
an inspection with another inspect tool (the engine: "pr_445 is a pr, not a
ci_run; ...") or under the argument name `proposal_id`, an approval with a
`rule_id` it does not take ("unexpected argument 'rule_id'; usage: ...").
Measured, that made the warm start worse (call_rate 0.2: invalid calls 4.3% ->
10.5% on held-out tasks; docs/learnability.md's variants table). The published
recipe keeps call_rate 0.
"""

from __future__ import annotations

import random

from releaseops_arena.catalog import ARTIFACT_KINDS
from releaseops_arena.policies import POLICIES, Policy, play
from releaseops_arena.policies.base import rules_for
from releaseops_arena.splits import task_scenario
from training.collect import conversation

RULES = ("S1", "S2", "S3")
# The inspect tools and the argument each takes: a stumble swaps one for another.
INSPECT = {a.tool: a.argument for a in ARTIFACT_KINDS}


class Stumbling(Policy):
    """`inner`'s calls, each block first tried with a rule it may not cite with probability `rate`, and each
    approval or inspection first tried with a wrong tool or argument with probability `call_rate`."""

    def __init__(self, inner: Policy, rate: float, seed: int = 0, call_rate: float = 0.0):
        for name, value in (("rate", rate), ("call_rate", call_rate)):
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be in 0..1, not {value!r}")
        self.inner, self.rate, self.call_rate = inner, rate, call_rate
        self.stumble_rng = random.Random(seed)
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
        # Drawn only when call_rate is set: the wrong-rule-only episodes stay the ones they were.
        elif call and self.call_rate and call[0] in (*INSPECT, "approve_proposal"):
            if self.stumble_rng.random() < self.call_rate:
                self.pending = call
                return self._miscalled(call)
        return call

    def _miscalled(self, call: tuple[str, dict]) -> tuple[str, dict]:
        """`call` with a tool or an argument the engine refuses."""
        tool, args = call
        if tool == "approve_proposal":
            return tool, {**args, "rule_id": self.stumble_rng.choice(RULES)}
        (value,) = args.values()
        if self.stumble_rng.random() < 0.5:
            other = self.stumble_rng.choice([t for t in INSPECT if t != tool])
            return other, {INSPECT[other]: value}
        return tool, {"proposal_id": value}


def _allowed(view, proposal_id: str) -> list[str]:
    proposal = view.proposals.get(proposal_id)
    return rules_for(proposal) if proposal else list(RULES)


def stumbling_conversations(
    policy: str, split: str, n: int, difficulty: str, rate: float, call_rate: float = 0.0
) -> list[list[dict]]:
    """The conversations (TRL's tool-loop format) of the safe ships among `n` episodes of `policy` on
    tasks 0..n-1 of `split`, with `Stumbling` blocks at `rate` and approvals and inspections at `call_rate`."""
    out = []
    for i in range(n):
        stumbling = Stumbling(POLICIES[policy](), rate, seed=i, call_rate=call_rate)
        run = play(stumbling, task_scenario(split, i, difficulty), rng_seed=i * 7919)
        if run["metrics"]["outcome"] == "safe_ship":
            out.append(conversation(run))
    return out
