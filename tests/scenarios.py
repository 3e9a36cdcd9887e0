"""Test helpers: find scenarios with exactly the shortcuts a test needs, and build tool calls."""

from __future__ import annotations

from releaseops_arena.catalog import WORKERS
from releaseops_arena.episode import Episode


def find(family: str, hazards, difficulty: str = "medium", mix: str = "random", **world_filter) -> dict:
    """Scenario arguments whose shortcuts are exactly `hazards` (a set of mechanism keys).

    `world_filter` pins further fields of the hidden `World` (e.g. `overcautious_stage=0`)."""
    wanted = frozenset(hazards)
    for seed in range(5000):
        w = Episode(family, seed, difficulty, mix).world
        if w.hazards == wanted and all(getattr(w, k) == v for k, v in world_filter.items()):
            return {"family": family, "seed": seed, "difficulty": difficulty, "archetype_mix": mix}
    raise AssertionError(f"no {difficulty} scenario of {family} with exactly {set(wanted) or 'no shortcut'} "
                         f"and {world_filter} in 5000 seeds")


def visible_ids(env) -> list[str]:
    """Every id a policy could name right now: active proposals, seen refs, workers."""
    w = env._episode.world
    return list(w.active) + list(w.seen_refs) + list(WORKERS)


def call_args(tool: str, ident, choice: str) -> dict:
    """Arguments for `tool` built from one id (or junk) and one enum value; unknown tools get junk."""
    return {"approve_proposal": {"proposal_id": ident}, "block_proposal": {"proposal_id": ident, "rule_id": choice},
            "inspect_pr_diff": {"pr_id": ident}, "inspect_ci_run": {"run_id": ident},
            "inspect_ticket": {"ticket_id": ident}, "ask_worker": {"worker_id": ident, "question_type": choice},
            "hold_release": {"reason_code": choice}}.get(tool, {"target": ident})
