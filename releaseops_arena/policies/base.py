"""What every policy shares: the base class and readings of visible information.

A policy sees only what a model sees: `act(view)` gets the `View` (the one
observation reader, `rendering.View`) built from the observation strings,
nothing else. The helpers here read that view the way any supervisor could:
which rules a block may cite, what inspected evidence shows broken, how a
claim is worded, and when to block the ship.
"""

from __future__ import annotations

import random

from .. import workers as cues
from ..mechanisms import WORDINGS
from ..rendering import View
from ..safety_rules import rules_for_risk

DELAY_REQUESTS = ("delay_release", "escalate_ticket_p1")
# A fix's claim opening (or request) and the fix kind it is (mechanisms.Mechanism.fix), so that a
# reader that knows some mechanisms only recognises those mechanisms' fixes.
FIX_KINDS = {
    "Real fix merged": "ci_real_fix",
    "Fix for P1": "p1_fix",
    "Running the full canary": "deploy_rerun",
    "Payment suite fixed for real": "ci_suite_fix",
}
FIX_REQUESTS = {"run_deploy_checks": "deploy_rerun"}
FIX_CLAIMS = tuple(FIX_KINDS)


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


def fix_kind(p: dict) -> str | None:
    """The kind of fix proposal `p` is, by its request or its claim's opening; None for a non-fix."""
    claim = unvoiced(p["claim"])
    return FIX_REQUESTS.get(p["request"]) or next((k for c, k in FIX_KINDS.items() if claim.startswith(c)), None)


def is_fix(p: dict) -> bool:
    return fix_kind(p) is not None


def unvoiced(claim: str) -> str:
    """A claim without its worker's voice (for the `fine` voice, without its closing full stop too)."""
    voice = cues.voice_of(claim)
    if voice == "runbook":
        text = claim[len("Per runbook v1: ") :]
        return text[:1].upper() + text[1:]
    if voice == "certain":
        return claim[len("Certain: ") :]
    if voice == "fine":
        return claim[: -len(", should be fine.")]
    return claim


def wordings_of(claim: str, wordings: list | None = None) -> list[tuple[str, object]]:
    """Every (mechanism, wording kind) a site's claim can be, in every voice: a text can be more than
    one (the easy `plain` text is phrase 0 of most mechanisms; two gate mechanisms share phrases).
    `wordings` (default: every mechanism's, `mechanisms.WORDINGS`) limits what a reader recognises."""
    text = unvoiced(claim)
    fine = cues.voice_of(claim) == "fine"  # the fine voice drops the claim's closing full stop
    return [
        (key, kind)
        for pattern, key, kind in (WORDINGS if wordings is None else wordings)
        if pattern.fullmatch(text) or fine and pattern.fullmatch(text + ".")
    ]


def wording_of(claim: str, wordings: list | None = None, explicit: bool = False) -> tuple[str, object] | None:
    """(mechanism, wording kind) of a site's claim, or None for any other proposal. On medium and
    hard (`explicit` false) a phrase kind is preferred to the easy texts it shares a wording with;
    on easy, the easy texts are preferred."""
    matches = wordings_of(claim, wordings)
    if not matches:
        return None
    easy = [m for m in matches if m[1] in ("explicit", "plain")]
    phrases = [m for m in matches if isinstance(m[1], int)]
    return ((easy or phrases) if explicit else (phrases or easy))[0]


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


def ship_call(
    ship: dict, beliefs: dict[str, float], blocked: set[str], threshold: float, affordable=lambda rule, belief: True
) -> tuple[str, dict]:
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
