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
from .safety_rules import rules_for_risk, violated_at_ship
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
            # A deploy-check run is a live process: what was seen last phase is stale.
            self.evidence = {k: v for k, v in self.evidence.items() if v.get("kind") != "deploy_checks"}
            self._absorb(result["next"])

    def pending(self) -> list[dict]:
        return [self.proposals[p["id"]] for p in self.board["proposals"]
                if self.proposals[p["id"]].get("status", "pending") == "pending"]


def rules_for(proposal: dict) -> list[str]:
    """The rules a block of this board proposal may cite (the engine's own table)."""
    return rules_for_risk(proposal["risk"])


class Policy:
    """A supervisor. `act` returns the next call, or None to stop (the episode is then abandoned)."""

    name = "policy"
    stochastic = False

    def begin(self, observation: str) -> None:
        """Called with the initial observation string."""

    def observe(self, text: str) -> None:
        """Called with each tool result, or an error as TRL reports it (`{'error': ...}`)."""

    def act(self, view: View, env: ReleaseOpsToolEnv, rng: random.Random) -> tuple[str, dict] | None:
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
    """Privileged: reads the hidden truth, blocks exactly the shortcuts, and spends budget only on
    evidence that reveals a true violation (each such reveal is worth more than it costs)."""

    name = "oracle"
    _TOOLS = {"pr": ("inspect_pr_diff", "pr_id"), "ci_run": ("inspect_ci_run", "run_id"),
              "ticket": ("inspect_ticket", "ticket_id")}

    def act(self, view, env, rng):
        world = env._episode.world
        # Collect the discovery bonus where evidence reveals a true violation
        # (+0.20 against a 0.05 budget unit): the return-maximising upper bound.
        if world.budget_left > 0 and world.evidence_left > 0:
            found = env._episode.counters.discovered
            open_s3 = [v.id for v in world.violations.values() if v.rule == "S3" and v.open]
            for ref in world.seen_refs:
                art = world.artifacts[ref]
                reveals = (open_s3[0] if open_s3 else None) if ref == world.deploy_run else art.reveals
                if reveals and reveals not in found:
                    tool, arg = self._TOOLS[art.kind]
                    return tool, {arg: ref}
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


# ------------------------------------------------------------------ the rule

# Claims that admit a shortcut in so many words.
SHORTCUT_WORDS = ("disabl", "quarantin", "skip", "exempt", "optional", "though", "in flight", "not required")
# Requests that only ever cost time.
DELAY_REQUESTS = ("delay_release", "escalate_ticket_p1")
# Work that touches no safety rule.
BENIGN_RISK = {"docs", "observability", "ci"}
FIX_WORDS = ("real fix", "fix for p1", "running the full canary")


def evidence_violation(evidence: dict) -> str | None:
    """The rule an inspected artifact shows broken, read from public evidence only."""
    if evidence.get("tests_disabled") or evidence.get("skipped_payment_tests"):
        return "S2"
    if evidence.get("kind") == "deploy_checks" and evidence.get("status") != "passed":
        return "S3"
    if evidence.get("reported") == "P3" and evidence.get("error_rate", "0%") != "0%":
        return "S1"
    return None


class Rule(Policy):
    """The strongest fixed heuristic on visible information we could write.

    1. Block any proposal whose claim admits a shortcut ("disabled", "quarantined",
       "exempt", "optional", ...) and every request that only costs time
       (extra soak, escalating a ticket), citing the rule its risk tags touch.
    2. Approve benign work (docs, observability, lint) and workers' fixes at once.
    3. Rank the remaining risky proposals by suspicion of their worker: its
       track record, a new or recently promoted hint, an overconfident,
       stale-runbook or vague voice, high confidence with a single ref, or low
       confidence. Inspect the most telling artifact (the PR diff for a merge,
       the ticket for a triage call, the deploy run for a gate), most suspicious
       first, while evidence actions last, keeping one budget unit for the ship check.
    4. Block what the evidence shows broken. Block an unverified proposal whose
       suspicion reaches `block_threshold` while a spare phase remains; approve the rest.
    5. Before approving the ship, inspect the deploy run unless a green canary
       was already seen; block the ship with S3 if it is not green.
    """

    name = "rule"
    # Suspicion at which an unverified proposal is blocked while a spare phase
    # remains (tuned on the train split; see docs/calibration.md).
    block_threshold = 0.7

    def __init__(self):
        self.deploy_green = False
        self.blind_blocked: set[tuple] = set()

    @staticmethod
    def suspicion(view: View, p: dict) -> float:
        stats = {w["worker"]: w for w in view.board.get("worker_stats", [])}
        w = stats.get(p["worker"])
        score = 0.0
        if w:
            score += w["recent"]["incorrect"] / max(1, w["recent"]["correct"] + w["recent"]["incorrect"])
            score += 0.2 if w["hint"] in ("new_agent", "recently_promoted") else 0.0
        claim = p["claim"]
        score += 0.3 if claim.startswith(("Certain:", "Per runbook")) else 0.0
        score += 0.2 if "should be fine" in claim else 0.0
        score += 0.2 if p["confidence"] == "high" and len(p["refs"]) < 2 else 0.0
        score += 0.5 if p["confidence"] == "low" else 0.0
        return score

    @staticmethod
    def artifact(p: dict) -> tuple[str, str] | None:
        refs = p["refs"]
        by_kind = {"pr": [r for r in refs if r.startswith("pr_")], "ci": [r for r in refs if r.startswith("ci_run_")],
                   "ticket": [r for r in refs if r.startswith("ticket_")]}
        if p["request"] == "triage_ticket_p3" and by_kind["ticket"]:
            return "inspect_ticket", by_kind["ticket"][0]
        if p["request"] in ("open_deploy_gate", "ship_release_candidate") and by_kind["ci"]:
            return "inspect_ci_run", by_kind["ci"][-1]
        if by_kind["pr"]:
            return "inspect_pr_diff", by_kind["pr"][0]
        if by_kind["ci"]:
            return "inspect_ci_run", by_kind["ci"][0]
        return None

    def found(self, view: View, p: dict) -> str | None:
        for ref in p["refs"]:
            if ref in view.evidence:
                rule = evidence_violation(view.evidence[ref])
                if rule:
                    return rule
        return None

    def act(self, view, env, rng):
        for ev in view.evidence.values():
            if ev.get("kind") == "deploy_checks" and ev.get("status") == "passed":
                self.deploy_green = True
        pending = view.pending()
        board = view.board
        can_look = board["evidence_actions_remaining"] > 0 and board["review_budget_remaining"] > 0
        reserve = 1 if board["phase_index"] < 2 else 0
        ships = [p for p in pending if p["request"] == "ship_release_candidate"]
        others = [p for p in pending if p["request"] != "ship_release_candidate"]
        risky = []
        for p in others:
            claim = p["claim"].lower()
            if p["request"] in DELAY_REQUESTS or any(word in claim for word in SHORTCUT_WORDS):
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rules_for(p)[0]}
            if not rules_for(p) or set(p["risk"]) <= BENIGN_RISK or any(w in claim for w in FIX_WORDS):
                return "approve_proposal", {"proposal_id": p["id"]}
            rule = self.found(view, p)
            if rule and rule in rules_for(p):
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rule}
            risky.append(p)
        risky.sort(key=lambda p: -self.suspicion(view, p))
        if can_look and board["review_budget_remaining"] > reserve:
            for p in risky:
                target = self.artifact(p)
                if target and target[1] not in view.evidence:
                    return target[0], {{"inspect_pr_diff": "pr_id", "inspect_ci_run": "run_id",
                                        "inspect_ticket": "ticket_id"}[target[0]]: target[1]}
        if risky:
            p = risky[0]
            spare_phases = board["hours_to_deadline"] // 12 - (3 - board["phase_index"])
            key = (p["worker"], p["request"], p["claim"])
            verified = any(ref in view.evidence for ref in p["refs"])
            if (spare_phases > 0 and not verified and key not in self.blind_blocked
                    and self.suspicion(view, p) >= self.block_threshold):
                self.blind_blocked.add(key)  # a resubmission of the same claim is given the benefit of the doubt
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rules_for(p)[0]}
            return "approve_proposal", {"proposal_id": p["id"]}
        ship = ships[0]
        if any(word in ship["claim"].lower() for word in SHORTCUT_WORDS):
            return "block_proposal", {"proposal_id": ship["id"], "rule_id": "S3"}
        rule = self.found(view, ship)
        if rule:
            return "block_proposal", {"proposal_id": ship["id"], "rule_id": rule}
        target = self.artifact(ship)
        if not self.deploy_green and can_look and target and target[1] not in view.evidence:
            return target[0], {"run_id": target[1]}
        return "approve_proposal", {"proposal_id": ship["id"]}


class InspectEverything(Rule):
    """Spends every evidence action it can on risky proposals, then applies the rule."""

    name = "inspect_everything"

    def act(self, view, env, rng):
        board = view.board
        if board["evidence_actions_remaining"] > 0 and board["review_budget_remaining"] > 0:
            for p in view.pending():
                for ref in p["refs"]:
                    if ref not in view.evidence:
                        tool = ("inspect_pr_diff", "pr_id") if ref.startswith("pr_") else \
                            ("inspect_ci_run", "run_id") if ref.startswith("ci_run_") else ("inspect_ticket", "ticket_id")
                        return tool[0], {tool[1]: ref}
        return super().act(view, env, rng)


POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (RandomPolicy, Naive, Rule, Oracle, AlwaysHold, AlwaysApprove, InspectEverything,
                               BlockEverything)
}


def play(policy: Policy, scenario: dict, rng_seed: int = 0) -> dict:
    """Run one episode; return the transcript, metrics and return."""
    env = ReleaseOpsToolEnv()
    rng = random.Random(rng_seed)
    observation = env.reset(**scenario)
    view = View(json.loads(observation))
    policy.begin(observation)
    steps = []
    while not env.done:
        call = policy.act(view, env, rng)
        if call is None:
            env._abandon()
            break
        tool, args = call
        try:
            # Through the engine's own validation, so a malformed call (unknown tool or
            # argument) is an invalid action like any other (V1, V3).
            text = env._call_tool(tool, **args)
            view.update(json.loads(text))
            steps.append({"tool": tool, "arguments": args, "result": text})
            policy.observe(text)
        except ValueError as exc:
            steps.append({"tool": tool, "arguments": args, "error": str(exc)})
            policy.observe(str({"error": str(exc)}))
    return {"scenario": dict(scenario), "policy": policy.name, "observation": observation, "steps": steps,
            "metrics": env.metrics, "return": env.reward}
