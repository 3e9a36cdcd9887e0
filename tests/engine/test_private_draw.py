"""The evaluation secret's draw: which family, difficulty and mix an evaluation index plays.

With a secret, the public arithmetic (`task_scenario`) must not name an evaluation task's
family or mix: within each block of one public cycle the secret shuffles the tasks, keeping
every block exactly balanced. Train, and every split without a secret, keep the public draw.
"""

import hashlib
import json
from collections import Counter
from itertools import product

import pytest

from releaseops_arena.catalog import DIFFICULTIES
from releaseops_arena.splits import (
    EVALUATION_SPLITS,
    SPLITS,
    TASKS_PER_SPLIT,
    ReleaseTasks,
    _private_block,
    private_task_scenario,
    scenarios,
    start_episode,
    task_scenario,
    task_token,
)

SECRET = "operator-secret"
BLOCKS = 2
# The public draw, pinned: sha256 of the JSON of the first 200 scenarios of every split.
PUBLIC_DRAW_SHA256 = "555ba02dec39d46cdcd2a52cd49b250484adbce72241d8dadf7b627f2c38c87f"


def block_size(split: str) -> int:
    spec = SPLITS[split]
    return len(spec["families"]) * len(DIFFICULTIES) * len(spec["mixes"])


def hidden(scenario: dict) -> tuple[str, str]:
    return scenario["family"], scenario["archetype_mix"]


@pytest.mark.parametrize("split", EVALUATION_SPLITS)
def test_the_public_arithmetic_predicts_the_secret_draw_no_better_than_chance(split):
    private = ReleaseTasks(secret=SECRET)
    indices = range(BLOCKS * block_size(split))
    pairs = [(task_scenario(split, i), private.scenario(split, i)) for i in indices]
    families = sum(p["family"] == s["family"] for p, s in pairs) / len(pairs)
    both = sum(hidden(p) == hidden(s) for p, s in pairs) / len(pairs)
    chance = 1 / len(SPLITS[split]["families"])
    assert families < 0.5 and abs(families - chance) < 0.2, (families, chance)
    assert both < 0.5, both
    # The seed is still the index's: the secret salts the world itself.
    assert all(p["seed"] == s["seed"] for p, s in pairs)


@pytest.mark.parametrize("split", EVALUATION_SPLITS)
def test_each_block_holds_every_family_difficulty_and_mix_exactly_once(split):
    spec, size = SPLITS[split], block_size(split)
    every = Counter(product(spec["families"], DIFFICULTIES, spec["mixes"]))
    private = ReleaseTasks(secret=SECRET)
    for block in (0, 1, 2, 7_000):
        drawn = [private.scenario(split, block * size + o) for o in range(size)]
        assert Counter((s["family"], s["difficulty"], s["archetype_mix"]) for s in drawn) == every
    last = private.scenario(split, TASKS_PER_SPLIT - 1)  # the last, partial block still draws
    assert last["seed"] == SPLITS[split]["seed_base"] + TASKS_PER_SPLIT - 1


def test_two_secrets_draw_different_assignments_and_one_secret_always_the_same():
    for split in EVALUATION_SPLITS:
        indices = range(BLOCKS * block_size(split))
        first = [ReleaseTasks(secret=SECRET).scenario(split, i) for i in indices]
        other = [ReleaseTasks(secret="another-secret").scenario(split, i) for i in indices]
        assert sum(a != b for a, b in zip(first, other)) > len(first) // 2
        _private_block.cache_clear()  # recomputed, not remembered
        assert [ReleaseTasks(secret=SECRET).scenario(split, i) for i in indices] == first
        assert [private_task_scenario(SECRET, split, i) for i in indices] == first
        # Blocks are shuffled apart: block 1 is not block 0 again.
        size = block_size(split)
        assert [hidden(s) for s in first[:size]] != [hidden(s) for s in first[size:]]


def test_difficulty_at_reset_retargets_the_level_of_the_secret_draw():
    private = ReleaseTasks(secret=SECRET)
    for split in EVALUATION_SPLITS:
        for i in range(30):
            drawn = private.scenario(split, i)
            assert private.scenario(split, i, "hard") == {**drawn, "difficulty": "hard"}
    with pytest.raises(ValueError, match="valid: easy, medium, hard"):
        private.scenario("heldout_seeds", 0, "extreme")
    with pytest.raises(IndexError, match="0..999999"):
        private.scenario("heldout_seeds", TASKS_PER_SPLIT)


def test_train_and_the_public_draw_are_unchanged():
    private, public = ReleaseTasks(secret=SECRET), ReleaseTasks()
    n = 200
    for split in SPLITS:
        expected = list(scenarios(split, n))
        assert [public.scenario(split, i) for i in range(n)] == expected
        assert [public.get_task(split, i)["family"] for i in range(n)] == [s["family"] for s in expected]
    assert [private.scenario("train", i) for i in range(n)] == list(scenarios("train", n))
    assert private.get_task("train", 5) == public.get_task("train", 5)
    # The public draw, pinned: the first 200 tasks of every split.
    draw = json.dumps({split: list(scenarios(split, n)) for split in SPLITS}, sort_keys=True)
    assert hashlib.sha256(draw.encode()).hexdigest() == PUBLIC_DRAW_SHA256


def test_the_task_spec_and_the_episode_are_the_secret_draw_and_still_need_their_token():
    private = ReleaseTasks(secret=SECRET)
    for split in EVALUATION_SPLITS:
        for i in (0, 5, 71, 123_456):
            scenario = private.scenario(split, i)
            spec = private.get_task(split, i)
            assert {key: spec[key] for key in scenario} == scenario
            episode = private.episode(split, i, token=task_token(SECRET, split, i))
            assert episode.config == scenario
            with pytest.raises(ValueError, match="needs its token"):
                private.episode(split, i, token=task_token("guess", split, i))
            level = scenario["difficulty"]
            row = {"split": split, "index": i, "difficulty": level, "token": task_token(SECRET, split, i, level)}
            episode, picked = start_episode(row, private)
            assert picked and episode.config == scenario


def test_dataset_rows_made_with_the_secret_carry_the_levels_it_draws(monkeypatch):
    from training.make_dataset import build

    monkeypatch.setenv("RELEASEOPS_EVAL_SECRET", SECRET)
    private = ReleaseTasks(secret=SECRET)
    for split in EVALUATION_SPLITS:
        rows = build(split, 24).to_list()
        assert [row["difficulty"] for row in rows] == [private.scenario(split, i)["difficulty"] for i in range(24)]
        for row in rows:  # each row plays its task's secret draw, at its own level
            episode, _ = start_episode(row, private)
            assert episode.config == private.scenario(split, row["index"])
