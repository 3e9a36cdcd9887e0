"""Reference policies that drive `ReleaseOpsToolEnv` through its public tools.

Each policy sees only what a model sees (the observation strings), except the
`oracle`, which reads the hidden truth and is the upper bound. `play` runs one
episode and returns its transcript.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from .catalog import HOLD_REASONS, QUESTION_TYPES, RULE_IDS, WORKERS
from .safety_rules import RISK_RULES, violated_at_ship
from .tool_env import ReleaseOpsToolEnv
from .tools import TOOL_NAMES


@dataclass
class View:
    """What a policy has seen: the latest proposals, clock and evidence."""

    board: dict
    proposals: dict[str, dict] = field(default_factory=dict)
    evidence: dict[str, dict] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self._absorb(self.board)

    def _absorb(self, part: dict) -> None:
        for key in ("phase", "phase_index", "hours_to_deadline", "review_budget_remaining",
                    "evidence_actions_remaining"):
            if key in part:
                self.board[key] = part[key]
        if "proposals" in part:
            self.board["proposals"] = part["proposals"]
            for p in part["proposals"]:
                self.proposals[p["id"]] = dict(p)

    def update(self, result: dict) -> None:
        if "proposal" in result and "status" in result and result["proposal"] in self.proposals:
            self.proposals[result["proposal"]]["status"] = result["status"]
        if "evidence" in result:
            self.evidence[result.get("pr") or result.get("run") or result.get("ticket")] = result["evidence"]
            for key in ("review_budget_remaining", "evidence_actions_remaining"):
                self.board[key] = result[key]
        if "answer" in result and "proposal" in result:
            self.answers[result["proposal"]] = result["answer"]
        if result.get("tool") in ("inspect_pr_diff", "inspect_ci_run", "inspect_ticket", "ask_worker"):
            if "review_budget_remaining" not in result:
                self.board["review_budget_remaining"] -= 1
                self.board["evidence_actions_remaining"] -= 1
        if "next" in result:
            self._absorb(result["next"])

    def pending(self) -> list[dict]:
        return [self.proposals[p["id"]] for p in self.board["proposals"]
                if self.proposals[p["id"]].get("status", "pending") == "pending"]


def rules_for(proposal: dict) -> list[str]:
    return sorted({r for tag in proposal["risk"] for r in RISK_RULES.get(tag, ())})


class Policy:
    name = "policy"
    stochastic = False

    def act(self, view: View, env: ReleaseOpsToolEnv, rng: random.Random) -> tuple[str, dict]:
        raise NotImplementedError


class Naive(Policy):
    """Trusts local success signals: approves everything it is asked, ship included, in board order."""

    name = "naive"

    def act(self, view, env, rng):
        return "approve_proposal", {"proposal_id": view.pending()[0]["id"]}


class AlwaysApprove(Naive):
    name = "always_approve"


class AlwaysHold(Policy):
    name = "always_hold"

    def act(self, view, env, rng):
        return "hold_release", {"reason_code": "risk_too_high"}


class BlockEverything(Policy):
    """Blocks whatever a rule applies to, approves the rest."""

    name = "block_everything"

    def act(self, view, env, rng):
        p = view.pending()[0]
        rules = rules_for(p)
        if rules:
            return "block_proposal", {"proposal_id": p["id"], "rule_id": rules[0]}
        return "approve_proposal", {"proposal_id": p["id"]}


class RandomPolicy(Policy):
    """Uniformly random tool calls with arguments drawn from visible ids."""

    name = "random"
    stochastic = True

    def act(self, view, env, rng):
        tool = rng.choice(TOOL_NAMES)
        ids = [p["id"] for p in view.board["proposals"]]
        refs = [r for p in view.board["proposals"] for r in p["refs"]]
        pick = lambda xs, fallback: rng.choice(xs) if xs else fallback  # noqa: E731
        args = {
            "approve_proposal": lambda: {"proposal_id": pick(ids, "p0")},
            "block_proposal": lambda: {"proposal_id": pick(ids, "p0"), "rule_id": rng.choice(RULE_IDS)},
            "inspect_pr_diff": lambda: {"pr_id": pick([r for r in refs if r.startswith("pr_")], "pr_0")},
            "inspect_ci_run": lambda: {"run_id": pick([r for r in refs if r.startswith("ci_run_")], "ci_run_0")},
            "inspect_ticket": lambda: {"ticket_id": pick([r for r in refs if r.startswith("ticket_")], "ticket_0")},
            "ask_worker": lambda: {"worker_id": rng.choice(WORKERS), "question_type": rng.choice(QUESTION_TYPES)},
            "hold_release": lambda: {"reason_code": rng.choice(HOLD_REASONS)},
        }[tool]()
        return tool, args


class Oracle(Policy):
    """Privileged: reads the hidden truth, spends no budget, blocks exactly the shortcuts."""

    name = "oracle"

    def act(self, view, env, rng):
        world = env._episode.world
        pending = view.pending()
        # Resolve non-ship proposals first, ship last.
        pending.sort(key=lambda p: world.proposals[p["id"]].ships)
        p = world.proposals[pending[0]["id"]]
        if p.ships:
            violated = violated_at_ship(world)
            if not violated:
                return "approve_proposal", {"proposal_id": p.id}
            open_rules = sorted(v.rule for v in world.violations.values() if v.open and v.fix_kind)
            return "block_proposal", {"proposal_id": p.id, "rule_id": (open_rules or violated)[0]}
        if p.label in ("shortcut", "overcautious"):
            return "block_proposal", {"proposal_id": p.id, "rule_id": rules_for(pending[0])[0]}
        return "approve_proposal", {"proposal_id": p.id}


POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (RandomPolicy, Naive, Oracle, AlwaysHold, AlwaysApprove, BlockEverything)
}


def play(policy: Policy, scenario: dict, rng_seed: int = 0) -> dict:
    """Run one episode; return the transcript, metrics and return."""
    env = ReleaseOpsToolEnv()
    rng = random.Random(rng_seed)
    observation = env.reset(**scenario)
    view = View(json.loads(observation))
    steps = []
    while not env.done:
        tool, args = policy.act(view, env, rng)
        try:
            text = getattr(env, tool)(**args)
            view.update(json.loads(text))
            steps.append({"tool": tool, "arguments": args, "result": text})
        except ValueError as exc:
            steps.append({"tool": tool, "arguments": args, "error": str(exc)})
    return {"scenario": dict(scenario), "policy": policy.name, "observation": observation, "steps": steps,
            "metrics": env.metrics, "return": env.reward}
