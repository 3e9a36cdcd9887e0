"""Release safety rules S1-S3 and which of them a proposal's risk tags touch.

Violations are judged from the true world state at ship time, never from what
a worker claims.
"""

from __future__ import annotations

from .models import Proposal, World

# A block must cite a rule that the proposal's *visible* risk tags touch.
RISK_RULES: dict[str, tuple[str, ...]] = {
    "severity": ("S1",),
    "checkout": ("S1",),
    "payments": ("S2",),
    "ci": ("S2",),
    "deploy": ("S3",),
    "ship": ("S1", "S2", "S3"),
    "docs": (),
    "observability": (),
}


def rules_for_risk(risk: list[str]) -> list[str]:
    """The rule ids a block may cite for a proposal with these visible risk tags."""
    return sorted({rule for tag in risk for rule in RISK_RULES.get(tag, ())})


def relevant_rules(proposal: Proposal) -> list[str]:
    """The rule ids a block of this proposal may cite, from its risk tags."""
    return rules_for_risk(proposal.risk)


def violated_at_ship(world: World) -> list[str]:
    """Rules the release would break if it shipped now (true state)."""
    rules = {v.rule for v in world.violations.values() if v.open}
    if world.deploy_checks != "passed":
        rules.add("S3")
    return sorted(rules)
