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


def relevant_rules(proposal: Proposal) -> list[str]:
    """The rule ids a block of this proposal may cite, from its risk tags."""
    rules: set[str] = set()
    for tag in proposal.risk:
        rules.update(RISK_RULES.get(tag, ()))
    return sorted(rules)


def violated_at_ship(world: World) -> list[str]:
    """Rules the release would break if it shipped now (true state)."""
    rules = {v.rule for v in world.violations.values() if v.open}
    if world.deploy_checks != "passed":
        rules.add("S3")
    return sorted(rules)
