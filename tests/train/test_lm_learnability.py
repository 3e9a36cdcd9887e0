"""Hard-prompt mining for the language model's GRPO: only train tasks, only those the policy does not already solve."""

from pathlib import Path

import pytest

pytest.importorskip("trl")


def test_mining_keeps_the_train_tasks_the_policy_does_not_solve_and_drops_the_solved_ones(tmp_path):
    from datasets import Dataset

    from releaseops_arena.brief import prompt_messages
    from releaseops_arena.splits import task_scenario
    from research.lm_learnability import hard_tasks, task_rows
    from training.evaluate import run_episodes

    start, n = 2000, 8
    scenarios = [task_scenario("train", i, "easy") for i in range(start, start + n)]
    naive, planner = (
        [r[0]["episode_return"] for r in run_episodes(p, scenarios, progress=False)] for p in ("naive", "planner")
    )
    # solved: a clean safe ship (1.0) or the planner's return, whichever is higher
    planner_kept = hard_tasks("planner", start, n)["kept"]
    assert planner_kept == [start + k for k in range(n) if planner[k] < 1.0] and len(planner_kept) < n
    mined = hard_tasks("naive", start, n)
    assert mined["kept"] == [start + k for k in range(n) if naive[k] < max(planner[k], 1.0)]
    assert mined["kept"]  # the naive policy is worse than the planner somewhere: the check above is not vacuous
    assert mined["pool"] == [start, start + n]
    rows = Dataset.from_parquet(str(task_rows(mined["kept"], tmp_path / "hard.parquet")))
    assert rows["index"] == mined["kept"]
    assert set(rows["split"]) == {"train"} and set(rows["difficulty"]) == {"easy"}
    assert rows[0]["prompt"] == prompt_messages()  # the row is one training.make_dataset writes (the brief)


def test_replay_adds_the_pools_first_solved_tasks_never_a_hard_one():
    from research.lm_learnability import replayed

    mined = {"pool": [100, 110], "kept": [101, 104, 105]}
    assert replayed(mined, 0.0) == []
    assert replayed(mined, 1.0) == [100, 102, 103]
    assert replayed(mined, 2.0) == [100, 102, 103, 106, 107, 108]
    assert replayed(mined, 10.0) == [100, 102, 103, 106, 107, 108, 109]  # at most every solved task


def test_warm_starts_side_by_side_differ_by_seed_and_the_best_on_validation_is_kept(tmp_path):
    import multiprocessing as mp

    from research.lm_learnability import (
        SETTINGS,
        build_base,
        evaluation,
        one_thread_children,
        pick_warm_start,
        warm_conversations,
        warm_one,
    )

    cfg = {**SETTINGS, "hidden": 32, "layers": 1, "read_span": 8, "sft_seeds": 2}
    build_base(tmp_path / "base", cfg, 0)
    conversations = warm_conversations("planner", 3)
    jobs = [(s, tmp_path, cfg, conversations, 0.05, True) for s in (4, 5)]
    with one_thread_children(), mp.get_context("spawn").Pool(2) as pool:
        warms = pool.map(warm_one, jobs)
    assert [w["seed"] for w in warms] == [4, 5]
    assert [Path(w["dir"]).name for w in warms] == ["sft_seed4", "sft_seed5"]
    assert all(w["steps"] >= 1 and len(w["losses"]) == w["steps"] for w in warms)
    # different initialisations: the first step's loss already differs
    assert warms[0]["losses"][0] != warms[1]["losses"][0]
    for w in warms:  # each folder is a checkpoint the harness plays (on train tasks, as the selection does)
        w["validation"] = evaluation(w["dir"], 1, start=100_000, split="train")
        assert w["validation"]["episodes"] == 1
    # With processes > 1 the evaluations run in spawned workers, which must load the copy head themselves:
    # the same summary as played in this process.
    alone = evaluation(warms[0]["dir"], 2, start=100_000, split="train")
    assert evaluation(warms[0]["dir"], 2, workers=2, start=100_000, split="train") == alone
    warms[0]["validation"]["mean_return"]["mean"], warms[1]["validation"]["mean_return"]["mean"] = 0.2, 0.5
    assert pick_warm_start(warms)["seed"] == 5
    warms[0]["validation"]["mean_return"]["mean"] = 0.5  # a tie keeps the lower seed
    assert pick_warm_start(warms)["seed"] == 4
    assert pick_warm_start(warms[1:]) is warms[1]
