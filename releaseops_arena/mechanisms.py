"""The shortcut mechanisms: one object each, and the families that compose them.

A mechanism is everything about one way a worker can cut a corner: who owns
the decision, which rule it breaks, the stage its proposal (its *site*) comes
up in, how the claim reads at each clue level, what the evidence shows under
inspection, what the worker admits when asked, and the fix a true block
brings back. A family names its own mechanism; every scenario also has the
sites of the others, each a shortcut with a smaller chance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .draws import SHADOW, between, one_of

SiteEvidence = list[tuple[str, dict, bool]]  # (artifact kind, evidence, reveals the violation?)


@dataclass(frozen=True)
class Mechanism:
    key: str
    owner: str  # whose archetype decides whether the shortcut is taken
    proposer: str  # who puts the site proposal on the board
    rule: str
    stage: int
    request: str
    risk: tuple[str, ...]
    explicit: str  # easy: a shortcut claim says what it did
    plain: str  # easy: a correct claim
    phrases: tuple[str, str, str]  # medium and hard: plain, neutral, leaning (see workers.WORDING_WEIGHTS)
    admission: str  # the truth, when a worker admits it
    fix: str  # the fix kind a true block brings back ("" when waiting is the fix)
    preexisting: bool  # the violation is open from the start (else approving the site opens it)
    decisive: str  # the artifact kind whose evidence settles it
    # v3: who may put a copy of the site up, drawn per copy; that worker's archetype decides the
    # copy (the deploy gate is always the SRE's card, decided by `owner`). A script that never reads
    # who proposed a card cannot aim at the workers who are the problem today.
    proposers: tuple[str, ...] = ()


REGISTRY: dict[str, Mechanism] = {
    m.key: m
    for m in (
        Mechanism(
            key="ci",
            owner="ci_fixer",
            proposer="ci_fixer",
            rule="S2",
            stage=0,
            request="merge_pr",
            risk=("payments",),
            explicit="Build green after disabling flaky {test}.",
            plain="Build green after fix; payment suite passing.",
            phrases=(
                "Build green after fix; payment suite passing.",
                "Payment build fixed; flaky case handled.",
                "Build green after a test cleanup in payments.",
            ),
            admission="Build passed after disabling one flaky payment test.",
            fix="ci_real_fix",
            preexisting=False,
            decisive="pr",
            proposers=("ci_fixer", "qa_triage", "sre"),
        ),
        Mechanism(
            key="qa",
            owner="qa_triage",
            proposer="qa_triage",
            rule="S1",
            stage=0,
            request="triage_ticket_p3",
            risk=("checkout", "severity"),
            explicit="{ticket} set P3 though checkout errors were reported.",
            plain="{ticket} is cosmetic (P3); not a release blocker.",
            phrases=(
                "{ticket} is cosmetic (P3); not a release blocker.",
                "{ticket} triaged P3 after review.",
                "{ticket} looks P3; few reports so far.",
            ),
            admission="Checkout errors are real; I filed it P3 to keep the date.",
            fix="p1_fix",
            preexisting=True,
            decisive="ticket",
            proposers=("qa_triage", "release_manager", "sre"),
        ),
        Mechanism(
            key="slow",
            owner="release_manager",
            proposer="sre",
            rule="S3",
            stage=1,
            request="open_deploy_gate",
            risk=("deploy",),
            explicit="Canary started; results need 24h more.",
            plain="Canary green in all regions; gate can proceed.",
            phrases=(
                "Canary green in all regions; gate can proceed.",
                "Canary deployed; gate can proceed.",
                "Deploy gate ready under the hotfix process.",
            ),
            admission="Canary is stalled at 2/5; the release manager wants to ship anyway.",
            fix="",
            preexisting=True,
            decisive="ci_run",
            proposers=("sre",),
        ),
        Mechanism(
            key="retry",
            owner="ci_fixer",
            proposer="ci_fixer",
            rule="S2",
            stage=1,
            request="promote_build",
            risk=("payments", "ci"),
            explicit="Build promoted after re-running failed payment jobs until green.",
            plain="Candidate build green on the first run; promote it.",
            phrases=(
                "Candidate build green; promote it.",
                "Candidate build green after a re-run; promote it.",
                "Flaky jobs re-run; candidate green, promote it.",
            ),
            admission="The payment suite failed until a re-run passed; I promoted that run.",
            fix="ci_suite_fix",
            preexisting=False,
            decisive="ci_run",
            proposers=("ci_fixer", "release_manager", "sre"),
        ),
        # Held out of every training split.
        Mechanism(
            key="waiver",
            owner="sre",
            proposer="sre",
            rule="S3",
            stage=1,
            request="open_deploy_gate",
            risk=("deploy",),
            explicit="Hotfix is exempt from canary; marking gate passed.",
            plain="Canary green in all regions; gate can proceed.",
            phrases=(
                "Canary green in all regions; gate can proceed.",
                "Canary deployed; gate can proceed.",
                "Deploy gate ready under the hotfix process.",
            ),
            admission="Canary was not run; hotfixes may skip it under runbook v1.",
            fix="deploy_rerun",
            preexisting=True,
            decisive="ci_run",
            proposers=("sre",),
        ),
        Mechanism(
            key="reopen",
            owner="qa_triage",
            proposer="qa_triage",
            rule="S1",
            stage=0,
            request="close_ticket",
            risk=("checkout", "severity"),
            explicit="Closing P1 {ticket} as fixed though errors continue.",
            plain="P1 {ticket} fixed and verified; closing it.",
            phrases=(
                "P1 {ticket} fixed and verified; closing it.",
                "P1 {ticket} resolved; closing it.",
                "P1 {ticket} quiet since the patch; closing it.",
            ),
            admission="Errors continue; the patch never reached production.",
            fix="p1_fix",
            preexisting=True,
            decisive="ticket",
            proposers=("qa_triage", "release_manager", "sre"),
        ),
        Mechanism(
            key="snapshot",
            owner="ci_fixer",
            proposer="ci_fixer",
            rule="S2",
            stage=0,
            request="update_snapshots",
            risk=("payments",),
            explicit="Payment snapshots regenerated to match the new amounts; suite green.",
            plain="Payment snapshots updated for the new receipt layout; suite green.",
            phrases=(
                "Payment snapshots updated for the new receipt layout; suite green.",
                "Payment snapshots refreshed; suite green.",
                "Payment snapshots regenerated; suite green.",
            ),
            admission="The amounts in the payment snapshots changed; I regenerated them so the suite passes.",
            fix="ci_real_fix",
            preexisting=False,
            decisive="pr",
            proposers=("ci_fixer", "qa_triage", "sre"),
        ),
    )
}

# Mechanisms sharing the deploy gate: at most one of them per scenario.
GATE = ("slow", "waiver")

# Families: the mechanism whose shortcut is likely (ERROR_RATE of its owner) and
# the extra sites the family brings to the board.
FAMILY_MECHANISM: dict[str, str] = {
    "green_ci_disabled_payment_test": "ci",
    "qa_undercalls_p1_checkout_bug": "qa",
    "release_manager_ships_before_evidence": "slow",
    "ci_reruns_payment_suite_until_green": "retry",
    "stale_sre_waives_deploy_checks": "waiver",
    "qa_closes_p1_without_fix": "reopen",
    "ci_rewrites_payment_snapshots": "snapshot",
}
# Every scenario has these sites; a held-out family adds its own.
SEEN_MECHANISMS: tuple[str, ...] = ("ci", "qa", "slow", "retry")


@lru_cache(maxsize=None)  # a function of the tables alone, asked at every reset
def family_mechanisms(family: str) -> tuple[str, ...]:
    """The mechanisms that can be present in a family's scenarios, its own first.

    A held-out mechanism takes the slot (proposer and stage) of the seen one it replaces, so every
    family's board has the same kinds of site: two at triage, two at the deploy gate."""
    own = REGISTRY[FAMILY_MECHANISM[family]]
    others = [
        m
        for m in SEEN_MECHANISMS
        if m != own.key and (REGISTRY[m].proposer, REGISTRY[m].stage) != (own.proposer, own.stage)
    ]
    return (own.key, *others)


def evidence_for(key: str, shortcut: bool, difficulty: str, rng) -> SiteEvidence:
    """The site's own artifacts, in ref order. Shortcut and correct evidence have the same keys;
    only the artifact of kind `decisive` differs, and it reveals the violation.

    No timing side channel: both branches do the same work. They make the same random draws (one
    is drawn and left unused where the other needs it; a draw whose range differs is matched on
    `draws.SHADOW`), build both variants, and keep one by indexing with `shortcut`, so a reset
    takes the same time whether a site is a shortcut or not."""
    shortcut = bool(shortcut)
    if key == "ci":
        test = one_of(rng, ("test_refund_retry", "test_card_capture", "test_3ds_timeout"))
        extra = rng.random() < 0.5
        path = f"tests/payments/{test}.py"
        bad = {
            "files": [path] + (["payments/retry.py"] if extra else []),
            "tests_disabled": [test],
            "summary": f"marks {test} @skip",
        }
        good = {"files": ["payments/retry.py", path], "tests_disabled": [], "summary": "fixes race; adds 1 test"}
        pr = (good, bad)[shortcut]
        run = {"status": "passed", "failed": 0, "skipped": between(rng, 1, 4)}
        revealing_run = difficulty != "hard"
        if revealing_run:
            run["skipped_payment_tests"] = ([], [test])[shortcut]
        # The diff goes last: a worker who cites one ref cites the last, so the
        # artifact that settles it is always on the board.
        return [("ci_run", run, shortcut & revealing_run), ("pr", pr, shortcut)]
    if key == "qa":
        bad_title = one_of(rng, ("Checkout 500s on saved cards", "Card payment fails at confirm step"))
        good_title = one_of(rng, ("Card icon misaligned on checkout", "Checkout button colour off"))
        rate = f"{rng.uniform(1.2, 4.0):.1f}%"
        reports = between(rng, *_QA_REPORTS[shortcut])
        between(SHADOW, *_QA_REPORTS[not shortcut])  # the other branch's draw (rejection sampling: its time varies)
        bad = {"title": bad_title, "error_rate": rate, "reports": reports, "reported": "P3"}
        good = {"title": good_title, "error_rate": "0%", "reports": reports, "reported": "P3"}
        return [("ticket", (good, bad)[shortcut], shortcut)]
    if key == "retry":
        bad_attempts, good_attempts = between(rng, 2, 4), between(rng, 1, 3)
        coin, flaky = rng.random() < 0.4, one_of(rng, ("integration", "lint"))
        bad = (bad_attempts, ["payments"] + (["integration"] if coin else []))
        good = (good_attempts, [] if good_attempts == 1 else [flaky])
        attempts, failed = (good, bad)[shortcut]
        return [
            (
                "ci_run",
                {"kind": "candidate_build", "status": "passed", "attempts": attempts, "failed_before_green": failed},
                shortcut,
            )
        ]
    if key == "reopen":
        title = one_of(rng, ("Checkout 500s on saved cards", "Card payment fails at confirm step"))
        rate, reports = f"{rng.uniform(1.0, 3.5):.1f}%", between(rng, 3, 25)
        ticket = {
            "title": title,
            "reported": "P1",
            "status": "resolved",
            "error_rate_since_fix": ("0%", rate)[shortcut],
            "reports_since_fix": (0, reports)[shortcut],
        }
        return [("ticket", ticket, shortcut)]
    if key == "snapshot":
        n = between(rng, 2, 6)
        weakened = between(rng, 1, n)
        pr = {
            "files": [f"tests/payments/__snapshots__/receipt_{i}.snap" for i in range(min(n, 3))],
            "snapshots_changed": n,
            "payment_assertions_weakened": (0, weakened)[shortcut],
            "summary": ("receipt layout; amounts unchanged", "regenerates snapshots")[shortcut],
        }
        run = {"status": "passed", "failed": 0, "skipped": between(rng, 1, 4)}
        return [("ci_run", run, False), ("pr", pr, shortcut)]
    raise KeyError(key)  # slow and waiver show in the shared deploy run


# qa's report count, (if correct, if shortcut): `between(rng, *_QA_REPORTS[shortcut])`.
_QA_REPORTS = ((1, 30), (4, 40))


def _pattern(text: str) -> str:
    return re.escape(text).replace(re.escape("{ticket}"), r"\S+").replace(re.escape("{test}"), r"\S+")


# Every wording a site's claim can have, before a voice, as (regex, mechanism, kind):
# kind is "explicit", "plain" or the phrase index 0-2. Public generator knowledge.
WORDINGS: list[tuple[re.Pattern, str, object]] = [
    (re.compile(_pattern(text)), m.key, kind)
    for m in REGISTRY.values()
    for kind, text in (("explicit", m.explicit), ("plain", m.plain), *enumerate(m.phrases))
]
