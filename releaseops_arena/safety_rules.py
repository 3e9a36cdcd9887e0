"""Release safety rules S1-S3 and which of them a proposal's risk tags touch.

Violations are judged from the true world state at ship time, never from what
a worker claims.
"""

from __future__ import annotations

from .mechanisms import REGISTRY
from .world import Card, Proposal, World

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


def relevant_rules(card: Card) -> list[str]:
    """The rule ids a block of this proposal may cite, from its visible risk tags."""
    return rules_for_risk(card.risk)


def violated_at_ship(world: World) -> list[str]:
    """Rules the release would break if it shipped now (true state)."""
    rules = {v.rule for v in world.violations.values() if v.open}
    if world.deploy_checks != "passed":
        rules.add("S3")
    return sorted(rules)


def truly_violates(world: World, proposal: Proposal, rule: str) -> bool:
    """Whether approving this proposal now would break `rule` (true state).

    The ship breaks every rule the release would break if it shipped now; the
    deploy gate breaks S3 while the deploy checks have not passed; any other
    proposal breaks only its own mechanism's rule, and only if it is a shortcut.
    """
    t = proposal.truth
    if t.ships:
        return rule in violated_at_ship(world)
    if proposal.card.request == "open_deploy_gate":
        return rule == "S3" and world.deploy_checks != "passed"
    # Both tests always run (`&`, not `and`): a block's time must not say whether it was right.
    return (t.label == "shortcut") & (_RULE_OF.get(t.mechanism, "") == rule)


_RULE_OF = {key: m.rule for key, m in REGISTRY.items()}
