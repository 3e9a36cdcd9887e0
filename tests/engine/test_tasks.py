"""The Task API's engine side: task indices, ranges, the evaluation secret and task resets."""

import pytest

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.catalog import BENCHMARK_VERSION, FAMILIES, MAX_SEED, SEED_RANGE, catalogue, check_seed
from releaseops_arena.episode import Episode
from releaseops_arena.splits import (
    EVALUATION_SPLITS,
    LIST_PREVIEW,
    MAX_RANGE,
    SPLITS,
    TASKS_PER_SPLIT,
    ReleaseTasks,
    reset_arguments,
    scenarios,
    start_episode,
    task_scenario,
    task_token,
)

TASKS = ReleaseTasks()


def test_task_i_is_the_ith_scenario_of_its_split_at_any_difficulty():
    for split in SPLITS:
        for difficulty in (None, "easy", "hard"):
            expected = list(scenarios(split, 30, difficulty))
            assert [task_scenario(split, i, difficulty) for i in range(30)] == expected
    spec = TASKS.get_task("unseen_mix", 7)
    assert spec == {
        "id": "unseen_mix/7",
        "split": "unseen_mix",
        "index": 7,
        **task_scenario("unseen_mix", 7),
        "benchmark_version": BENCHMARK_VERSION,
    }


def test_every_task_spec_carries_the_benchmark_version_which_a_reset_ignores():
    """Results of different benchmark versions are never mixed: a task says which world it belongs to."""
    assert BENCHMARK_VERSION == "v3"
    for split in SPLITS:
        specs = [TASKS.get_task(split, 0), *TASKS.list_tasks(split), *TASKS.get_task_range(split, -3)]
        assert {spec["benchmark_version"] for spec in specs} == {BENCHMARK_VERSION}
    spec = TASKS.get_task("train", 5)
    row = {key: spec[key] for key in ("split", "index", "benchmark_version")}
    assert reset_arguments(row) == {"split": "train", "index": 5}  # the version is not a reset argument
    assert ReleaseOpsToolEnv().reset(**row) == ReleaseOpsToolEnv().reset(**task_scenario("train", 5))


def test_splits_counts_previews_and_ranges():
    assert [s["name"] for s in TASKS.list_splits()] == list(SPLITS)
    assert {s["type"] for s in TASKS.list_splits() if s["name"] in EVALUATION_SPLITS} == {"test"}
    assert all(TASKS.num_tasks(split) == TASKS_PER_SPLIT for split in SPLITS)
    assert TASKS.list_tasks("train") == TASKS.get_task_range("train", 0, LIST_PREVIEW)
    assert [t["index"] for t in TASKS.get_task_range("heldout_seeds", -2)] == [TASKS_PER_SPLIT - 2, TASKS_PER_SPLIT - 1]
    assert TASKS.get_task_range("train", 5, 5) == []


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: TASKS.get_task("validation", 0), ValueError, "valid: train, heldout_seeds, unseen_family, unseen_mix"),
        (lambda: TASKS.num_tasks("test"), ValueError, "valid: train, heldout_seeds"),
        (lambda: TASKS.get_task("train", TASKS_PER_SPLIT), IndexError, "0..999999"),
        (lambda: TASKS.get_task("train", -1), IndexError, "0..999999"),
        (lambda: TASKS.get_task("train", "3"), IndexError, "must be an int"),
        (lambda: TASKS.get_task("train", True), IndexError, "must be an int"),
        (lambda: TASKS.get_task_range("train", 0, MAX_RANGE + 1), ValueError, f"at most {MAX_RANGE} tasks"),
        (lambda: task_scenario("train", 0, "extreme"), ValueError, "valid: easy, medium, hard"),
    ],
)
def test_bad_task_requests_are_refused_naming_what_is_valid(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_secret_salts_evaluation_tasks_only():
    private = ReleaseTasks(secret="operator-secret")
    for split in EVALUATION_SPLITS:
        token = task_token("operator-secret", split, 3)
        assert private.episode(split, 3, token=token).initial_observation != TASKS.episode(split, 3).initial_observation
        assert (
            private.episode(split, 3, token=token).initial_observation
            == private.episode(split, 3, token=token).initial_observation
        )
    # Training stays reproducible on every host, secret or not.
    assert private.episode("train", 3).initial_observation == TASKS.episode("train", 3).initial_observation


def test_a_task_reset_equals_the_explicit_scenario_and_mixing_both_is_refused():
    env = ReleaseOpsToolEnv()
    by_task = env.reset(split="heldout_seeds", index=11, difficulty="hard", prompt="ignored")
    assert by_task == ReleaseOpsToolEnv().reset(**task_scenario("heldout_seeds", 11, "hard"))
    # A generic client's reset seed beside a task changes nothing: the task fixes the world.
    assert env.reset(split="heldout_seeds", index=11, difficulty="hard", seed=0) == by_task
    with pytest.raises(ValueError, match="not both: got index and family"):
        env.reset(split="train", index=1, family="green_ci_disabled_payment_test")
    with pytest.raises(ValueError, match="index needs a split"):
        env.reset(index=1)
    episode, picked = start_episode({"split": "train", "index": 2}, TASKS)
    assert picked and episode.config == task_scenario("train", 2)


def test_with_a_secret_an_evaluation_task_is_played_only_with_its_token():
    """Else a second session could replay the very task another is playing and search it for a winning line."""
    private = ReleaseTasks(secret="operator-secret")
    right = task_token("operator-secret", "unseen_mix", 137, "hard")
    for token in (
        None,
        "",
        task_token("guess", "unseen_mix", 137, "hard"),
        task_token("operator-secret", "unseen_mix", 138, "hard"),
        task_token("operator-secret", "unseen_mix", 137),
    ):
        with pytest.raises(
            ValueError, match="evaluation splits are private: a reset of a unseen_mix task needs its token"
        ):
            private.episode("unseen_mix", 137, "hard", token=token)
    assert private.episode("unseen_mix", 137, "hard", token=right).config == private.scenario("unseen_mix", 137, "hard")
    assert private.episode("train", 137).config == task_scenario("train", 137)  # train needs none
    episode, picked = start_episode(
        {"split": "unseen_mix", "index": 137, "difficulty": "hard", "token": right}, private
    )
    assert picked and right not in str(episode.config) + episode.initial_observation
    assert TASKS.episode("unseen_mix", 137, token="anything").config == task_scenario("unseen_mix", 137)  # public draw


# ------------------------------------------------------------ seeds
# One range on every door: here the engine and the in-process reset; the board in tests/browser, /ws and
# HTTP reset in tests/server/test_bad_input.py. A float is refused even when whole: only the board's number
# field turns a whole float into an int (web_handlers.seed_of).
SEED0 = {"family": FAMILIES[0], "seed": 0, "difficulty": "medium", "archetype_mix": "random"}
BAD_SEEDS = [2.5, "2.5", 1e30, -5, "", True, 2**70, 2.0, MAX_SEED + 1, "9" * 19, " 7", [1]]


@pytest.mark.parametrize("seed", BAD_SEEDS, ids=repr)
def test_a_seed_outside_the_one_range_is_refused_naming_it_on_every_in_process_door(seed):
    doors = {
        "check_seed": check_seed,
        "reset": lambda s: ReleaseOpsToolEnv().reset(seed=s),
        "task columns": lambda s: start_episode({**SEED0, "seed": s}, TASKS),
        "Episode": lambda s: Episode(**{**SEED0, "seed": s}),
    }
    for door, call in doors.items():
        with pytest.raises(ValueError) as refused:
            call(seed)
        message = str(refused.value)
        assert message.startswith("seed must be " + SEED_RANGE) and len(message) <= 140, (door, message)
        assert "0000000000" not in message  # neither 1e30 nor 2**70 is quoted back as a giant integer


def test_a_seed_in_the_range_is_that_integer_on_every_in_process_door():
    import numpy

    assert SEED_RANGE == "a whole number from 0 to 2147483647" and MAX_SEED == 2**31 - 1
    for seed, value in ((0, 0), (MAX_SEED, MAX_SEED), ("0012", 12), (numpy.int64(25), 25)):
        assert check_seed(seed) == value and type(check_seed(seed)) is int
        assert reset_arguments({"seed": seed})["seed"] == value
    top = {**SEED0, "seed": MAX_SEED}
    assert ReleaseOpsToolEnv().reset(**top) == Episode(**top).initial_observation
    assert ReleaseOpsToolEnv().reset(seed=None) == ReleaseOpsToolEnv().reset()  # null: the default seed
    assert catalogue()["seed_range"] == [0, MAX_SEED]
