"""Test helpers: find scenarios with (or without) the family's hazard, play scripted lines."""

from __future__ import annotations

import json

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.episode import Episode

MIX = "random"


def find(family: str, hazard: bool, difficulty: str = "medium", mix: str = MIX, **world_filter) -> dict:
    """Scenario arguments whose hidden hazard flag is `hazard`."""
    for seed in range(500):
        ep = Episode(family, seed, difficulty, mix)
        w = ep.world
        if w.hazard == hazard and all(getattr(w, k) == v for k, v in world_filter.items()):
            return {"family": family, "seed": seed, "difficulty": difficulty, "archetype_mix": mix}
    raise AssertionError("no such scenario")


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
