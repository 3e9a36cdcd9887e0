"""The Task API's engine side: task indices, ranges, the evaluation secret and task resets."""

import pytest

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.catalog import BENCHMARK_VERSION
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
