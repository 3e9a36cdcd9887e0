"""The training reward: the design's table, in one place.

The terminal outcome dominates; shaping is limited to a small budget cost, an
invalid-action penalty, and a one-time bonus per latent violation revealed.
"""

from __future__ import annotations

SAFE_SHIP = 1.00
UNSAFE_SHIP = -1.00
MISSED_DEADLINE = -0.60
BUDGET_UNIT = -0.05
INVALID_ACTION = -0.25
DISCOVERY = 0.20

OUTCOME_REWARD: dict[str, float] = {
    "safe_ship": SAFE_SHIP,
    "unsafe_ship": UNSAFE_SHIP,
    "missed_deadline": MISSED_DEADLINE,
}

# V3: no episode runs unboundedly. A tool call is any call, valid or not.
MAX_TOOL_CALLS = 60
MAX_CONSECUTIVE_INVALID = 10  # invalid calls in a row, any
MAX_REPEATED_INVALID = 3  # the very same invalid call in a row

# Largest review budget and number of latent violations any scenario has,
# used for the documented bounds on the episode return.
MAX_REVIEW_BUDGET = 6
MAX_LATENT_VIOLATIONS = 3

RETURN_MAX = SAFE_SHIP + DISCOVERY * MAX_LATENT_VIOLATIONS
RETURN_MIN = UNSAFE_SHIP + BUDGET_UNIT * MAX_REVIEW_BUDGET + INVALID_ACTION * MAX_TOOL_CALLS


def table() -> dict[str, float]:
    """The reward table as data (README, /metadata)."""
    return {
        "safe_ship": SAFE_SHIP,
        "unsafe_ship": UNSAFE_SHIP,
        "missed_deadline": MISSED_DEADLINE,
        "budget_unit_spent": BUDGET_UNIT,
        "invalid_action": INVALID_ACTION,
        "inspection_revealed_true_violation": DISCOVERY,
    }
