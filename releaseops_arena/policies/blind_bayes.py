"""`blind_bayes`: the strongest cue-blind reference, the planner's exact posterior with every cue taken away.

It plans as `planner` does, from the generator's public tables (`workers`, `mechanisms`, the site
layout of `scenario_builder`, the catalogue), but reads only what a script that reads no cue may:
each card's request, risk tags, refs (as ids to inspect) and proposer, the phase, budget, clock and
its own evidence. `act` hands the planner a view whose claims, confidences, worker stats and answers
are blanked, so no wording, voice, confidence, hint, record or answer can reach a decision.

Each worker's archetype prior is the train split's archetype mixes (`splits.SPLITS["train"]`): a
hypothesis is a mix, which of the workers it leaves unpinned are careful, and whether the family is one
that pins a worker itself (the stale SRE's), so what its evidence finds about one worker's site moves
the belief about who is the problem today. Every card likelihood is 1; a hypothesis is weighed
by the probability of what its evidence settled (the chain rule over the settled sites, each factor
the planner's posterior given the ones before). `read_refs` also reads how many refs a card cites,
the trim cue `planner` reads (docs/environment.md, *The cue-blind reference*, says why the reference
does not).
"""

from __future__ import annotations

import itertools
import math

from .. import workers as cues
from ..catalog import ALL_FAMILIES, ARCHETYPES, WORKERS, parse_mix
from ..mechanisms import GATE, REGISTRY
from ..rendering import View
from ..scenario_builder import mechanism_of, site_keys
from ..splits import SPLITS
from .base import DELAY_REQUESTS, FIX_REQUESTS, evidence_violation, seen_violation
from .planner import MULTI_REF, ReferencePlanner, mixture, possible_families

TRAIN_MIXES: tuple[str, ...] = tuple(SPLITS["train"]["mixes"])
# The site a card is, by its request, risk tags and the stage it came up at (a fix or a distractor that
# makes the same request comes up at another stage or with other tags, bar one: hard's payments change).
SITE_KINDS = {(m.request, tuple(sorted(m.risk))): (m.key, m.stage) for m in REGISTRY.values() if m.key not in GATE}
# Hard's benign payments change is a `ci` card of the CI fixer's (scenario_builder.distractor).
LOOKALIKE = ("ci", "ci_fixer")


def blinded(view: View) -> View:
    """The view without any cue: claims, confidences, worker stats and answers blanked."""
    cards = {pid: {**p, "claim": "", "confidence": ""} for pid, p in view.proposals.items()}
    board = {k: v for k, v in view.board.items() if k != "worker_stats"}
    board["proposals"] = [cards.get(p["id"], {**p, "claim": "", "confidence": ""}) for p in view.board["proposals"]]
    shadow = View.__new__(View)
    shadow.__dict__.update(view.__dict__, board=board, proposals=cards, answers={}, blocked_claims=set())
    return shadow


def _trim_likelihood(trims: list[bool]) -> dict[str, float]:
    """P(these citations trimmed or not | archetype), from `workers.TRIM_REFS`."""
    return {a: math.prod(cues.TRIM_REFS[a] if t else 1 - cues.TRIM_REFS[a] for t in trims) for a in ARCHETYPES}


# Workers a family pins when its mix does not (scenario_builder.build_scenario): its stale SRE.
FAMILY_PINS = {"stale_sre_waives_deploy_checks": {"sre": "stale_policy"}}
# The families weighed apart: each that pins a worker, then the rest.
GROUPS = (*((f,) for f in FAMILY_PINS), tuple(f for f in ALL_FAMILIES if f not in FAMILY_PINS))
CAREFUL = cues.ARCHETYPE_PRIOR[ARCHETYPES.index("careful")]
# A hypothesis: (mix, the unpinned workers that are not careful, the ids read as benign, the families).
NO_HYPOTHESIS = ("random", frozenset(), frozenset(), ALL_FAMILIES)


class BlindBayes(ReferencePlanner):
    """The planner's play and exact site posterior, with the train mixes as its only prior on workers."""

    name = "blind_bayes"
    worker_hypotheses = False  # it mixes over who is careful itself (`HYPOTHESES`), with no cue to weigh
    read_refs = False  # True: read how many refs a card cites (the trim cue), as `planner` does

    def __init__(self, read_refs: bool | None = None):
        if read_refs is not None:
            self.read_refs = read_refs

    def begin(self, observation):
        self._born: dict[str, int] = {}  # proposal id -> the phase it came up at
        self._blocked_refs: set[str] = set()
        self._memo: dict = {}
        self._hypothesis: tuple = NO_HYPOTHESIS
        super().begin(observation)

    # ------------------------------------------------------------ reading (no cue)

    def site_of(self, p: dict) -> str | None:
        if p["id"] in self._hypothesis[2]:
            return None  # read as hard's benign payments change under this hypothesis
        if p["request"] == "open_deploy_gate":
            return "gate"
        kind = SITE_KINDS.get((p["request"], tuple(sorted(p["risk"]))))
        return kind[0] if kind and self._born.get(p["id"], 0) == kind[1] else None

    def _trims(self, view: View) -> dict[str, list[bool]]:
        out: dict[str, list[bool]] = {}
        for p in view.proposals.values():
            key = self.site_of(p)
            if self.read_refs and key in MULTI_REF:
                out.setdefault(p["worker"], []).append(len(p["refs"]) < MULTI_REF[key])
        return out

    @staticmethod
    def _pins(mix: str, families: tuple[str, ...]) -> dict[str, str]:
        return {**(FAMILY_PINS.get(families[0], {}) if len(families) == 1 else {}), **parse_mix(mix)}

    @staticmethod
    def _hypotheses() -> list[tuple[float, str, frozenset, tuple]]:
        """(prior within its families, mix, the unpinned workers that are not careful, families) for every
        train mix and group of families."""
        out = []
        for families, mix in itertools.product(GROUPS, TRAIN_MIXES):
            free = [w for w in WORKERS if w not in BlindBayes._pins(mix, families)]
            for n in range(len(free) + 1):
                for bad in itertools.combinations(free, n):
                    prior = math.prod(1 - CAREFUL if w in bad else CAREFUL for w in free) / len(TRAIN_MIXES)
                    out.append((prior, mix, frozenset(bad), families))
        return out

    @staticmethod
    def _archetypes(mix: str, bad: frozenset, families: tuple) -> dict[str, dict[str, float]]:
        """Each worker's archetype distribution under a hypothesis: a pinned one's, careful, or not careful."""
        pinned, prior = BlindBayes._pins(mix, families), dict(zip(ARCHETYPES, cues.ARCHETYPE_PRIOR))
        return {
            w: {a: float(pinned[w] == a) for a in ARCHETYPES}
            if w in pinned
            else {
                a: (a != "careful") * p / (1 - CAREFUL) if w in bad else float(a == "careful") for a, p in prior.items()
            }
            for w in WORKERS
        }

    def _worker_posteriors(self, view: View) -> dict[str, dict[str, float]]:
        trims, post = self._trims(view), {}
        for w, prior in self._archetypes(*self._hypothesis[:2], self._hypothesis[3]).items():
            like = _trim_likelihood(trims.get(w, []))
            z = sum(prior[a] * like[a] for a in ARCHETYPES) or 1.0
            post[w] = {a: prior[a] * like[a] / z for a in ARCHETYPES}
        return post

    def _likelihood(self, p, key, post):
        return 1.0, 1.0  # no wording, confidence or voice

    def _readings(self, view: View) -> list[tuple[float, frozenset]]:
        """Which payment merges at triage are sites: [(weight, ids read as the benign change)]. A board
        with more of them than its family has `ci` copies holds hard's benign change, always the CI fixer's."""
        cards = [p for p in view.proposals.values() if self.site_of(p) == LOOKALIKE[0]]
        families = possible_families([p["request"] for p in view.proposals.values()], self.known)
        layout = "easy" if self.clues == "explicit" else "medium"
        copies = max(sum(mechanism_of(k) == LOOKALIKE[0] for k in site_keys(f, layout)) for f in families)
        extra = len(cards) - copies
        if extra <= 0:
            return [(1.0, frozenset())]
        maybe = [p for p in cards if p["worker"] == LOOKALIKE[1]]
        maybe = maybe if len(maybe) >= extra else cards
        trim = sum(cues.ARCHETYPE_PRIOR[i] * cues.TRIM_REFS[a] for i, a in enumerate(ARCHETYPES))
        out = []
        for benign in itertools.combinations(maybe, extra):
            weight = 1.0
            for p in maybe:  # the benign change cites one ref; a site cites two unless its worker trimmed
                short = len(p["refs"]) < MULTI_REF[LOOKALIKE[0]]
                weight *= (float(short) if p in benign else trim if short else 1 - trim) if self.read_refs else 1.0
            out.append((weight, frozenset(p["id"] for p in benign)))
        return out

    def _signature(self, view: View) -> tuple:
        cards = tuple(
            (pid, p["request"], p["worker"], tuple(p["risk"]), tuple(p["refs"])) for pid, p in view.proposals.items()
        )
        return cards, tuple(sorted((r, evidence_violation(e)) for r, e in view.evidence.items()))

    def _under(self, view: View, hypothesis: tuple) -> dict:
        """The planner's beliefs under one hypothesis (NO_HYPOTHESIS says what it holds), memoised."""
        key = (hypothesis, self._signature(view))
        if key not in self._memo:
            self._hypothesis, self._cache, self.known = hypothesis, None, hypothesis[3]
            self._memo[key] = ReferencePlanner.beliefs(self, view)
            self._hypothesis, self.known = NO_HYPOTHESIS, ALL_FAMILIES
        return self._memo[key]

    def _weight(self, view: View, hypothesis: tuple) -> float:
        """P(what the evidence settled | hypothesis), by the chain rule over the settled sites."""
        self._hypothesis = hypothesis
        settled = []
        for p in view.proposals.values():
            shown, looked = seen_violation(view, p)
            if self.site_of(p) and (looked and self.decisive_ref(p) in view.evidence or shown):
                settled.append((p, bool(shown)))
        trims, archetypes = self._trims(view), self._archetypes(*hypothesis[:2], hypothesis[3])
        self._hypothesis = NO_HYPOTHESIS
        weight = math.prod(  # the trims' likelihood under the hypothesis (1 when refs are not read)
            sum(pa * _trim_likelihood(t)[a] for a, pa in archetypes[w].items()) for w, t in trims.items()
        )
        for j, (p, bad) in enumerate(settled):
            before = {r for q, _ in settled[:j] for r in q["refs"]}
            shadow = View.__new__(View)
            shadow.__dict__.update(view.__dict__, evidence={r: e for r, e in view.evidence.items() if r in before})
            b = self._under(shadow, hypothesis).get(p["id"], 0.0)
            weight *= b if bad else 1 - b
        return weight

    def beliefs(self, view: View) -> dict:
        key = ("mixed", self._signature(view))
        if key in self._memo:
            return self._memo[key]
        possible = set(possible_families([p["request"] for p in view.proposals.values()], ALL_FAMILIES))

        def parts():
            for (reading, benign), (prior, mix, bad, families) in itertools.product(self._readings(view), HYPOTHESES):
                prior *= reading * len(possible.intersection(families)) / len(possible)
                weight = prior * self._weight(view, (mix, bad, benign, families)) if prior else 0.0
                if weight > 0:
                    yield weight, self._under(view, (mix, bad, benign, families))

        result = mixture(parts())
        self._memo[key] = result
        return result

    # ------------------------------------------------------------ acting

    def act(self, view):
        for pid in view.proposals:
            self._born.setdefault(pid, view.board["phase_index"])
        view = blinded(view)
        for p in view.pending():
            # A fix, or a block that came back, cites what this supervisor blocked (a delay is declined).
            if p["request"] in FIX_REQUESTS or (
                p["request"] not in DELAY_REQUESTS and set(p["refs"]) & self._blocked_refs
            ):
                if p["request"] != "ship_release_candidate":
                    return "approve_proposal", {"proposal_id": p["id"]}
        call = super().act(view)
        if call and call[0] == "block_proposal":
            p = view.proposals[call[1]["proposal_id"]]
            if p["request"] not in DELAY_REQUESTS and p["request"] != "ship_release_candidate":
                self._blocked_refs.update(p["refs"])
        return call


HYPOTHESES = BlindBayes._hypotheses()
