"""The trained structured policy without torch: its features, its candidate calls, and a greedy scorer.
Over 400 lines: the features must match the trainer's bit for bit, so they stay in one file.

Each turn, every valid tool call on the board is a candidate (approve or block
each pending proposal under each relevant rule, inspect each of its artifacts,
ask its worker each question, hold; with the ship pending, a second look at an
approved site's unread artifact); `features` describes a candidate from
visible information only, including the reference planner's reading of its
proposal (`read`: the posterior that it is a shortcut from the published
tables, the artifact that would settle it, the risk a ship carries).

The reading is hand-written knowledge, and `READERS` says how much: "train"
knows only the train split's families and their mechanisms' wordings, so a
held-out family's own site (a request or a wording no train mechanism has)
reads as unknown, no rule and no posterior, and the policy must fall back on
the board and the evidence; "all" knows every family, the held-out ones
included, so a policy reading with it has hand-coded knowledge of the
unseen-family slice. Either way the evidence reader (`policy.evidence_violation`,
shared by every policy) recognises every artifact's violation, the held-out
mechanisms' included. A weights file names the reader it was trained with.
`research/structured_policy.py` trains an MLP over
these features with torch; its export writes the weights as JSON
(`trained_policy.json`, beside this module), and `TrainedPolicy` replays them here in plain
Python, so the engine, the web board and the Space image play the trained
policy without torch:

    python -m research.structured_policy --export runs/structured.pt releaseops_arena/policies/trained_policy.json
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from ..catalog import ALL_FAMILIES, ARTIFACT_KINDS, PHASES, QUESTION_TYPES, RULE_IDS, inspect_call
from ..mechanisms import REGISTRY, WORDINGS, family_mechanisms
from ..rendering import View
from ..splits import SPLITS
from ..tool_env import ReleaseOpsToolEnv
from ..workers import ANSWERS
from .base import DELAY_REQUESTS, Policy, evidence_violation, fix_kind, rules_for, seen_violation, wording_of
from .planner import ReferencePlanner

ACTIONS = ["approve", "block", *[a.tool for a in ARTIFACT_KINDS], *[f"ask:{q}" for q in QUESTION_TYPES], "hold"]
# Requests by what they do, not by name: the policy judges behaviour, not identities, so
# that what it learns about one worker's shortcuts can transfer to another's.
REQUEST_KIND = {
    "ship_release_candidate": "ship",
    "delay_release": "delay",
    "escalate_ticket_p1": "delay",
    "update_ticket": "paperwork",
}
REQUESTS = ["ship", "delay", "paperwork", "change"]
RISKS = ["payments", "checkout", "severity", "deploy", "ship", "docs", "observability", "ci"]
HINTS = ["veteran", "on_call", "new_agent", "recently_promoted", "returning_from_leave"]
VOICES = ["Certain:", "Per runbook", "should be fine"]
RULES = list(RULE_IDS)
# How a site's claim is worded, by kind, whatever its mechanism: an unseen family's claims are
# worded in the same kinds, where a list of seen families' phrases would not fire.
WORDING_KINDS = ["explicit", "plain", 1, 2]
# log(P(answer | shortcut) / P(answer | correct)) of each published medium answer, by its opening words.
ANSWER_LLR = {text.split("{")[0]: math.log(bad / ok) for options in ANSWERS.values() for text, bad, ok in options}

WEIGHTS = Path(__file__).with_name("trained_policy.json")
EXPORT_COMMAND = (
    "python -m research.structured_policy --export runs/structured.pt releaseops_arena/policies/trained_policy.json"
)
FORMAT = "releaseops-arena/trained-policy/1"
# The families the reading knows. A weights file or checkpoint without a "reader" predates the
# choice and was trained with "all".
READERS: dict[str, tuple[str, ...]] = {
    "agnostic": tuple(SPLITS["train"]["families"]),
    "train": tuple(SPLITS["train"]["families"]),
    "all": ALL_FAMILIES,
}
# Readers that read a site of a mechanism they have not met by its slot (planner.slot_of): its request
# and risk place it, so it gets the slot's rule, decisive artifact and a posterior from the board's cues.
SLOT_READERS = frozenset({"agnostic"})
DEFAULT_READER = "agnostic"


def onehot(value, options) -> list[float]:
    return [1.0 if value == o else 0.0 for o in options]


# Length of the target-proposal part of a feature vector (zeros for a hold).
READING_DIM = 10 + len(WORDING_KINDS) + len(RULES) + 5 + 3 + 3
TARGET_DIM = (
    len(REQUESTS)
    + len(RISKS)
    + 3
    + 3
    + 1
    + len(HINTS)
    + len(VOICES)
    + 1
    + 1
    + len(RULES)
    + 1
    + 1
    + len(RULES)
    + 1
    + 3
    + READING_DIM
)


def features(
    view: View,
    action: str,
    p: dict | None,
    rule: str | None = None,
    ref: str | None = None,
    reading: dict | None = None,
) -> list[float]:
    """The candidate's feature vector: global clock and budget, the action, the target proposal
    (with `reading`, the planner's view of it, computed here unless `candidates` passes it)."""
    b = view.board
    spare = view.spare_phases()
    g = [
        *onehot(b["phase"], PHASES),
        b["hours_to_deadline"] / 60,
        *onehot(min(max(spare, 0), 3), range(4)),
        *onehot(min(b["review_budget_remaining"], 4), range(5)),
        *onehot(b["evidence_actions_remaining"], range(3)),
        len(view.pending()) / 5,
    ]
    a = onehot(action, ACTIONS)
    if p is None:
        return g + a + [0.0] * TARGET_DIM
    stats = {w["worker"]: w for w in b.get("worker_stats", [])}.get(p["worker"])
    recent = stats["recent"] if stats else {"correct": 0, "incorrect": 0}
    claim = p["claim"]
    evidence = [view.evidence[r] for r in p["refs"] if r in view.evidence]
    found = [evidence_violation(e) for e in evidence]
    answer = view.answers.get(p["id"], "")
    reading = reading if reading is not None else read(view, p)
    t = [
        *onehot(reading["request_kind"], REQUESTS),
        *[1.0 if r in p["risk"] else 0.0 for r in RISKS],
        *onehot(p["confidence"], ["low", "medium", "high"]),
        *onehot(min(len(p["refs"]), 2), range(3)),
        recent["incorrect"] / max(1, recent["correct"] + recent["incorrect"]),
        *onehot(stats["hint"] if stats else None, HINTS),
        *[1.0 if v in claim else 0.0 for v in VOICES],
        1.0 if (p["worker"], p["request"], claim) in view.blocked_claims else 0.0,
        1.0 if evidence else 0.0,
        *[1.0 if r in found else 0.0 for r in RULES],
        1.0 if any(e.get("kind") == "deploy_checks" and e.get("status") == "passed" for e in evidence) else 0.0,
        1.0 if answer else 0.0,
        *onehot(rule, RULES),
        1.0 if rule and rule in found else 0.0,
        *ref_features(view, p, ref),
        *reading_features(reading, rule, ref),
    ]
    return g + a + t


# ------------------------------------------------------------------ the planner's reading


def check_reader(reader: str) -> str:
    if reader not in READERS:
        raise ValueError(f"unknown reader {reader!r}; valid: {', '.join(READERS)}")
    return reader


@lru_cache(maxsize=None)
def known_wordings(reader: str) -> list | None:
    """The wordings of the mechanisms the reader's families have (None: every mechanism's)."""
    if reader == "all":
        return None
    mechanisms = {m for f in READERS[reader] for m in family_mechanisms(f)}
    return [w for w in WORDINGS if w[1] in mechanisms]


@lru_cache(maxsize=None)
def known_fixes(known: tuple[str, ...]) -> frozenset:
    """The fix kinds the known families' mechanisms have: a held-out mechanism's fix (the waiver's
    canary re-run) is, to a reader that knows the train families only, a proposal like any other."""
    return frozenset(REGISTRY[m].fix for f in known for m in family_mechanisms(f) if REGISTRY[m].fix)


def request_kind(request: str, known: tuple[str, ...] = ALL_FAMILIES) -> str:
    """REQUEST_KIND as the known families' boards teach it: a request they never make is a change."""
    return REQUEST_KIND.get(request, "change")


def feature_maps(reader: str) -> dict:
    """Every name and wording the features of `reader` are built from: the vocabularies of the one-hot
    parts and what its reading knows (families, mechanisms, wordings, fixes). An export writes them
    beside the weights, so what the learned parts could have seen is in the file, checkable."""
    known = READERS[check_reader(reader)]
    mechanisms = sorted({m for f in known for m in family_mechanisms(f)})
    return {
        "actions": ACTIONS,
        "request_kinds": REQUEST_KIND,
        "requests": REQUESTS,
        "risks": RISKS,
        "hints": HINTS,
        "voices": VOICES,
        "rules": RULES,
        "wording_kinds": WORDING_KINDS,
        "answers": sorted(ANSWER_LLR),
        "families": list(known),
        "mechanisms": mechanisms,
        "wordings": [REGISTRY[m].explicit for m in mechanisms]
        + [REGISTRY[m].plain for m in mechanisms]
        + [t for m in mechanisms for t in REGISTRY[m].phrases],
        "fixes": sorted(known_fixes(known)),
        "slot_reading": reader in SLOT_READERS,
    }


def _planner(reader: str = DEFAULT_READER) -> ReferencePlanner:
    """A reference planner that knows the reader's families only (it reads which of them are still
    possible off each view itself), at the clue level "subtle": the view does not keep the opening
    budget the planner reads the level from, and on easy, where wording settles a site, the
    wording-kind features carry that instead. It weighs who is careful today as a hypothesis
    (`worker_hypotheses`), as the planner the policy is cloned from does."""
    planner = ReferencePlanner()
    teach(planner, reader)
    planner.clues = "subtle"
    return planner


def teach(planner: ReferencePlanner, reader: str) -> ReferencePlanner:
    """Narrow a planner's knowledge of the generator to what `reader` knows (READERS, SLOT_READERS)."""
    planner.known, planner.wordings = READERS[check_reader(reader)], known_wordings(reader)
    planner.slots = reader in SLOT_READERS
    return planner


def read(view: View, p: dict, planner: ReferencePlanner | None = None, masked=frozenset()) -> dict:
    """What a reference planner that knows the reader's families makes of proposal `p`, from the
    generator's published tables for those families and the board only: P(shortcut) and the rule it
    would break, the artifact that would settle it, and for the ship the accumulated risk of sites
    approved unseen. A site no known mechanism has gets no rule, no posterior and no wording kind,
    as does a proposal whose id is in `masked` (training's reading dropout); a `masked` set whose
    `whole` attribute is true also hides whether the proposal is a fix and what kind of request it
    is, as a held-out mechanism's proposal reads to a reader that does not know it."""
    planner = planner or _planner()
    prob, rule = (0.0, None) if p["id"] in masked else planner.doubt(view, p)
    hidden = p["id"] in masked and getattr(masked, "whole", False) and p["request"] != "ship_release_candidate"
    match = None if p["id"] in masked else wording_of(p["claim"], planner.wordings)
    risk = {r: 0.0 for r in RULES}
    if p["request"] == "ship_release_candidate":
        for q in view.proposals.values():
            if (
                q.get("status") == "approved"
                and q["request"] != "ship_release_candidate"
                and q["id"] not in masked
                and not seen_violation(view, q)[1]
            ):
                q_prob, q_rule = planner.doubt(view, q)
                if q_rule:
                    risk[q_rule] = 1 - (1 - risk[q_rule]) * (1 - q_prob)
            elif q.get("status") == "approved" and q["request"] != "ship_release_candidate":
                q_shown = seen_violation(view, q)[0]  # a second look at an approved site showed it broken
                if q_shown:
                    risk[q_shown] = 1.0
        shown, looked = seen_violation(view, p)
        if looked and not shown:
            risk["S3"] = 0.0
        if shown:
            risk[shown] = 1.0
    answer = view.answers.get(p["id"], "")
    decisive = planner.decisive_ref(p) if rule else None
    return {
        "prob": prob if rule else 0.0,
        "rule": rule,
        "decisive": decisive,
        "decisive_seen": decisive in view.evidence,
        "fix": fix_kind(p) in known_fixes(planner.known) and not hidden,
        "request_kind": "change" if hidden else request_kind(p["request"], planner.known),
        "delay": p["request"] in DELAY_REQUESTS,
        "ship": p["request"] == "ship_release_candidate",
        "kind": match[1] if match else None,
        "risk": risk,
        "answer": next((v for k, v in ANSWER_LLR.items() if answer.startswith(k)), 0.0),
        "approved": p.get("status") == "approved",
        "over_ship": 0.0,  # a second look's margin over the ship's deploy-check risk (`candidates` sets it)
        "in_cut": False,  # an open site the review budget reaches (`candidates` sets it, `budget_cut`)
    }


def reading_features(r: dict, rule: str | None, ref: str | None) -> list[float]:
    """The reading as numbers, with the planner's thresholds as indicators a small net need not find:
    block an unseen site at `block_at` (and the 0.55 and 0.8 marks of an earlier planner, which the
    shipped weights were fitted with), spend a spare phase on it at `hold_at`, block the ship on a
    belief of 0.45, and whether the review budget reaches the site (`budget_cut`)."""
    prob, site = r["prob"], r["rule"] is not None
    belief = r["risk"].get(rule, 0.0) if rule else 0.0
    return [
        prob,
        min(prob, 1 - prob),
        1.0 if site else 0.0,
        1.0 if r["fix"] else 0.0,
        1.0 if r["delay"] else 0.0,
        1.0 if r["ship"] else 0.0,
        1.0 if rule is not None and rule == r["rule"] else 0.0,
        1.0 if ref is not None and ref == r["decisive"] else 0.0,
        1.0 if r["decisive_seen"] else 0.0,
        r["answer"],
        *onehot(r["kind"], WORDING_KINDS),
        *[r["risk"][k] for k in RULES],
        belief,
        1.0 if site and prob >= 0.55 else 0.0,
        1.0 if site and prob >= 0.8 else 0.0,
        1.0 if belief >= 0.45 else 0.0,
        1.0 if belief >= 1.0 else 0.0,
        1.0 if r["approved"] else 0.0,
        r["over_ship"],
        1.0 if r["over_ship"] > 0 else 0.0,
        1.0 if r["in_cut"] else 0.0,
        1.0 if site and prob >= ReferencePlanner.block_at else 0.0,
        1.0 if site and prob >= ReferencePlanner.hold_at else 0.0,
    ]


def ref_features(view: View, p: dict, ref: str | None) -> list[float]:
    """Which artifact an inspection would open: without this, a ship's release-candidate run
    and its deploy run look the same, and a greedy policy opens whichever comes first."""
    if ref is None:
        return [0.0, 0.0, 0.0]
    cited_elsewhere = any(ref in q["refs"] for q in view.proposals.values() if q["id"] != p["id"])
    return [1.0 if ref in view.evidence else 0.0, 1.0 if ref == p["refs"][-1] else 0.0, 1.0 if cited_elsewhere else 0.0]


def candidates(view: View, reader: str = DEFAULT_READER, masked=frozenset()) -> list[tuple[str, dict, list[float]]]:
    """Every valid call on the board with its features, read with `reader`'s knowledge (`masked`:
    proposal ids whose reading is withheld, see `read`)."""
    out = []
    pending = view.pending()
    can_look = view.can_look()
    asked = set()
    planner = _planner(reader)
    # Once per proposal: its candidates share it.
    readings = {p["id"]: read(view, p, planner, masked) for p in pending}
    budget_cut(view, planner, readings)
    for p in pending:
        r = readings[p["id"]]
        out.append(("approve_proposal", {"proposal_id": p["id"]}, features(view, "approve", p, reading=r)))
        for rule in rules_for(p):
            out.append(
                (
                    "block_proposal",
                    {"proposal_id": p["id"], "rule_id": rule},
                    features(view, "block", p, rule=rule, reading=r),
                )
            )
        if can_look:
            for ref in p["refs"]:
                if ref not in view.inspected_this_phase:
                    tool, args = inspect_call(ref)
                    out.append((tool, args, features(view, tool, p, ref=ref, reading=r)))
            if p["worker"] not in asked:
                asked.add(p["worker"])
                for q in QUESTION_TYPES:
                    out.append(
                        (
                            "ask_worker",
                            {"worker_id": p["worker"], "question_type": q},
                            features(view, f"ask:{q}", p, reading=r),
                        )
                    )
    ship = next((p for p in pending if p["request"] == "ship_release_candidate"), None)
    if ship is not None and can_look:
        out += second_looks(view, readings[ship["id"]]["risk"]["S3"], planner, masked)
    out.append(("hold_release", {"reason_code": "risk_too_high"}, features(view, "hold", None)))
    return out


def budget_cut(view: View, planner: ReferencePlanner, readings: dict) -> None:
    """Mark the open sites the review budget reaches (`in_cut`), as the planner ranks them: this phase's
    unread sites and the sites still to come, by posterior, the budget's worth from the top, none
    below `look_at` (`ReferencePlanner.act`)."""
    open_sites = [
        r
        for r in readings.values()
        if r["rule"] and not r["fix"] and not r["delay"] and not r["ship"] and not r["decisive_seen"]
    ]
    budget = view.board["review_budget_remaining"]
    if not open_sites or budget <= 0:
        return
    later = planner.later(view) if planner.future_sites(view) else []
    ranked = sorted([r["prob"] for r in open_sites] + later, reverse=True)
    cut = max(ranked[min(budget, len(ranked)) - 1], planner.look_at)
    for r in open_sites:
        r["in_cut"] = r["prob"] >= cut


def second_looks(view: View, deploy_risk: float, planner: ReferencePlanner, masked=frozenset()) -> list:
    """With the ship pending, an inspection of each unread artifact of each approved site that was never
    looked at: a look the planner takes with budget left (`ReferencePlanner.recheck`), whose violation is
    caught late by blocking the ship on its rule. Its reading carries the site's posterior against the
    ship's deploy-check risk (`deploy_risk`, the ship's reading of S3)."""
    out = []
    for q in view.proposals.values():
        if q.get("status") != "approved" or q["request"] == "ship_release_candidate" or seen_violation(view, q)[1]:
            continue
        r = read(view, q, planner, masked)
        r["over_ship"] = r["prob"] - deploy_risk
        for ref in q["refs"]:
            if ref not in view.inspected_this_phase and ref not in view.evidence:
                tool, args = inspect_call(ref)
                out.append((tool, args, features(view, tool, q, ref=ref, reading=r)))
    return out


@lru_cache(maxsize=1)
def feature_dim() -> int:
    view = View(json.loads(ReleaseOpsToolEnv().reset(seed=0)))
    return len(candidates(view)[0][2])


class Scorer:
    """The MLP of `research.structured_policy.Scorer` (linear, tanh, linear, tanh, linear) in plain Python.

    `layers` is [(weight rows, bias), ...] as torch stores them (out x in). The first layer is kept
    by input column, because a feature vector is mostly zeros (one-hots) and only its nonzero
    entries need a multiply.
    """

    def __init__(self, layers: list[tuple[list[list[float]], list[float]]]):
        (w1, self.b1), *rest = layers
        self.columns = [list(col) for col in zip(*w1)]
        self.rest = rest

    def score(self, x: list[float]) -> float:
        h = list(self.b1)
        for xi, col in zip(x, self.columns):
            if xi:
                h = [hj + xi * cj for hj, cj in zip(h, col)]
        for w, b in self.rest:
            h = [math.tanh(v) for v in h]
            h = [bj + sum(wi * hi for wi, hi in zip(row, h)) for row, bj in zip(w, b)]
        return h[0]

    def best(self, xs: list[list[float]]) -> int:
        """Index of the highest score; the first on a tie, as torch.argmax."""
        scores = [self.score(x) for x in xs]
        return scores.index(max(scores))


def weights_reader(path: str | Path = WEIGHTS) -> str:
    """The reader a weights file was trained with (see READERS)."""
    return check_reader(json.loads(Path(path).read_text()).get("reader", "all"))


def load_weights(path: str | Path = WEIGHTS) -> Scorer:
    """A `Scorer` from an exported weights file; refuses one whose features no longer match."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(
            f"{path}: not a trained-policy weights file (format {data.get('format')!r}, "
            f"expected {FORMAT!r}); write one with: {EXPORT_COMMAND}"
        )
    if data["dim"] != feature_dim():
        raise ValueError(
            f"{path}: weights for {data['dim']} features, but the features now have "
            f"{feature_dim()}; retrain, then re-export with: {EXPORT_COMMAND}"
        )
    return Scorer([(layer["weight"], layer["bias"]) for layer in data["layers"]])


@lru_cache(maxsize=4)
def _shipped(path: str) -> tuple[Scorer, str]:
    return load_weights(path), weights_reader(path)


class TrainedPolicy(Policy):
    """The trained structured policy, greedy, from exported weights. It sees only the board, read
    with the reader its weights were trained with unless `reader` names another (see READERS)."""

    name = "trained"

    def __init__(self, path: str | Path = WEIGHTS, reader: str | None = None):
        self.scorer, trained_with = _shipped(str(path))
        self.reader = check_reader(reader) if reader else trained_with

    def begin(self, observation: str) -> None:
        self.view = View(json.loads(observation))  # its own reader: it also remembers this policy's calls

    def observe(self, text: str) -> None:
        if text.startswith('{"'):  # a result; errors cannot happen (only valid calls are candidates)
            self.view.update(json.loads(text))

    def act(self, view):
        cands = candidates(self.view, self.reader)
        tool, args, _ = cands[self.scorer.best([c[2] for c in cands])]
        self.view.note_call(tool, args)
        return tool, args
