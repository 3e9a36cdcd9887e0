"""The training reward: the design's table, in one place.

The terminal outcome dominates; shaping is limited to a small budget cost, an
invalid-action penalty, and a one-time bonus per latent violation revealed.
The discovery bonuses are paid with the terminal reward, not on the step that
revealed them: a step reward must not say more than that step's evidence text.

Quitting never pays. A release counts as a missed deadline until it ends: the
reset's reward is that penalty (`OPENING_REWARD`), and the terminal step pays
the difference to the real outcome. So however a client keeps score (the sum
of step rewards with or without the reset's, the last step's reward,
`get_reward()`, `end_episode`, a socket closed mid-episode), an episode it
stops playing scores no better than the same episode held on to its deadline,
and a finished episode's rewards, the reset's included, still sum to its return.
"""

from __future__ import annotations

from .workers import SHORTCUT_COUNT

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
# The reset's reward: the outcome a release has until it ships. Constant, so it says nothing of the world.
OPENING_REWARD = MISSED_DEADLINE


def outcome_delta(outcome: str) -> float:
    """What the terminal step pays for its outcome, on top of the opening reward."""
    return round(OUTCOME_REWARD[outcome] - OPENING_REWARD, 6) + 0.0


# V3: no episode runs unboundedly. A tool call is any call, valid or not.
MAX_TOOL_CALLS = 60
MAX_CONSECUTIVE_INVALID = 10  # invalid calls in a row, any
MAX_REPEATED_INVALID = 3  # the very same invalid call in a row

# Largest review budget (easy) and number of latent violations any scenario can hold (one per
# shortcut site; a release has at most len(SHORTCUT_COUNT) - 1 of them), used for the bounds on
# the episode return.
MAX_REVIEW_BUDGET = 4
MAX_LATENT_VIOLATIONS = len(SHORTCUT_COUNT) - 1

# Attained: a safe ship after revealing as many violations as the budget can
# pay for (each reveal costs at least one budget unit).
RETURN_MAX = round(SAFE_SHIP + (DISCOVERY + BUDGET_UNIT) * min(MAX_REVIEW_BUDGET, MAX_LATENT_VIOLATIONS), 6)
# Sound: no episode goes lower (the worst outcome, the whole budget spent, and
# every call but the last invalid).
RETURN_MIN = round(UNSAFE_SHIP + BUDGET_UNIT * MAX_REVIEW_BUDGET + INVALID_ACTION * (MAX_TOOL_CALLS - 1), 6)


# The return by part: each part is a line of the table times the episode's
# count of its event. The parts sum to the episode return at every step (a
# test holds the engine to it), and the server's rubric tree names one child
# per part. Discoveries count only once paid, with the terminal reward; until
# the release ends, its outcome part is the opening reward (a missed deadline).
PARTS = {
    "outcome": lambda c: OUTCOME_REWARD[c["outcome"]] if c["outcome"] else OPENING_REWARD,
    "budget": lambda c: BUDGET_UNIT * c["budget_used"],
    "invalid_calls": lambda c: INVALID_ACTION * c["invalid_actions"],
    "discoveries": lambda c: DISCOVERY * c["discoveries_paid"],
}


def breakdown(counters: dict) -> dict[str, float]:
    """The return so far by part, from an episode's `reward_counters()`."""
    return {name: round(part(counters), 6) + 0.0 for name, part in PARTS.items()}  # + 0.0: no -0.0


_STEP_PARTS: dict[tuple, dict[str, float]] = {}


def step_parts(budget_spent: int, invalid: int, outcome: str | None, discoveries_paid: int) -> dict[str, float]:
    """One step's reward by part (an audit entry's `reward_parts`): the parts are linear in their
    counts, so a step's parts are PARTS over the step's own counts, with the terminal step's outcome
    part the difference to the opening reward. A fresh dict from a small cache: a step has few
    possible shapes, and this runs on every call."""
    key = (budget_spent, invalid, outcome, discoveries_paid)
    parts = _STEP_PARTS.get(key)
    if parts is None:
        parts = breakdown(
            {
                "outcome": outcome,
                "budget_used": budget_spent,
                "invalid_actions": invalid,
                "discoveries_paid": discoveries_paid,
            }
        )
        parts["outcome"] = outcome_delta(outcome) if outcome else 0.0
        _STEP_PARTS[key] = parts
    return dict(parts)


def opening_parts() -> dict[str, float]:
    """The reset's reward by part: the opening reward, all of it outcome."""
    return {name: OPENING_REWARD if name == "outcome" else 0.0 for name in PARTS}


# The largest single step reward: the terminal step of a safe ship pays back the opening
# reward and every discovery bonus at once (their budget costs fell on earlier steps), so a
# step can exceed RETURN_MAX. openenv.yaml's reward range is [RETURN_MIN, STEP_REWARD_MAX].
STEP_REWARD_MAX = round(outcome_delta("safe_ship") + DISCOVERY * min(MAX_REVIEW_BUDGET, MAX_LATENT_VIOLATIONS), 6)


def table() -> dict[str, float]:
    """The reward table as data (docs/environment.md, /metadata)."""
    return {
        "safe_ship": SAFE_SHIP,
        "unsafe_ship": UNSAFE_SHIP,
        "missed_deadline": MISSED_DEADLINE,
        "budget_unit_spent": BUDGET_UNIT,
        "invalid_action": INVALID_ACTION,
        "inspection_revealed_true_violation": DISCOVERY,
        "opening_reward": OPENING_REWARD,
    }
