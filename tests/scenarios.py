"""Test helpers: find scenarios with (or without) the family's hazard, play scripted lines."""

from __future__ import annotations

import json

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.episode import Episode
from releaseops_arena.scenario_builder import FAMILY_MECHANISM

MIX = "random"


def find(family: str, hazard: bool, difficulty: str = "medium", mix: str = MIX, **world_filter) -> dict:
    """Scenario arguments whose only shortcut is the family's own (hazard) or that have none."""
    wanted = {FAMILY_MECHANISM[family]} if hazard else set()
    for seed in range(2000):
        ep = Episode(family, seed, difficulty, mix)
        w = ep.world
        if w.hazards == wanted and all(getattr(w, k) == v for k, v in world_filter.items()):
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
