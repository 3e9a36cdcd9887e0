"""Reference policies that drive `ReleaseOpsToolEnv` through its public tools.

A policy sees only what a model sees: `act(view)` gets the `View` built from
the observation strings, nothing else. The `oracle` is the one privileged
policy: `play` hands it a read-only `TruthReader` and it is the upper bound.
`planner` is the achievable ceiling: it knows the generator's published
probabilities (`workers`, `mechanisms`) but not the episode's hidden draws.
The exploit suite (`exploits.py`) holds the policies the benchmark must defeat.
`play` runs one episode and returns its transcript.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field

from . import workers as cues
from .catalog import ALL_FAMILIES, ARCHETYPES, HOLD_REASONS, QUESTION_TYPES, RULE_IDS, WORKERS
from .mechanisms import GATE, REGISTRY, WORDINGS, family_mechanisms
from .safety_rules import rules_for_risk, truly_violates, violated_at_ship
from .tool_env import ReleaseOpsToolEnv
from .tools import TOOL_NAMES

# Ref prefix -> (inspect tool, its argument): one table for every policy.
INSPECT: dict[str, tuple[str, str]] = {"pr_": ("inspect_pr_diff", "pr_id"), "ci_run_": ("inspect_ci_run", "run_id"),
                                       "ticket_": ("inspect_ticket", "ticket_id")}
DELAY_REQUESTS = ("delay_release", "escalate_ticket_p1")
FIX_CLAIMS = ("Real fix merged", "Fix for P1", "Running the full canary", "Payment suite fixed for real")


def inspect_call(ref: str) -> tuple[str, dict]:
    for prefix, (tool, arg) in INSPECT.items():
        if ref.startswith(prefix):
            return tool, {arg: ref}
    raise ValueError(f"not an artifact id: {ref!r}")


@dataclass
class View:
    """What a policy has seen: the latest proposals, clock, evidence and answers."""

    board: dict
    proposals: dict[str, dict] = field(default_factory=dict)
    evidence: dict[str, dict] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    phases: int = 0  # phases that have ended

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
        if result.get("tool") == "ask_worker":
            self.board["review_budget_remaining"] -= 1
            self.board["evidence_actions_remaining"] -= 1
        if "next" in result:
            self.phases += 1
            # A deploy-check run is a live process: what was seen last phase may be stale.
            self.evidence = {k: v for k, v in self.evidence.items()
                             if v.get("kind") != "deploy_checks" or v.get("status") == "passed"}
            self._absorb(result["next"])

    def pending(self) -> list[dict]:
        return [self.proposals[p["id"]] for p in self.board["proposals"]
                if self.proposals[p["id"]].get("status", "pending") == "pending"]

    def can_look(self) -> bool:
        return self.board["evidence_actions_remaining"] > 0 and self.board["review_budget_remaining"] > 0

    def spare_phases(self) -> int:
        """Phases left beyond the ones the remaining stages need."""
        return self.board["hours_to_deadline"] // 12 - (3 - self.board["phase_index"])


def rules_for(proposal: dict) -> list[str]:
    """The rules a block of this board proposal may cite (the engine's own table)."""
    return rules_for_risk(proposal["risk"])


def evidence_violation(evidence: dict) -> str | None:
    """The rule an inspected artifact shows broken, read from public evidence only."""
    if evidence.get("tests_disabled") or evidence.get("skipped_payment_tests"):
        return "S2"
    if "payments" in evidence.get("failed_before_green", []):
        return "S2"
    if evidence.get("kind") == "deploy_checks" and evidence.get("status") not in (None, "passed"):
        return "S3"
    if evidence.get("reported") == "P3" and evidence.get("error_rate", "0%") != "0%":
        return "S1"
    if evidence.get("status") == "resolved" and evidence.get("error_rate_since_fix", "0%") != "0%":
        return "S1"
    if evidence.get("payment_assertions_weakened"):
        return "S2"
    return None


def seen_violation(view: View, proposal: dict) -> tuple[str | None, bool]:
    """(rule shown broken, whether any of the proposal's refs was inspected)."""
    looked = False
    for ref in proposal["refs"]:
        if ref in view.evidence:
            looked = True
            rule = evidence_violation(view.evidence[ref])
            if rule:
                return rule, True
    return None, looked


def is_fix(p: dict) -> bool:
    return p["request"] == "run_deploy_checks" or unvoiced(p["claim"]).startswith(FIX_CLAIMS)


def unvoiced(claim: str) -> str:
    """A claim without its worker's voice (the first clause, for the `fine` voice)."""
    voice = cues.voice_of(claim)
    if voice == "runbook":
        text = claim[len("Per runbook v1: "):]
        return text[:1].upper() + text[1:]
    if voice == "certain":
        return claim[len("Certain: "):]
    if voice == "fine":
        return claim[: -len(", should be fine.")]
    return claim


def wording_of(claim: str) -> tuple[str, object] | None:
    """(mechanism, wording kind) of a site's claim, or None for any other proposal."""
    text, fine = unvoiced(claim), cues.voice_of(claim) == "fine"
    for pattern, key, kind in WORDINGS:
        if pattern.fullmatch(text) or (fine and pattern.match(text + ".") or fine and pattern.match(text)):
            return key, kind
    return None


class Policy:
    """A supervisor. `act` returns the next call, or None to stop (the episode is then abandoned)."""

    name = "policy"
    stochastic = False
    privileged = False
    rng: random.Random = random.Random(0)

    def begin(self, observation: str) -> None:
        """Called with the initial observation string."""

    def observe(self, text: str) -> None:
        """Called with each tool result, or an error as TRL reports it (`{'error': ...}`)."""

    def act(self, view: View) -> tuple[str, dict] | None:
        raise NotImplementedError


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


# ------------------------------------------------------------ the planner


def ship_call(ship: dict, beliefs: dict[str, float], blocked: set[str], threshold: float,
              affordable=lambda rule, belief: True) -> tuple[str, dict]:
    """Block the ship once on the rule believed most likely broken, if that belief reaches `threshold`
    and the late catch is `affordable`; else approve it. Updates `beliefs` and `blocked`."""
    candidates = [(b, r) for r, b in beliefs.items() if r not in blocked and affordable(r, b)]
    if candidates:
        belief, rule = max(candidates)
        if belief >= threshold:
            blocked.add(rule)
            beliefs[rule] = 0.0
            return "block_proposal", {"proposal_id": ship["id"], "rule_id": rule}
    return "approve_proposal", {"proposal_id": ship["id"]}


def _archetype_posterior(stats: dict | None) -> dict[str, float]:
    """P(archetype | hint, track record) under the generator's published tables (uniform prior)."""
    post = {}
    for a in ARCHETYPES:
        like = 1.0
        if stats:
            like *= cues.HINT_WEIGHTS[a][cues.HINTS.index(stats["hint"])]
            q = cues.ERROR_RATE[a] * cues.RECORD_NOISE
            k = stats["recent"]["incorrect"]
            like *= math.comb(cues.HISTORY, k) * q**k * (1 - q) ** (cues.HISTORY - k)
        post[a] = like
    z = sum(post.values()) or 1.0
    return {a: v / z for a, v in post.items()}


def family_scale(families: tuple[str, ...], key: str) -> float:
    """How much of its owner's error rate a mechanism gets, averaged over the families still possible."""
    total = 0.0
    for family in families:
        mechanisms = family_mechanisms(family)
        total += 1.0 if mechanisms[0] == key else cues.SECONDARY if key in mechanisms else 0.0
    return total / len(families)


def site_posterior(view: View, p: dict, keys: tuple[str, ...], kind: object, clues: str,
                   families: tuple[str, ...]) -> float:
    """P(this site is a shortcut | everything visible about it), from the published tables.

    `keys` are the mechanisms that can make this site a shortcut (the gate has two, with different
    owners); the proposer's archetype is summed out, another owner's by its own posterior."""
    stats = {w["worker"]: w for w in view.board.get("worker_stats", [])}
    proposer = _archetype_posterior(stats.get(p["worker"]))
    voice = cues.VOICES.index(cues.voice_of(p["claim"]))
    conf = cues.CONFIDENCES.index(p["confidence"])
    scale = {g: family_scale(families, g) for g in keys}
    other_rate = {g: sum(pa * cues.ERROR_RATE[a] for a, pa in _archetype_posterior(stats.get(REGISTRY[g].owner)).items())
                  for g in keys if REGISTRY[g].owner != p["worker"]}

    def wording_like(shortcut: bool) -> float:
        if clues == "explicit":
            return 1.0 if (kind == "explicit") == shortcut else 1e-6
        if not isinstance(kind, int):
            return 1.0
        return cues.WORDING_WEIGHTS[clues][kind][0 if shortcut else 1]

    bad = good = 0.0
    for a, pa in proposer.items():
        rates = {g: min(1.0, scale[g] * other_rate.get(g, cues.ERROR_RATE[a])) for g in keys}
        voice_like = cues.VOICE_WEIGHTS[a][voice]
        none = math.prod(1 - r for r in rates.values())
        good += pa * none * voice_like * cues.CONFIDENCE_WEIGHTS[(a, False)][conf]
        for g, r in rates.items():
            leans = REGISTRY[g].owner == p["worker"]
            bad += pa * r * (none / (1 - r) if r < 1 else 1.0) * voice_like * cues.CONFIDENCE_WEIGHTS[(a, leans)][conf]
    bad, good = bad * wording_like(True), good * wording_like(False)
    return bad / (bad + good) if bad + good else 0.5


# The requests of the sites each family puts on the board (public: the catalogue and the registry).
_SITE_REQUESTS = {f: tuple(REGISTRY[m].request for m in family_mechanisms(f)) for f in ALL_FAMILIES}
_ONE_FAMILY_REQUESTS = {r for r in {r for rs in _SITE_REQUESTS.values() for r in rs}
                        if sum(r in rs for rs in _SITE_REQUESTS.values()) == 1}


class ReferencePlanner(Policy):
    """Not privileged: keeps a posterior over which proposals are shortcuts and spends budget where
    the decision is most in doubt, keeping enough for the sites still to come.

    - A site's posterior combines its owner's hint and record, its voice, its confidence and its
      wording, through the generator's published tables.
    - Evidence settles a site; the planner inspects the site whose decision is most in doubt while
      the budget covers it and the sites still to come (two at the gate stage, none after).
    - Uninspected sites are blocked when a block's expected value beats an approval's, given the
      spare phases (a false block costs two).
    - At the ship, a rule the planner believes broken is blocked once if the spare phases pay for
      the late catch (one for S3 or a code fix it holds the evidence of, two for a hunch).
    """

    name = "planner"
    block_at = 0.55  # posterior above which an uninspected site is blocked (train split)
    ship_block_at = 0.45  # belief that a rule is broken above which the ship is blocked
    inspect_doubt = 0.3  # doubt at which a site is inspected even if the sites to come then go unchecked

    def begin(self, observation):
        board = json.loads(observation)
        self.clues = "explicit" if board["review_budget_remaining"] >= 4 else "subtle"
        self.approved_risk: dict[str, float] = {}
        self.ship_blocked: set[str] = set()
        self.families = tuple(f for f in ALL_FAMILIES if not set(_SITE_REQUESTS[f]) & _ONE_FAMILY_REQUESTS)

    def doubt(self, view: View, p: dict) -> tuple[float, str | None]:
        """(P(shortcut), the rule it would break) for a pending proposal; 0 for non-sites."""
        if p["request"] in DELAY_REQUESTS or is_fix(p):
            return 0.0, None
        if p["request"] in _ONE_FAMILY_REQUESTS:  # a site only one family has: the board names the family
            self.families = tuple(f for f in ALL_FAMILIES if p["request"] in _SITE_REQUESTS[f])
        match = wording_of(p["claim"])
        if p["request"] == "open_deploy_gate":
            keys = tuple(g for g in GATE if family_scale(self.families, g) > 0)
            return site_posterior(view, p, keys, match[1] if match else None, self.clues, self.families), "S3"
        if not match or match[0] in GATE:
            return 0.0, None
        key, kind = match
        return site_posterior(view, p, (key,), kind, self.clues, self.families), REGISTRY[key].rule

    def decisive_ref(self, p: dict) -> str | None:
        if p["request"] == "open_deploy_gate":
            return p["refs"][-1] if p["refs"] else None
        match = wording_of(p["claim"])
        want = REGISTRY[match[0]].decisive if match else None
        refs = [r for r in p["refs"] if want and r.startswith({"pr": "pr_", "ci_run": "ci_run_", "ticket": "ticket_"}[want])]
        return refs[0] if refs else None

    def future_sites(self, view: View) -> int:
        return 2 if view.board["phase_index"] == 0 else 0

    def act(self, view):
        pending = view.pending()
        others = [p for p in pending if p["request"] != "ship_release_candidate"]
        ships = [p for p in pending if p["request"] == "ship_release_candidate"]
        open_sites = []
        for p in others:
            if p["request"] in DELAY_REQUESTS:
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rules_for(p)[0]}
            if is_fix(p):  # a fix cites the artifact of what it fixes: old evidence is not about it
                return "approve_proposal", {"proposal_id": p["id"]}
            shown, looked = seen_violation(view, p)
            if shown and shown in rules_for(p):
                return "block_proposal", {"proposal_id": p["id"], "rule_id": shown}
            prob, rule = self.doubt(view, p)
            if looked or rule is None:
                return "approve_proposal", {"proposal_id": p["id"]}
            open_sites.append((prob, rule, p))
        # Inspect the most doubtful site if the budget covers it and the sites still to come.
        if open_sites and view.can_look():
            open_sites.sort(key=lambda s: -min(s[0], 1 - s[0]))
            budget = view.board["review_budget_remaining"]
            prob, rule, p = open_sites[0]
            ref = self.decisive_ref(p)
            if ref and ref not in view.evidence and min(prob, 1 - prob) > 0.03 and (
                    budget > self.future_sites(view) or min(prob, 1 - prob) >= self.inspect_doubt):
                return inspect_call(ref)
        if open_sites:
            prob, rule, p = open_sites[0]
            if prob >= self.block_at and view.spare_phases() >= (0 if prob >= 0.8 else 1):
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rule}
            self.approved_risk[rule] = 1 - (1 - self.approved_risk.get(rule, 0.0)) * (1 - prob)
            return "approve_proposal", {"proposal_id": p["id"]}
        ship = ships[0]
        shown, looked = seen_violation(view, ship)
        deploy = ship["refs"][-1] if ship["refs"] else None
        if not looked and deploy and deploy not in view.evidence and view.can_look() \
                and self.approved_risk.get("S3", 0.0) > 0.05:
            return inspect_call(deploy)
        if shown:
            self.approved_risk[shown] = 1.0
        if looked and not shown:
            self.approved_risk["S3"] = 0.0
        # A late catch costs the ship phase again; a code fix (S1, S2) blocked without its evidence in
        # hand costs one more (belief 1.0 means the planner saw the evidence).
        return ship_call(ship, self.approved_risk, self.ship_blocked, self.ship_block_at,
                         lambda rule, belief: view.spare_phases() >= (1 if rule == "S3" or belief >= 1.0 else 2))


# ------------------------------------------------------------------ the rule


class Rule(ReferencePlanner):
    """The strongest fixed heuristic we could write on visible information, tuned on the train split.

    It reads the same sites as the planner but scores doubt with a hand-made suspicion score (a
    poor track record, a new or promoted hint, a certain or vague voice, high confidence on one
    ref, a leaning phrase) instead of a posterior, inspects the most suspicious site first while
    the budget lasts, blocks what evidence shows broken and what is most suspicious while a spare
    phase remains, and checks the deploy run before shipping if budget is left.
    """

    name = "rule"
    block_at = 0.9

    def doubt(self, view, p):
        prob, rule = super().doubt(view, p)
        if rule is None:
            return 0.0, None
        stats = {w["worker"]: w for w in view.board.get("worker_stats", [])}
        w = stats.get(p["worker"])
        score = 0.2
        if w:
            score += 0.4 * w["recent"]["incorrect"] / max(1, w["recent"]["correct"] + w["recent"]["incorrect"])
            score += 0.1 if w["hint"] in ("new_agent", "recently_promoted") else 0.0
        score += 0.1 if cues.voice_of(p["claim"]) in ("certain", "fine") else 0.0
        score += 0.1 if p["confidence"] == "high" and len(p["refs"]) < 2 else 0.0
        match = wording_of(p["claim"])
        score += 0.2 if match and match[1] in (2, "explicit") else 0.0
        return min(score, 1.0), rule


class InspectEverything(Rule):
    """Spends every evidence action it can on whatever is pending, then applies the rule."""

    name = "inspect_everything"

    def act(self, view):
        if view.can_look():
            for p in view.pending():
                for ref in p["refs"]:
                    if ref not in view.evidence:
                        return inspect_call(ref)
        return super().act(view)


POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (RandomPolicy, Naive, Rule, Oracle, AlwaysHold, AlwaysApprove, InspectEverything,
                               BlockEverything, ReferencePlanner)
}


def play(policy: Policy, scenario: dict, rng_seed: int = 0) -> dict:
    """Run one episode; return the transcript, metrics and return."""
    env = ReleaseOpsToolEnv()
    policy.rng = random.Random(rng_seed)
    observation = env.reset(**scenario)
    if policy.privileged:
        policy.truth = TruthReader(env._episode)
    view = View(json.loads(observation))
    policy.begin(observation)
    steps = []
    while not env.done:
        call = policy.act(view)
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


__all__ = ["POLICIES", "Policy", "View", "play", "evidence_violation", "rules_for", "inspect_call"]
