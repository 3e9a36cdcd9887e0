"""Test helpers: find scenarios with (or without) the family's hazard, play scripted lines."""

from __future__ import annotations

import json

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.episode import Episode
from releaseops_arena.mechanisms import FAMILY_MECHANISM

MIX = "random"


def find(family: str, hazard: bool, difficulty: str = "medium", mix: str = MIX, **world_filter) -> dict:
    """Scenario arguments whose only shortcut is the family's own mechanism (hazard) or that have none.

    `world_filter` pins further fields of the hidden `World` (e.g. `overcautious_stage=0`)."""
    if type(hazard) is not bool:
        raise TypeError(f"hazard is a bool (the family's own shortcut or none), got {hazard!r}")
    wanted = frozenset({FAMILY_MECHANISM[family]} if hazard else ())
    for seed in range(2000):
        w = Episode(family, seed, difficulty, mix).world
        if w.hazards == wanted and all(getattr(w, k) == v for k, v in world_filter.items()):
            return {"family": family, "seed": seed, "difficulty": difficulty, "archetype_mix": mix}
    raise AssertionError(f"no {difficulty} scenario of {family} with {'only its own' if hazard else 'no'} "
                         f"shortcut{' and ' + repr(world_filter) if world_filter else ''} in 2000 seeds")


def started(scenario: dict) -> tuple[ReleaseOpsToolEnv, dict]:
    env = ReleaseOpsToolEnv()
    board = json.loads(env.reset(**scenario))
    return env, board


def truth(env: ReleaseOpsToolEnv):
    """The hidden world (tests only)."""
    return env._episode.world


def pending(env: ReleaseOpsToolEnv) -> list[str]:
    w = truth(env)
    return [pid for pid in w.active if w.proposals[pid].status == "pending"]
