"""The planner and the rule: policies that weigh every visible cue of a proposal.
Over 400 lines: the planner's reading of every cue is one computation.

`planner` is the reference learning is measured against: it knows the generator's
published tables (`workers`, `mechanisms`, the site layout of `scenario_builder`) but
not the episode's hidden draws. Its job is the benchmark's: a release has more sites
than the review budget covers, so it ranks every site, seen and still to come, by its
posterior of being a shortcut, and spends the budget on the top of that ranking.
`rule` reads the same sites with a hand-made suspicion score instead of a posterior;
`inspect_everything` spends all the evidence it can first.
"""

from __future__ import annotations

import itertools
import json
import math
from functools import lru_cache

from .. import workers as cues
from ..catalog import ALL_FAMILIES, ARCHETYPES, ARTIFACT_BY_KIND, inspect_call
from ..mechanisms import FAMILY_MECHANISM, GATE, REGISTRY, family_mechanisms
from ..rendering import View
from ..scenario_builder import mechanism_of, site_keys
from .base import (
    DELAY_REQUESTS,
    Policy,
    is_fix,
    rules_for,
    seen_violation,
    ship_call,
    wording_of,
    wordings_of,
)

# Requests only one kind of site makes (merge_pr is also a fix's and a distractor's: its claim decides).
SITE_REQUEST = {m.request: m.key for m in REGISTRY.values() if m.request != "merge_pr" and m.key not in GATE}
# Mechanisms whose site cites more than one artifact: citing only one says something about the worker.
MULTI_REF = {"ci": 2, "snapshot": 2}
# A worker whose P(careful) is within this of 0 or 1 is not split into careful and not careful.
HYPOTHESIS_FLOOR = 0.02


def _archetype_posterior(stats: dict | None, voices=(), trims=()) -> dict[str, float]:
    """P(archetype | hint, track record, the voices and ref trimming of the worker's proposals so far)."""
    post = {}
    for i, a in enumerate(ARCHETYPES):
        like = cues.ARCHETYPE_PRIOR[i]
        if stats:
            like *= cues.HINT_WEIGHTS[a][cues.HINTS.index(stats["hint"])]
            q = cues.ERROR_RATE[a]
            k = stats["recent"]["incorrect"]
            like *= math.comb(cues.HISTORY, k) * q**k * (1 - q) ** (cues.HISTORY - k)
        for v in voices:
            like *= cues.VOICE_WEIGHTS[(a, False)][cues.VOICES.index(v)]
        trim = cues.TRIM_REFS.get(a, 0.0)
        for trimmed in trims:
            like *= trim if trimmed else 1 - trim
        post[a] = like
    z = sum(post.values()) or 1.0
    return {a: v / z for a, v in post.items()}


def mixture(parts) -> dict:
    """Beliefs mixed from (weight, beliefs) pairs: each site's posterior and each place of the future's,
    weighted (a pair of weight 0 or less is skipped)."""
    total, mixed, future = 0.0, {}, []
    for weight, beliefs in parts:
        if weight <= 0:
            continue
        total += weight
        for pid, v in beliefs.items():
            if pid != "future":
                mixed[pid] = mixed.get(pid, 0.0) + weight * v
        future = [x + weight * y for x, y in itertools.zip_longest(future, beliefs["future"], fillvalue=0.0)]
    total = total or 1.0
    out = {pid: v / total for pid, v in mixed.items()}
    out["future"] = [v / total for v in future]
    return out


@lru_cache(maxsize=8192)
def subset_prior(weights: tuple[float, ...]) -> tuple[tuple[frozenset, float], ...]:
    """P(the shortcut sites are exactly S) for every set S the generator can draw: a count from
    workers.SHORTCUT_COUNT, then sites one at a time without replacement in proportion to `weights`."""
    out: dict[frozenset, float] = {}
    n = len(weights)
    for k, pk in enumerate(cues.SHORTCUT_COUNT):
        if k > n or pk == 0:
            continue
        for order in itertools.permutations(range(n), k):
            prob, left = pk, sum(weights)
            for i in order:
                prob *= weights[i] / left
                left -= weights[i]
            key = frozenset(order)
            out[key] = out.get(key, 0.0) + prob
    return tuple(out.items())


# The requests of the sites each family puts on the board (public: the catalogue and the registry).
_SITE_REQUESTS = {f: tuple(REGISTRY[m].request for m in family_mechanisms(f)) for f in ALL_FAMILIES}
_ONE_FAMILY_REQUESTS = {
    r for r in {r for rs in _SITE_REQUESTS.values() for r in rs} if sum(r in rs for rs in _SITE_REQUESTS.values()) == 1
}


# Requests a release's other cards make whatever its family: benign work (a docs ticket, a merge, which
# is also a code fix's), the ship, or a delay. A site's request is none of these.
OTHER_REQUESTS = frozenset({"update_ticket", "merge_pr", "ship_release_candidate", *DELAY_REQUESTS})


@lru_cache(maxsize=None)
def slot_of(request: str, risk: tuple[str, ...], known: tuple[str, ...]) -> str | None:
    """A site no known mechanism makes, read by its slot: the known mechanism (not the gate's) whose
    site carries exactly these risk tags, so the same rule, decisive artifact and owners. A request
    that no known mechanism and no other card makes is a mechanism the reader has not met; every
    family's board has the same kinds of site (a new mechanism takes the slot of the one it replaces),
    so its request and risk say which slot it holds, and its wording says nothing the reader knows.
    None when the request is known or the risk matches no known site."""
    mechanisms = {m for f in known for m in family_mechanisms(f) if m not in GATE}
    if request in OTHER_REQUESTS or request in {REGISTRY[m].request for m in mechanisms}:
        return None
    same = sorted(m for m in mechanisms if tuple(sorted(REGISTRY[m].risk)) == tuple(sorted(risk)))
    return same[0] if len(same) == 1 else None


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
    """Not privileged: ranks every site of the release by its posterior of being a shortcut and
    spends the review budget on the top of the ranking.

    - Each worker's archetype posterior combines its hint, its ten-task track record, the voice of
      every claim it has made and whether it cited all its evidence (`workers`' published tables).
    - A site's prior comes from the generator's draw (a count of shortcuts, then sites in proportion
      to their owners' archetype weights), computed exactly over every set of sites it could draw, the
      sites still to come included; each site's wording and confidence then weigh in, and evidence
      already read settles the sites it covers (which moves the others too).
    - The budget goes to the sites with the highest posteriors, now or still to come; when this
      phase's evidence actions run out with a site still worth a look, a spare phase buys two more.
    - An uninspected site is blocked when its posterior passes `block_at`; at the ship, the deploy
      run is checked if the deploy gate went unread, and a rule seen broken is blocked once.
    """

    name = "planner"
    # What the planner knows of the generator: every family and every mechanism's wordings. A
    # reader with less (trained_policy's, for a policy trained on the train split) narrows these.
    known: tuple[str, ...] = ALL_FAMILIES
    wordings: list | None = None  # None: mechanisms.WORDINGS, every mechanism
    block_at = 0.6  # posterior above which an uninspected site is blocked (train split)
    hold_at = 0.3  # posterior at which a site is worth a spare phase for two more evidence actions
    look_at = 0.04  # posterior below which a site is never worth a look
    ship_block_at = 0.45  # belief that a rule is broken above which the ship is blocked
    clues = "subtle"
    # Read a site of a mechanism the planner does not know by its slot (`slot_of`), as the release's
    # own mechanism; False: such a card is benign work to it.
    slots = False
    # Mix the beliefs over which doubtful workers are careful (`_mixed_over_workers`); False: weigh each
    # site by its owner's mean archetype weight (the reading the trained policy's weights were fitted on).
    worker_hypotheses = True
    # Spend budget left at the ship on a second look at an approved site (`recheck`).
    second_look = True
    _cache = None

    def begin(self, observation):
        board = json.loads(observation)
        self.clues = "explicit" if board["review_budget_remaining"] >= 4 else "subtle"
        self.approved_risk: dict[str, float] = {}
        self.ship_blocked: set[str] = set()
        self.approved_at: dict[str, float] = {}  # site approved unread -> its posterior then (its share of the risk)
        self.rechecked: dict[str, str] = {}  # approved site given a second look -> its rule
        self._cache = None
        if self.clues != "explicit":
            # Hard boards bring two pieces of benign work to triage, medium ones one (the layout is public).
            benign = [p for p in board["proposals"] if p["request"] not in DELAY_REQUESTS and self.site_of(p) is None]
            self.clues = "hidden" if len(benign) >= 2 else "subtle"

    @property
    def families(self) -> tuple[str, ...]:
        """The families this planner weighs before any board names one (`beliefs` narrows them per view)."""
        return possible_families(known=self.known)

    # ------------------------------------------------------------ reading

    def site_of(self, p: dict) -> str | None:
        """The mechanism whose site proposal `p` is (the gate's is "gate"), or None for any other."""
        if p["request"] in DELAY_REQUESTS or p["request"] == "ship_release_candidate" or is_fix(p):
            return None
        if p["request"] == "open_deploy_gate":
            return "gate"
        key = SITE_REQUEST.get(p["request"])
        if key and (self.wordings is None or any(w[1] == key for w in self.wordings)):
            return key
        match = None if key else wording_of(p["claim"], self.wordings, self.clues == "explicit")
        if match:
            return match[0] if match[0] not in GATE else None
        return slot_of(p["request"], tuple(p["risk"]), self.known) if self.slots else None

    def own_slots(self, view: View) -> set[str]:
        """The slots of the board's sites read by `slot_of`: a mechanism the reader does not know is
        the release's own (every family adds its own mechanism to the seen ones)."""
        if not self.slots:
            return set()
        return {k for p in view.proposals.values() if (k := slot_of(p["request"], tuple(p["risk"]), self.known))}

    def _worker_posteriors(self, view: View) -> dict[str, dict[str, float]]:
        stats = {w["worker"]: w for w in view.board.get("worker_stats", [])}
        voices: dict[str, list] = {}
        trims: dict[str, list] = {}
        claims = set()
        for p in view.proposals.values():
            if (p["worker"], p["claim"]) in claims:  # a resubmission repeats its claim
                continue
            claims.add((p["worker"], p["claim"]))
            key = self.site_of(p)
            if key is None:  # a site's voice also depends on whether it is a shortcut: weighed there
                voices.setdefault(p["worker"], []).append(cues.voice_of(p["claim"]))
            if key in MULTI_REF:
                trims.setdefault(p["worker"], []).append(len(p["refs"]) < MULTI_REF[key])
        return {w: _archetype_posterior(stats.get(w), voices.get(w, ()), trims.get(w, ())) for w in stats}

    def _likelihood(self, p: dict, key: str, post: dict[str, dict[str, float]]) -> tuple[float, float]:
        """P(what the card shows | shortcut), P(... | correct): wording, stated confidence and voice."""
        bad = good = 1.0
        matches = [k for m, k in wordings_of(p["claim"], self.wordings) if m == key or key == "gate" and m in GATE]
        if self.clues == "explicit":
            if "explicit" in matches:
                good = 1e-6
            elif matches:
                bad = 1e-6
        else:
            kinds = [k for k in matches if isinstance(k, int)]
            if kinds:
                table = cues.WORDING_WEIGHTS[self.clues]
                bad *= sum(table[k][0] for k in kinds) / len(kinds)
                good *= sum(table[k][1] for k in kinds) / len(kinds)
        conf = cues.CONFIDENCES.index(p["confidence"])
        voice = cues.VOICES.index(cues.voice_of(p["claim"]))
        proposer = post.get(p["worker"], {})
        # Confidence and voice lean with the proposer's archetype: summed over its posterior.
        bad *= sum(
            pa * cues.CONFIDENCE_WEIGHTS[(a, True)][conf] * cues.VOICE_WEIGHTS[(a, True)][voice]
            for a, pa in proposer.items()
        )
        good *= sum(
            pa * cues.CONFIDENCE_WEIGHTS[(a, False)][conf] * cues.VOICE_WEIGHTS[(a, False)][voice]
            for a, pa in proposer.items()
        )
        return bad, good

    def beliefs(self, view: View) -> dict:
        """P(shortcut) for every site proposal seen (by id) and, under "future", for the sites still to
        come (highest first), mixing the families still possible by how well each explains the board."""
        key = (
            len(view.evidence),
            view.phases,
            self.clues,
            self.known,
            tuple(
                (p["id"], p.get("status", ""), p["worker"], p["claim"], p["confidence"], len(p["refs"]))
                for p in view.proposals.values()
            ),
            tuple((w["worker"], w["hint"], w["recent"]["incorrect"]) for w in view.board.get("worker_stats", [])),
        )
        if self._cache and self._cache[0] == key:
            return self._cache[1]
        post = self._worker_posteriors(view)
        if not self.worker_hypotheses:
            out, _ = self._beliefs_given(view, post)
        else:
            out = self._mixed_over_workers(view, post)
        self._cache = (key, out)
        return out

    def _mixed_over_workers(self, view: View, post: dict[str, dict[str, float]]) -> dict:
        """The beliefs mixed over which workers are careful today. Each worker's archetype posterior
        reads its own cards only; what a site's evidence settles, and the cues of every site, also say
        who is careful, and that moves the posteriors of the same worker's other sites (averaging the
        archetypes first would not). Workers all but settled stay at their posterior."""
        doubtful = [w for w, d in post.items() if HYPOTHESIS_FLOOR < d["careful"] < 1 - HYPOTHESIS_FLOOR]

        def parts():
            for careful in itertools.product((True, False), repeat=len(doubtful)):
                prior, cond = 1.0, dict(post)
                for w, c in zip(doubtful, careful):
                    pc = post[w]["careful"]
                    prior *= pc if c else 1 - pc
                    cond[w] = (
                        {a: float(a == "careful") for a in ARCHETYPES}
                        if c
                        else {a: 0.0 if a == "careful" else pa / (1 - pc) for a, pa in post[w].items()}
                    )
                b, z = self._beliefs_given(view, cond)
                yield prior * z, b

        return mixture(parts())

    def _beliefs_given(self, view: View, post: dict[str, dict[str, float]]) -> tuple[dict, float]:
        """The beliefs given each worker's archetype distribution `post`, and the likelihood of what the
        board shows (every site's cues and settled evidence) under it."""
        mean_weight = {
            w: {own: sum(pa * cues.site_weight(a, own) for a, pa in dist.items()) for own in (False, True)}
            for w, dist in post.items()
        }
        seen: dict[str, list[dict]] = {}
        for p in view.proposals.values():
            k = self.site_of(p)
            if k:
                seen.setdefault(k, []).append(p)
        mixed: dict[str, float] = {}
        future_mixed: list[float] = []
        total = 0.0
        families = possible_families([p["request"] for p in view.proposals.values()], self.known)
        own_slots = self.own_slots(view)
        families = tuple(f for f in families if FAMILY_MECHANISM[f] in own_slots) or families
        hypotheses = [(f, False) for f in families]
        if self.slots and not own_slots:
            # No site on the board is new to the reader, but a new mechanism may hold the one slot whose
            # cards every mechanism words alike: the deploy gate, then decided by whoever puts it up.
            hypotheses += [(f, True) for f in families if FAMILY_MECHANISM[f] in GATE]
        for family, gate_by_proposer in hypotheses:
            own = FAMILY_MECHANISM[family]
            slots = site_keys(family, "easy" if self.clues == "explicit" else "medium")
            weights, likes, ids = [], [], []
            taken: dict[str, int] = {}
            for slot in slots:
                mech = mechanism_of(slot)
                group = "gate" if mech in GATE else mech
                i = taken.get(group, 0)
                taken[group] = i + 1
                cards = seen.get(group, [])
                m = REGISTRY[mech]
                # Whose archetype decides the site: the gate's owner, a seen copy's proposer, or
                # for a copy still to come any of the workers who may put it up.
                if mech in GATE:
                    deciders = (m.proposer,) if gate_by_proposer else (m.owner,)
                else:
                    deciders = (cards[i]["worker"],) if i < len(cards) else m.proposers
                weights.append(round(sum(mean_weight[w][mech == own] for w in deciders) / len(deciders), 3))
                if i < len(cards):
                    p = cards[i]
                    shown, looked = seen_violation(view, p)
                    if looked and self.decisive_ref(p) in view.evidence or shown:
                        likes.append((1.0, 0.0) if shown else (0.0, 1.0))
                    else:
                        likes.append(self._likelihood(p, group, post))
                    ids.append(p["id"])
                else:
                    likes.append((1.0, 1.0))
                    ids.append(None)
            if any(len(cards) > taken.get(g, 0) for g, cards in seen.items()):
                continue  # more sites of a kind than this family has: not this family
            z, q = 0.0, [0.0] * len(slots)
            for members, prob in subset_prior(tuple(weights)):
                for i, (bad, good) in enumerate(likes):
                    prob *= bad if i in members else good
                z += prob
                for i in members:
                    q[i] += prob
            if z <= 0:
                continue
            total += z
            future = sorted((q[i] / z for i in range(len(slots)) if ids[i] is None), reverse=True)
            future_mixed = [a + z * b for a, b in itertools.zip_longest(future_mixed, future, fillvalue=0.0)]
            for i, pid in enumerate(ids):
                if pid:
                    mixed[pid] = mixed.get(pid, 0.0) + q[i]
        likelihood = total
        total = total or 1.0
        out = {pid: v / total for pid, v in mixed.items()}
        out["future"] = [v / total for v in future_mixed]
        return out, likelihood / max(len(hypotheses), 1)

    def doubt(self, view: View, p: dict) -> tuple[float, str | None]:
        """(P(shortcut), the rule it would break) for a proposal; 0 and no rule for non-sites."""
        key = self.site_of(p)
        if key is None:
            return 0.0, None
        rule = "S3" if key == "gate" else REGISTRY[key].rule
        if view.proposals.get(p["id"]) != p:  # a card read as it is not on the board (what-if readings)
            shadow = View.__new__(View)
            shadow.__dict__.update(view.__dict__, proposals={**view.proposals, p["id"]: p})
            view = shadow
        return self.beliefs(view).get(p["id"], 0.0), rule

    def decisive_ref(self, p: dict) -> str | None:
        if p["request"] == "open_deploy_gate":
            return p["refs"][-1] if p["refs"] else None
        key = self.site_of(p)
        want = REGISTRY[key].decisive if key and key != "gate" else None
        refs = [r for r in p["refs"] if want and r.startswith(ARTIFACT_BY_KIND[want].prefix)]
        return refs[-1] if refs else None

    # ------------------------------------------------------------ acting

    def act(self, view):
        pending = view.pending()
        others = [p for p in pending if p["request"] != "ship_release_candidate"]
        ships = [p for p in pending if p["request"] == "ship_release_candidate"]
        open_sites = []
        for p in others:
            if p["request"] in DELAY_REQUESTS:
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rules_for(p)[0]}
            if is_fix(p) or (p["worker"], p["request"], p["claim"]) in view.blocked_claims:
                return "approve_proposal", {"proposal_id": p["id"]}  # a fix, or a block that came back
            shown, looked = seen_violation(view, p)
            if shown and shown in rules_for(p):
                return "block_proposal", {"proposal_id": p["id"], "rule_id": shown}
            prob, rule = self.doubt(view, p)
            if looked or rule is None:
                return "approve_proposal", {"proposal_id": p["id"]}
            open_sites.append((prob, rule, p))
        open_sites.sort(key=lambda s: -s[0])
        budget = view.board["review_budget_remaining"]
        if open_sites and budget > 0:
            prob, rule, p = open_sites[0]
            ref = self.decisive_ref(p)
            # The budget goes to the highest posteriors, here or still to come (the ship's deploy check
            # is the gate's, already counted).
            later = self.later(view) if self.future_sites(view) else []
            ranked = sorted([s[0] for s in open_sites] + later, reverse=True)
            if ref and prob >= self.look_at and prob >= ranked[min(budget, len(ranked)) - 1]:
                if view.can_look():
                    return inspect_call(ref)
                if prob >= self.hold_at and view.spare_phases() >= 1:
                    return "hold_release", {"reason_code": "risk_too_high"}
        if open_sites:
            prob, rule, p = open_sites[-1] if open_sites[-1][0] < self.block_at else open_sites[0]
            if prob >= self.block_at and view.spare_phases() >= 1:
                return "block_proposal", {"proposal_id": p["id"], "rule_id": rule}
            self.approved_risk[rule] = 1 - (1 - self.approved_risk.get(rule, 0.0)) * (1 - prob)
            self.approved_at[p["id"]] = prob
            return "approve_proposal", {"proposal_id": p["id"]}
        ship = ships[0]
        recheck = self.recheck(view)
        if recheck:
            return inspect_call(recheck)
        shown, looked = seen_violation(view, ship)
        deploy = ship["refs"][-1] if ship["refs"] else None
        if (
            not looked
            and deploy
            and deploy not in view.evidence
            and view.can_look()
            and self.approved_risk.get("S3", 0.0) > 0.02
        ):
            return inspect_call(deploy)
        if shown:
            self.approved_risk[shown] = 1.0
        if looked and not shown:
            self.approved_risk["S3"] = 0.0
        # A late catch costs the ship phase again; a code fix (S1, S2) blocked without its evidence in
        # hand costs one more (belief 1.0 means the planner saw the evidence).
        return ship_call(
            ship,
            self.approved_risk,
            self.ship_blocked,
            self.ship_block_at,
            lambda rule, belief: view.spare_phases() >= (1 if rule == "S3" or belief >= 1.0 else 2),
        )

    def recheck(self, view: View) -> str | None:
        """At the ship, budget left over buys a second look: the decisive artifact of the approved,
        unread site most likely a shortcut, when that beats the deploy check's risk and the clock still
        has room for the late catch it would show (blocking the ship on the site's rule). Records what it
        shows in `approved_risk`; None when nothing is worth the look."""
        for pid, rule in list(self.rechecked.items()):  # what a second look showed: the ship's block reads it
            shown, looked = seen_violation(view, view.proposals[pid])
            if looked:
                # Shown: the rule is broken. Clean: the site's share of the risk, as added at its approval, goes.
                risk, prob = self.approved_risk.get(rule, 0.0), self.approved_at.get(pid, 0.0)
                self.approved_risk[rule] = 1.0 if shown else max(0.0, 1 - (1 - risk) / max(1e-9, 1 - prob))
                del self.rechecked[pid]
        if not self.second_look or view.board["review_budget_remaining"] <= 0 or not view.can_look():
            return None
        if view.spare_phases() < 1:
            return None
        best, ref = self.look_at, None
        for p in view.proposals.values():
            if p.get("status") != "approved" or seen_violation(view, p)[1]:
                continue
            prob, rule = self.doubt(view, p)
            r = self.decisive_ref(p)
            if rule and r and r not in view.evidence and prob > best:
                best, ref, pid, why = prob, r, p["id"], rule
        if ref is None or best <= self.approved_risk.get("S3", 0.0):
            return None
        self.rechecked[pid] = why
        return ref

    def future_sites(self, view: View) -> int:
        return 2 if view.board["phase_index"] == 0 else 0

    def later(self, view: View) -> list[float]:
        """The posteriors of the sites still to come, highest first."""
        return self.beliefs(view)["future"]


# ------------------------------------------------------------------ the rule


class Rule(ReferencePlanner):
    """A hand-written heuristic on visible information, tuned on the train split.

    It reads the same sites as the planner but scores doubt with a hand-made suspicion score (the
    share of recent tasks the worker got wrong, a new or promoted hint, high confidence, a leaning
    phrase) instead of a posterior, inspects the most suspicious sites while the budget lasts
    (a site still to come counts as moderately suspicious), blocks only what evidence shows broken, and
    checks the deploy run before shipping if budget is left.
    """

    name = "rule"
    worker_hypotheses = False  # its doubt is the suspicion score: the planner's posterior goes unread
    second_look = False  # the rule as tuned: the budget left at the ship goes to the deploy check only
    block_at = 2.0  # never blocks without evidence
    hold_at = 2.0  # and never spends a spare phase on more evidence
    ship_block_at = 0.99  # blocks the ship only on a rule it saw broken

    def later(self, view):
        return [0.35, 0.35]  # a site still to come is as suspicious as a plain one

    def doubt(self, view, p):
        prob, rule = super().doubt(view, p)
        if rule is None:
            return 0.0, None
        stats = {w["worker"]: w for w in view.board.get("worker_stats", [])}
        # The deploy gate is the SRE's card, but the release manager pushes it: the worse of the two.
        names = ("sre", "release_manager") if p["request"] == "open_deploy_gate" else (p["worker"],)
        record = (
            max(
                (
                    stats[n]["recent"]["incorrect"]
                    / max(1, stats[n]["recent"]["correct"] + stats[n]["recent"]["incorrect"]),
                    stats[n]["hint"],
                )
                for n in names
                if n in stats
            )
            if any(n in stats for n in names)
            else (0.0, "")
        )
        score = 0.05 + record[0]
        score += 0.1 if record[1] in ("new_agent", "recently_promoted") else 0.0
        score += 0.15 if p["confidence"] == "high" else -0.05 if p["confidence"] == "low" else 0.0
        match = wording_of(p["claim"])
        score += 0.15 if match and match[1] in (2, "explicit") else -0.1 if match and match[1] == 0 else 0.0
        return min(max(score, 0.0), 1.0), rule


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
