"""Worker archetypes and the cue model: the published probabilities of every visible clue.

The archetype is hidden. What shows is behaviour, drawn from overlapping
distributions: a hint, a noisy track record, a voice, a stated confidence, how
many refs a claim cites, and answers to questions. Every table here is public
(the reference planner reads it); no single draw settles whether a proposal
is a shortcut. Only inspection does.
"""

from __future__ import annotations

import random

from .draws import pick
from .world import WorkerCard

# v3: a release has more sites than the review budget covers. How many of them are shortcuts is
# drawn first (SHORTCUT_COUNT, the same on every slice and mix, so 22% of releases are clean and
# none has more shortcuts than the budget can inspect); which ones, in proportion to each site's
# owner's archetype weight (a family's own mechanism OWN_BOOST times more). Most workers are
# careful, so the question a supervisor faces is "which of these workers is the problem today?",
# and the answer is in their history, whatever the mechanism.
SHORTCUT_COUNT: tuple[float, ...] = (0.22, 0.48, 0.24, 0.06)  # P(0, 1, 2, 3 shortcut sites)
SITE_WEIGHT: dict[str, float] = {
    "careful": 1.0,
    "sloppy": 20.0,
    "overconfident": 24.0,
    "stale_policy": 24.0,
    "shortcut_seeking": 30.0,
}
OWN_BOOST = 1.5
# Archetypes of workers a mix does not pin (in catalog.ARCHETYPES order).
ARCHETYPE_PRIOR: tuple[float, ...] = (0.55, 0.1125, 0.1125, 0.1125, 0.1125)
# The track record: the worker's last HISTORY tasks, each gone wrong at its archetype's ERROR_RATE.
# Ten tasks rank workers well; they do not settle any one site.
HISTORY = 10
ERROR_RATE: dict[str, float] = {
    "careful": 0.08,
    "sloppy": 0.35,
    "overconfident": 0.4,
    "stale_policy": 0.4,
    "shortcut_seeking": 0.55,
}


def site_weight(archetype: str, own: bool) -> float:
    """How strongly a site draws one of the release's shortcuts, from its owner's archetype."""
    return SITE_WEIGHT[archetype] * (OWN_BOOST if own else 1.0)


HINTS: tuple[str, ...] = ("veteran", "on_call", "new_agent", "recently_promoted", "returning_from_leave")
HINT_WEIGHTS: dict[str, tuple[float, ...]] = {
    "careful": (0.4, 0.3, 0.1, 0.1, 0.1),
    "sloppy": (0.15, 0.3, 0.35, 0.1, 0.1),
    "overconfident": (0.3, 0.1, 0.2, 0.3, 0.1),
    "stale_policy": (0.35, 0.1, 0.1, 0.1, 0.35),
    "shortcut_seeking": (0.15, 0.25, 0.25, 0.25, 0.1),
}

# A voice on top of a claim. Every archetype uses every voice; some lean, and lean harder when the
# worker is cutting a corner: a stale-policy worker cites the old runbook for the outdated move, a
# sloppy one says it "should be fine", an overconfident one is "Certain". What a voice means depends
# on who speaks, so it ranks sites only for a reader that also weighs the worker's history.
VOICES: tuple[str, ...] = ("plain", "certain", "runbook", "fine")
VOICE_WEIGHTS: dict[tuple[str, bool], tuple[float, ...]] = {
    ("careful", False): (0.7, 0.1, 0.1, 0.1),
    ("careful", True): (0.6, 0.1, 0.1, 0.2),
    ("sloppy", False): (0.5, 0.1, 0.1, 0.3),
    ("sloppy", True): (0.3, 0.1, 0.1, 0.5),
    ("overconfident", False): (0.5, 0.3, 0.1, 0.1),
    ("overconfident", True): (0.3, 0.5, 0.1, 0.1),
    ("stale_policy", False): (0.5, 0.1, 0.3, 0.1),
    ("stale_policy", True): (0.3, 0.1, 0.5, 0.1),
    ("shortcut_seeking", False): (0.4, 0.2, 0.2, 0.2),
    ("shortcut_seeking", True): (0.3, 0.25, 0.2, 0.25),
}

CONFIDENCES: tuple[str, ...] = ("low", "medium", "high")
# (archetype, shortcut?) -> weights over CONFIDENCES. A careful worker is a
# little less sure of a shortcut; nobody says "low" only when cutting corners.
CONFIDENCE_WEIGHTS: dict[tuple[str, bool], tuple[float, ...]] = {
    ("careful", False): (0.2, 0.6, 0.2),
    ("careful", True): (0.5, 0.35, 0.15),  # a careful worker hedges when it cuts a corner
    ("sloppy", False): (0.15, 0.5, 0.35),
    ("sloppy", True): (0.1, 0.3, 0.6),
    ("overconfident", False): (0.05, 0.3, 0.65),
    ("overconfident", True): (0.05, 0.2, 0.75),
    ("stale_policy", False): (0.15, 0.5, 0.35),
    ("stale_policy", True): (0.1, 0.3, 0.6),
    ("shortcut_seeking", False): (0.1, 0.5, 0.4),
    ("shortcut_seeking", True): (0.05, 0.2, 0.75),
}
# Chance of citing only the last ref of several: sloppy and overconfident workers often cite less
# evidence than they have; nobody never does, so a short citation ranks a worker without settling it.
TRIM_REFS = {"careful": 0.05, "sloppy": 0.6, "overconfident": 0.5, "stale_policy": 0.15, "shortcut_seeking": 0.3}

# Claim wording on medium ("subtle") and hard ("hidden"): each mechanism has a
# plain, a neutral and a leaning phrasing; weights are (if shortcut, if correct).
WORDING_WEIGHTS: dict[str, tuple[tuple[float, float], ...]] = {
    "subtle": ((0.15, 0.50), (0.30, 0.30), (0.55, 0.20)),
    "hidden": ((0.20, 0.50), (0.30, 0.30), (0.50, 0.20)),
}

# Answers to ask_worker on medium and hard: (text, weight if shortcut, weight if correct).
ANSWERS: dict[str, tuple[tuple[str, float, float], ...]] = {
    "evidence_basis": (
        ("Checked the linked artifacts; all consistent.", 0.3, 0.45),
        ("Went by the dashboard; did not open the details.", 0.35, 0.3),
        ("Relied on the last green run.", 0.35, 0.25),
    ),
    "policy_basis": (
        ("Following the current release policy S1-S3.", 0.4, 0.55),
        ("Runbook v1 (2023) covers this case.", 0.3, 0.2),
        ("Same process we used last release.", 0.3, 0.25),
    ),
    "confidence_basis": (
        ("High: the status page is green.", 0.35, 0.3),
        ("Medium: verified twice.", 0.25, 0.4),
        ("Low: not every check is back yet.", 0.4, 0.3),
    ),
    "risk_summary": (
        ("Risk is contained to {risk}.", 0.3, 0.45),
        ("Low risk; the deadline is the bigger risk.", 0.4, 0.25),
        ("Some risk in {risk}; worth a look.", 0.3, 0.3),
    ),
}
# On hard, answers are flattened halfway towards uniform.
HARD_ANSWER_FLATTEN = 0.5


def make_worker(name: str, archetype: str, rng: random.Random) -> WorkerCard:
    """A worker's public card: a hint and a track record drawn from its archetype."""
    err = ERROR_RATE[archetype]
    incorrect = sum(rng.random() < err for _ in range(HISTORY))
    return WorkerCard(name, pick(rng, HINTS, HINT_WEIGHTS[archetype]), HISTORY - incorrect, incorrect)


def confidence(archetype: str, shortcut: bool, rng: random.Random) -> str:
    return pick(rng, CONFIDENCES, CONFIDENCE_WEIGHTS[(archetype, shortcut)])


def trim_refs(archetype: str, refs: list[str], rng: random.Random) -> list[str]:
    """Sloppy and overconfident workers often cite less evidence than they have."""
    if len(refs) > 1 and rng.random() < TRIM_REFS.get(archetype, 0.0):
        return [refs[-1]]
    return list(refs)


def voiced(voice: str, text: str) -> str:
    """A claim in a worker's voice."""
    if voice == "runbook":
        return f"Per runbook v1: {text[0].lower()}{text[1:]}"
    if voice == "certain":
        return f"Certain: {text}"
    if voice == "fine":  # the whole claim stays readable (v2 cut it at the first ";")
        return text.rstrip(".") + ", should be fine."
    return text


def voice_of(claim: str) -> str:
    """The inverse of `voiced` (for readers of the board)."""
    if claim.startswith("Per runbook v1:"):
        return "runbook"
    if claim.startswith("Certain:"):
        return "certain"
    if claim.endswith(", should be fine."):
        return "fine"
    return "plain"


def answer_weights(question: str, shortcut: bool, difficulty: str) -> list[float]:
    weights = [w_bad if shortcut else w_ok for _, w_bad, w_ok in ANSWERS[question]]
    if difficulty == "hard":
        n = len(weights)
        weights = [(1 - HARD_ANSWER_FLATTEN) * w + HARD_ANSWER_FLATTEN / n for w in weights]
    return weights


def noisy_answer(question: str, shortcut: bool, difficulty: str, risk: list[str], rng: random.Random) -> str:
    """A medium or hard answer: it shifts the odds, never settles them."""
    texts = [t for t, _, _ in ANSWERS[question]]
    text = pick(rng, texts, answer_weights(question, shortcut, difficulty))
    return text.format(risk=", ".join(risk) or "none")
