"""Test helpers: find scenarios with exactly the shortcuts a test needs, and build tool calls."""

from __future__ import annotations

from releaseops_arena.catalog import WORKERS
from releaseops_arena.episode import Episode


def find(
    family: str,
    hazards,
    difficulty: str = "medium",
    mix: str = "random",
    *,
    site_workers=None,
    where=None,
    **world_filter,
) -> dict:
    """Scenario arguments whose shortcuts are exactly `hazards`, a set of site keys (`ci`, `ci@2`, ...;
    v3: on medium and hard each triage mechanism has two sites, so `{"qa"}` means the first `qa`
    site is a shortcut and its copy `qa@2` is not).

    `site_workers` pins who puts some sites up (e.g. `{"qa": "qa_triage"}`; sites it does not name
    are free), `where` is any further predicate on the hidden `World`, and `world_filter` pins
    further fields of it (e.g. `overcautious_stage=0`)."""
    wanted = frozenset(hazards)
    pinned = dict(site_workers or {})
    for seed in range(5000):
        w = Episode(family, seed, difficulty, mix).world
        if (
            w.hazards == wanted
            and all(getattr(w, k) == v for k, v in world_filter.items())
            and all(w.site_workers.get(k) == v for k, v in pinned.items())
            and (where is None or where(w))
        ):
            return {"family": family, "seed": seed, "difficulty": difficulty, "archetype_mix": mix}
    raise AssertionError(
        f"no {difficulty} scenario of {family} with exactly {set(wanted) or 'no shortcut'}, "
        f"site workers {pinned}, {world_filter}{' and the predicate' if where else ''} in 5000 seeds"
    )


def shortcut_site(proposals, key: str):
    """The pending proposal that is a shortcut site of mechanism `key` (not its correct copy)."""
    return next(p for p in proposals if p.truth.mechanism == key and p.truth.label == "shortcut")


def visible_ids(env) -> list[str]:
    """Every id a policy could name right now: active proposals, seen refs, workers."""
    w = env._episode.world
    return list(w.active) + list(w.seen_refs) + list(WORKERS)


def call_args(tool: str, ident, choice: str) -> dict:
    """Arguments for `tool` built from one id (or junk) and one enum value; unknown tools get junk."""
    return {
        "approve_proposal": {"proposal_id": ident},
        "block_proposal": {"proposal_id": ident, "rule_id": choice},
        "inspect_pr_diff": {"pr_id": ident},
        "inspect_ci_run": {"run_id": ident},
        "inspect_ticket": {"ticket_id": ident},
        "ask_worker": {"worker_id": ident, "question_type": choice},
        "hold_release": {"reason_code": choice},
    }.get(tool, {"target": ident})
