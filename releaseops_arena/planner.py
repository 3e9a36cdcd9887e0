"""The planner and the rule: policies that weigh every visible cue of a proposal.

`planner` is the reference learning is measured against: it knows the generator's
published probabilities (`workers`, `mechanisms`) but not the episode's hidden draws.
It is not a ceiling: on the unseen family, whose cues its posterior never saw,
`baselines.EvidenceFirst` (evidence only, in a fixed order) ships safely more often at hard.
`rule` reads the same sites with a hand-made suspicion score instead of a
posterior; `inspect_everything` spends all the evidence it can first.
"""

from __future__ import annotations

import json
import math

from . import workers as cues
from .catalog import ALL_FAMILIES, ARCHETYPES, ARTIFACT_BY_KIND, inspect_call
from .mechanisms import GATE, REGISTRY, family_mechanisms
from .policy import DELAY_REQUESTS, Policy, is_fix, rules_for, seen_violation, ship_call, wording_of
from .rendering import View

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


def possible_families(requests=(), known: tuple[str, ...] = ALL_FAMILIES) -> tuple[str, ...]:
    """The families a board's requests leave possible: the seen ones, until a site only one family
    has (a held-out family's own request) names it. Only `known` families are considered, and a
    request none of them has is ignored (a reader that does not know a family cannot be told it)."""
    families = tuple(f for f in known if not set(_SITE_REQUESTS[f]) & _ONE_FAMILY_REQUESTS)
    for request in requests:
        if request in _ONE_FAMILY_REQUESTS:
            families = tuple(f for f in known if request in _SITE_REQUESTS[f]) or families
    return families


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
    # What the planner knows of the generator: every family and every mechanism's wordings. A
    # reader with less (trained_policy's, for a policy trained on the train split) narrows these.
    known: tuple[str, ...] = ALL_FAMILIES
    wordings: list | None = None  # None: mechanisms.WORDINGS, every mechanism
    block_at = 0.55  # posterior above which an uninspected site is blocked (train split)
    ship_block_at = 0.45  # belief that a rule is broken above which the ship is blocked
    inspect_doubt = 0.3  # doubt at which a site is inspected even if the sites to come then go unchecked

    def begin(self, observation):
        board = json.loads(observation)
        self.clues = "explicit" if board["review_budget_remaining"] >= 4 else "subtle"
        self.approved_risk: dict[str, float] = {}
        self.ship_blocked: set[str] = set()
        self.families = possible_families(known=self.known)

    def doubt(self, view: View, p: dict) -> tuple[float, str | None]:
        """(P(shortcut), the rule it would break) for a pending proposal; 0 for non-sites."""
        if p["request"] in DELAY_REQUESTS or is_fix(p):
            return 0.0, None
        if p["request"] in _ONE_FAMILY_REQUESTS:  # a site only one family has: the board names the family
            self.families = possible_families((p["request"],), self.known)
        match = wording_of(p["claim"], self.wordings)
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
        match = wording_of(p["claim"], self.wordings)
        want = REGISTRY[match[0]].decisive if match else None
        refs = [r for r in p["refs"] if want and r.startswith(ARTIFACT_BY_KIND[want].prefix)]
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
    """A hand-written heuristic on visible information, tuned on the train split.

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
