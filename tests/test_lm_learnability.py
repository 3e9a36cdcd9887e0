"""Hard-prompt mining for the language model's GRPO: only train tasks, only those the policy does not already solve."""

import pytest

pytest.importorskip("trl")


def test_mining_keeps_the_train_tasks_the_policy_does_not_solve_and_drops_the_solved_ones(tmp_path):
    from datasets import Dataset

    from releaseops_arena.splits import task_scenario
    from training.evaluate import run_episodes
    from training.lm_learnability import hard_tasks, task_rows

    start, n = 2000, 8
    scenarios = [task_scenario("train", i, "easy") for i in range(start, start + n)]
    naive, planner = ([r[0]["episode_return"] for r in run_episodes(p, scenarios, progress=False)]
                      for p in ("naive", "planner"))
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
    assert rows[0]["prompt"][0]["role"] == "user"  # the row is one training.make_dataset writes
