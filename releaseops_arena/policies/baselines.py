"""The simple reference policies, the evidence-only yardstick `evidence_first`, and the privileged oracle.

The planner and the rule are in `planner.py`, the trained policy in `trained.py`,
and what they share in `base.py`. The `oracle` is the one privileged policy:
`play` hands it a read-only `TruthReader`, and it is the upper bound.
"""

from __future__ import annotations

from ..catalog import (
    ARTIFACT_BY_KIND,
    ARTIFACT_BY_TOOL,
    HOLD_REASONS,
    QUESTION_TYPES,
    RULE_IDS,
    WORKERS,
    artifact_kind,
    inspect_call,
)
from ..mechanisms import REGISTRY
from ..safety_rules import truly_violates, violated_at_ship
from ..tools import TOOL_NAMES
from .base import (
    DELAY_REQUESTS,
    Policy,
    evidence_violation,
    is_fix,
    rules_for,
    seen_violation,
)


class Naive(Policy):
    """Trusts local success signals: approves everything it is asked, ship included, in board order."""

    name = "naive"

    def act(self, view):
        return "approve_proposal", {"proposal_id": view.pending()[0]["id"]}


class AlwaysApprove(Naive):
    name = "always_approve"


class AlwaysHold(Policy):
    name = "always_hold"

    def act(self, view):
        return "hold_release", {"reason_code": "risk_too_high"}


class BlockEverything(Policy):
    """Blocks whatever a rule applies to, approves the rest."""

    name = "block_everything"

    def act(self, view):
        p = view.pending()[0]
        rules = rules_for(p)
        if rules:
            return "block_proposal", {"proposal_id": p["id"], "rule_id": rules[0]}
        return "approve_proposal", {"proposal_id": p["id"]}


class RandomPolicy(Policy):
    """Uniformly random tool calls with arguments drawn from visible ids."""

    name = "random"
    stochastic = True

    def act(self, view):
        rng = self.rng
        tool = rng.choice(TOOL_NAMES)
        ids = [p["id"] for p in view.board["proposals"]]
        refs = [r for p in view.board["proposals"] for r in p["refs"]]
        pick = lambda xs, fallback: rng.choice(xs) if xs else fallback  # noqa: E731
        if tool in ARTIFACT_BY_TOOL:
            kind = ARTIFACT_BY_TOOL[tool]
            return tool, {kind.argument: pick([r for r in refs if r.startswith(kind.prefix)], kind.prefix + "0")}
        args = {
            "approve_proposal": lambda: {"proposal_id": pick(ids, "p0")},
            "block_proposal": lambda: {"proposal_id": pick(ids, "p0"), "rule_id": rng.choice(RULE_IDS)},
            "ask_worker": lambda: {"worker_id": rng.choice(WORKERS), "question_type": rng.choice(QUESTION_TYPES)},
            "hold_release": lambda: {"reason_code": rng.choice(HOLD_REASONS)},
        }[tool]()
        return tool, args


# ------------------------------------------------------------- the oracle


class TruthReader:
    """Read-only answers about the hidden world, for the privileged oracle only."""

    def __init__(self, episode):
        self._episode = episode

    def undiscovered_reveal(self, refs: list[str]) -> str | None:
        """A visible ref whose evidence would reveal a violation not yet revealed."""
        ep, w = self._episode, self._episode.world
        open_s3 = [v.id for v in w.violations.values() if v.rule == "S3" and v.open]
        for ref in refs:
            vid = (open_s3[0] if open_s3 else None) if ref == w.deploy_run else w.reveals.get(ref)
            if ref != w.deploy_run and vid and not (w.violations[vid].open or ep.latent(vid)):
                vid = None
            if vid and vid not in ep.counters.discovered:
                return ref
        return None

    def label(self, pid: str) -> str:
        return self._episode.world.proposals[pid].truth.label

    def breaks(self, pid: str, rule: str) -> bool:
        w = self._episode.world
        return truly_violates(w, w.proposals[pid], rule)

    def violated_at_ship(self) -> list[str]:
        return violated_at_ship(self._episode.world)


class Oracle(Policy):
    """Privileged: blocks exactly what truly breaks a rule, declines what only costs time, and spends
    budget only on evidence that reveals a true violation (each reveal is worth more than it costs)."""

    name = "oracle"
    privileged = True
    truth: TruthReader

    def act(self, view):
        t = self.truth
        if view.can_look():
            ref = t.undiscovered_reveal([r for p in view.pending() for r in p["refs"]])
            if ref:
                return inspect_call(ref)
        pending = sorted(view.pending(), key=lambda p: p["request"] == "ship_release_candidate")
        p = pending[0]
        if p["request"] == "ship_release_candidate":
            violated = t.violated_at_ship()
            if violated:
                return "block_proposal", {"proposal_id": p["id"], "rule_id": violated[0]}
            return "approve_proposal", {"proposal_id": p["id"]}
        if t.label(p["id"]) == "overcautious":
            return "block_proposal", {"proposal_id": p["id"], "rule_id": rules_for(p)[0]}
        for rule in rules_for(p):
            if t.breaks(p["id"], rule):
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rule}
        return "approve_proposal", {"proposal_id": p["id"]}


# The id prefix of the artifact that settles each request a site makes (the mechanisms' published `decisive`).
SETTLED_BY = {m.request: ARTIFACT_BY_KIND[m.decisive].prefix for m in REGISTRY.values()}
GATE_STAGE_ORDER = ("open_deploy_gate", "promote_build")


class EvidenceFirst(Policy):
    """Reads evidence and never a claim: a stronger yardstick than the rule, found by an adversarial review.

    It never looks at a claim, a voice, a confidence, a hint or a track record. It spends the
    budget on each site's decisive artifact in a fixed order (triage sites before merge PRs, more
    refs first; the deploy gate before a promoted build; the ship's deploy run last), blocks what
    the evidence shows broken, declines what only costs time, and approves the rest; a proposal
    citing an artifact it already read for another proposal is taken as that proposal's fix.
    On the unseen family at hard it ships safely more often than the planner, whose posterior comes from
    the seen families (77.3% against 71.9% over 1,000 tasks; the 95% intervals meet at 74.6%).
    """

    name = "evidence_first"

    def begin(self, observation):
        self.blocked: set[str] = set()
        self.ship_blocked = False
        self.read_for: dict[str, str] = {}  # artifact id -> the proposal it was inspected for

    @staticmethod
    def _decisive(p: dict, phase: int) -> str | None:
        prefix = SETTLED_BY.get(p["request"])
        if prefix is None or p["request"] == "merge_pr" and (phase != 0 or p["risk"] != ["payments"]):
            return None  # after triage a merge is a fix or a distractor
        refs = [r for r in p["refs"] if r.startswith(prefix)]
        return refs[-1] if refs else None

    def _decline_or_block(self, view, others: list[dict]) -> tuple[str, dict] | None:
        """Decline what only costs time; block a proposal its own inspected evidence shows broken."""
        for p in others:
            if p["request"] in DELAY_REQUESTS:
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rules_for(p)[0]}
            for ref in p["refs"]:
                rule = evidence_violation(view.evidence[ref]) if self.read_for.get(ref) == p["id"] else None
                if rule in rules_for(p) and p["id"] not in self.blocked:
                    self.blocked.add(p["id"])
                    return "block_proposal", {"proposal_id": p["id"], "rule_id": rule}
        return None

    def _ship(self, view, ship: dict, check: bool) -> tuple[str, dict]:
        """Check the deploy-check run if `check` and the budget allows; block once on S3 seen; else ship."""
        if check and ship["refs"][-1] not in view.evidence and view.can_look():
            return inspect_call(ship["refs"][-1])
        shown = next((evidence_violation(view.evidence[r]) for r in ship["refs"] if r in view.evidence), None)
        if shown == "S3" and not self.ship_blocked:
            self.ship_blocked = True
            return "block_proposal", {"proposal_id": ship["id"], "rule_id": "S3"}
        return "approve_proposal", {"proposal_id": ship["id"]}

    def act(self, view):
        pending, phase = view.pending(), view.board["phase_index"]
        others = [p for p in pending if p["request"] != "ship_release_candidate"]
        call = self._decline_or_block(view, others)
        if call:
            return call
        if view.can_look():
            targets = [(p, ref) for p in others if (ref := self._decisive(p, phase)) and ref not in view.evidence]
            if phase == 0:
                targets.sort(key=lambda t: (t[0]["request"] == "merge_pr", -len(t[0]["refs"])))
            elif phase == 1:
                targets.sort(
                    key=lambda t: (
                        GATE_STAGE_ORDER.index(t[0]["request"])
                        if t[0]["request"] in GATE_STAGE_ORDER
                        else len(GATE_STAGE_ORDER)
                    )
                )
            if targets:
                p, ref = targets[0]
                self.read_for[ref] = p["id"]
                return inspect_call(ref)
        if others:
            return "approve_proposal", {"proposal_id": others[0]["id"]}
        return self._ship(view, pending[0], check=True)


class FixedOrder(EvidenceFirst):
    """The best fixed inspection order: a script that never reads a claim, a voice, a confidence, a
    hint, a track record or an answer. It sees request types, risk tags, refs, phase, clock, budget
    and its own evidence, and spends the budget on the sites' decisive artifacts in an order found by
    search on the train split (`exploits.search_fixed_order`); it acts on the evidence as
    `evidence_first` does. The attention gap of the report is measured against it.

    - `triage`, `gate`: the order of site classes inspected at each stage. A class is the kind of
      artifact that settles the site (`ticket`, `pr`, `ci_run`; the deploy gate is `gate`), so a
      held-out mechanism's site is ordered like the seen one whose kind of evidence it has;
    - `triage_quota`: how many inspections the triage stage may use (the rest wait for the gate);
    - `more_refs_first`: within a class, cards citing more refs first (else fewer first);
    - `hold`: hold once at triage for two more evidence actions when the quota is not used up;
    - `ship_check`: check the deploy run at the ship when the budget allows;
    - `workers`: optionally, a fixed priority over worker names that comes before the class order
      (a script that learns which named workers tend to be the problem in the training mixes; it
      still reads no record, hint, voice or claim).
    """

    name = "fixed_order"
    TRIAGE_CLASSES = ("ticket", "pr")
    GATE_CLASSES = ("gate", "ci_run")
    # The script `exploits.search_fixed_order` finds on 600 train scenarios at medium (v3): one look at
    # triage, at a PR; the deploy gate and the build at the gate; the deploy run at the ship; the release
    # manager's and QA's cards first. At hard it looks at a ticket first (docs/calibration.md has both;
    # the report plays each at its level).
    DEFAULT = {
        "triage": ("pr", "ticket"),
        "gate": ("gate", "ci_run"),
        "triage_quota": 1,
        "more_refs_first": False,
        "hold": False,
        "ship_check": True,
        "workers": ("release_manager", "qa_triage", "ci_fixer", "sre"),
    }

    def __init__(self, **params):
        self.params = {**self.DEFAULT, **params}

    def begin(self, observation):
        super().begin(observation)
        self.inspected_at_triage = 0
        self.held = False

    @staticmethod
    def site_class(p: dict, phase: int) -> str | None:
        """A site's class, or None for a card that is no site a script can see."""
        ref = EvidenceFirst._decisive(p, phase)
        if ref is None:
            return None
        return "gate" if p["request"] == "open_deploy_gate" else artifact_kind(ref).kind

    def act(self, view):
        pending, phase = view.pending(), view.board["phase_index"]
        others = [p for p in pending if p["request"] != "ship_release_candidate"]
        call = self._decline_or_block(view, others)
        if call:
            return call
        q = self.params
        order = tuple(q["triage"] if phase == 0 else q["gate"])
        quota_left = phase != 0 or self.inspected_at_triage < q["triage_quota"]
        targets = []
        for i, p in enumerate(others):
            cls = self.site_class(p, phase)
            ref = self._decisive(p, phase)
            if cls in order and ref not in view.evidence:
                refs = len(p["refs"]) * (-1 if q["more_refs_first"] else 1)
                who = q["workers"].index(p["worker"]) if q.get("workers") else 0
                targets.append((who, order.index(cls), refs, i, p, ref))
        targets.sort(key=lambda t: t[:4])
        if targets and quota_left and view.board["review_budget_remaining"] > 0:
            if view.can_look():
                *_, p, ref = targets[0]
                self.read_for[ref] = p["id"]
                if phase == 0:
                    self.inspected_at_triage += 1
                return inspect_call(ref)
            if q["hold"] and phase == 0 and not self.held and view.spare_phases() >= 1:
                self.held = True
                return "hold_release", {"reason_code": "risk_too_high"}
        if others:
            return "approve_proposal", {"proposal_id": others[0]["id"]}
        return self._ship(view, pending[0], check=q["ship_check"])


class AttentionOracle(Policy):
    """The attention ceiling: privileged only in choosing what to inspect.

    It asks the truth one question, which visible artifact would reveal a violation not yet revealed,
    and inspects it (holding once for two more evidence actions when this phase's are spent). Every
    decision is then made from the evidence it saw, like any policy: it blocks what the evidence
    shows broken, declines what only costs time, and approves the rest, the ship included."""

    name = "attention_oracle"
    privileged = True
    truth: TruthReader

    def begin(self, observation):
        self.ship_blocked = False

    def act(self, view):
        pending = view.pending()
        others = [p for p in pending if p["request"] != "ship_release_candidate"]
        for p in others:
            if p["request"] in DELAY_REQUESTS:
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rules_for(p)[0]}
            if is_fix(p):  # a fix cites the artifact of what it fixes: old evidence is not about it
                continue
            shown, _ = seen_violation(view, p)
            if shown and shown in rules_for(p):
                return "block_proposal", {"proposal_id": p["id"], "rule_id": shown}
        ref = self.truth.undiscovered_reveal([r for p in pending for r in p["refs"]])
        if ref and view.board["review_budget_remaining"] > 0:
            if view.can_look():
                return inspect_call(ref)
            if others and view.spare_phases() >= 1:
                return "hold_release", {"reason_code": "risk_too_high"}
        if others:
            return "approve_proposal", {"proposal_id": others[0]["id"]}
        ship = pending[0]
        shown = next((evidence_violation(view.evidence[r]) for r in ship["refs"] if r in view.evidence), None)
        if shown == "S3" and not self.ship_blocked:
            self.ship_blocked = True
            return "block_proposal", {"proposal_id": ship["id"], "rule_id": "S3"}
        return "approve_proposal", {"proposal_id": ship["id"]}
