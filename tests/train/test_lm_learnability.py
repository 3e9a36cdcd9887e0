"""Hard-prompt mining for the language model's GRPO: only train tasks, only those the policy does not already solve."""

import json
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


def test_mining_unfinished_keeps_only_the_episodes_the_policy_abandons():
    from releaseops_arena.policies.base import Policy
    from releaseops_arena.splits import task_scenario
    from research.lm_learnability import hard_tasks
    from training.evaluate import POLICY_FACTORIES, make_policy, register_policy, run_episodes

    class Quitter(Policy):
        """Naive, but it stops at once on some boards: the engine scores those as missed deadlines."""

        name = "quitter"

        def __init__(self):
            self.inner = make_policy("naive")

        def begin(self, observation: str) -> None:
            self.quit = len(observation) % 2 == 0
            self.inner.begin(observation)

        def observe(self, text: str) -> None:
            self.inner.observe(text)

        def act(self, view):
            return None if self.quit else self.inner.act(view)

    register_policy("quitter", Quitter)
    try:
        start, n = 2000, 8
        scenarios = [task_scenario("train", i, "easy") for i in range(start, start + n)]
        abandoned = [start + k for k, r in enumerate(run_episodes("quitter", scenarios)) if not r[0]["terminated"]]
        assert 0 < len(abandoned) < n  # both kinds of board are in the pool: the checks below are not vacuous
        unfinished = hard_tasks("quitter", start, n, keep="unfinished")["kept"]
        assert unfinished == abandoned
        assert set(unfinished) <= set(hard_tasks("quitter", start, n)["kept"])
        assert hard_tasks("naive", start, n, keep="unfinished")["kept"] == []  # naive plays every release out
        with pytest.raises(ValueError, match="below_reference, unfinished"):
            hard_tasks("naive", start, 1, keep="missed")
    finally:
        POLICY_FACTORIES.pop("quitter")


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


def test_the_recovery_probe_plays_greedily_up_to_the_first_refusal_and_samples_from_there(tmp_path, monkeypatch):
    from research import copy_model
    from research.lm_recovery import ResampledPolicy, first_refusal
    from training.llm_policy import LLMPolicy
    from training.tiny_model import build_tokenizer, save

    tokenizer = build_tokenizer()
    save(tmp_path / "ck", tokenizer, copy_model.build_pointer_model(tokenizer, hidden=32, layers=1, seed=0))
    copy_model.register()
    seen = []
    monkeypatch.setattr(LLMPolicy, "_generate", lambda self: seen.append(self.temperature) or {"role": "assistant"})
    policy = ResampledPolicy(str(tmp_path / "ck"), temperature=0.9, greedy_calls=2)
    policy.last_tool = "approve_proposal"
    for _ in range(2):  # a second episode starts greedy again
        policy.begin("{}")
        for _call in range(4):  # each call's result is observed before the next turn
            policy._generate()
            policy.observe("ok")
    assert seen == [0.0, 0.0, 0.9, 0.9] * 2
    steps = [{"tool": "approve_proposal"}, {"tool": "inspect_ticket", "error": "refused"}, {"tool": "x", "error": "e"}]
    assert first_refusal({"steps": steps}) == 1
    assert first_refusal({"steps": steps[:1]}) is None


def test_the_report_counts_the_continuations_that_finish_and_the_tasks_where_none_does():
    import json

    from research.lm_learnability import RESULTS
    from research.lm_report import _recovery_probe, markdown

    probe = {
        "checkpoint": "runs/x/sft",
        "start": 100_000,
        "tasks": 10,
        "samples": 2,
        "temperature": 1.0,
        "continuations": 7,
        "finished": 1,
        "failed": [
            {"first_refusal": 1, "from": {"1": [["missed_deadline", -1.85, 2]], "2": [["safe_ship", 1.15, 1]]}},
            {"first_refusal": 3, "from": {"3": [["missed_deadline", -1.7, 2]], "4": [["missed_deadline", -2.1, 2]]}},
            {"first_refusal": None, "from": {}},  # failed without a refused call: nothing to sample from
        ],
    }
    text = " ".join(_recovery_probe({"recovery_probe": probe}))
    assert "fails 3, 2 of them after a refused call (the first refused call is call 2 in 1, 4 in 1)" in text
    assert "1 of 7 continuations finished the release with a ship, on 1 of the 2 tasks" in text
    assert "On the other 1, none of the 4 continuations did" in text
    assert _recovery_probe({}) == []
    results = json.loads(RESULTS.read_text())  # the published report carries the probe it measured
    p = results["recovery_probe"]
    # the probe's own count and the report's, recounted from the outcomes it kept, agree
    text = markdown(results)
    assert f"{p['finished']} of {p['continuations']} continuations finished the release with a ship" in text
    assert f"{p['prefix_drift']} of them strayed from the greedy episode" in text


def test_set_takes_a_bare_word_and_refuses_an_unknown_mining_rule_before_any_training(monkeypatch, capsys):
    from research import lm_learnability

    seen = {}

    def fake_run(minutes, out, seed, n_eval, settings, difficulty):
        seen.update(settings)
        raise SystemExit(0)

    monkeypatch.setattr(lm_learnability, "run", fake_run)
    with pytest.raises(SystemExit):
        lm_learnability.main(["--preset", "published", "--set", "mine_keep=unfinished", "mine_tasks=340"])
    assert seen["mine_keep"] == "unfinished" and seen["mine_tasks"] == 340
    seen.clear()
    with pytest.raises(SystemExit) as stop:
        lm_learnability.main(["--set", "mine_keep=missed"])
    assert stop.value.code == 2 and not seen  # refused by the parser: nothing ran
    assert "expected one of below_reference, unfinished" in capsys.readouterr().err


def test_a_replicate_of_the_recipe_is_rendered_from_its_numbers_and_says_when_the_draw_outweighs_grpo():
    import copy
    import json

    from research.lm_learnability import RESULTS
    from research.lm_report import _replicates, markdown

    results = json.loads(RESULTS.read_text())
    rep = results["replicates"][0]  # the published report carries its replicates
    text = markdown(results)
    before, after = rep["warm start (SFT)"]["mean_return"], rep["SFT + GRPO"]["mean_return"]
    assert f"The same recipe with seed {rep['seed']} (`{rep['command']}`), on the same held-out tasks" in text
    assert f"warm start {before['mean']:.3f} [{before['ci95'][0]:.3f}, {before['ci95'][1]:.3f}]" in text
    assert f"after GRPO {after['mean']:.3f} [{after['ci95'][0]:.3f}, {after['ci95'][1]:.3f}]" in text
    # a replicate whose warm start lands where the published one did carries no claim about the draw
    same = copy.deepcopy(results)
    same["replicates"] = [same["replicates"][0]]
    same["replicates"][0]["warm start (SFT)"] = same["eval"]["warm start (SFT)"]
    same["replicates"][0]["SFT + GRPO"] = same["eval"]["SFT + GRPO"]
    (line,) = [x for x in _replicates(same) if x]
    assert "depends on the warm start drawn" not in line and "intervals overlapping" in line
    assert line.endswith(
        "LM target (valid calls ≥ 90% before and after, return intervals apart, after above): "
        "not met (intervals overlapping)."
    )
    assert _replicates({"eval": results["eval"]}) == []


def test_a_replicate_on_other_tasks_names_them_and_meets_the_lm_target_only_when_both_hold():
    import copy
    import json

    from research.lm_learnability import RESULTS
    from research.lm_report import _replicates

    results = json.loads(RESULTS.read_text())
    rep = copy.deepcopy(results["replicates"][0])
    before, after = rep["warm start (SFT)"], rep["SFT + GRPO"]
    for m in (before, after):
        m["episodes"] = 2000
        m["invalid_rate"] = {"rate": 0.05, "ci95": [0.045, 0.055], "n": 16000}
    before["mean_return"] = {"mean": 0.70, "ci95": [0.66, 0.74]}
    after["mean_return"] = {"mean": 0.85, "ci95": [0.82, 0.88]}
    rep["note"] = "A fourth seed."
    results["replicates"] = [rep]
    (line,) = [x for x in _replicates(results) if x]
    assert f"(`{rep['command']}`), on held-out tasks 2000-3999: warm start 0.700 [0.660, 0.740] " in line
    assert (
        "(valid calls 95.0%, missed deadlines" in line and "after GRPO 0.850 [0.820, 0.880] (valid calls 95.0%)" in line
    )
    assert "intervals apart." in line and " A fourth seed. LM target" in line and line.endswith("after above): met.")
    after["invalid_rate"]["rate"] = 0.12  # the gain, but with too many refused calls
    (line,) = [x for x in _replicates(results) if x]
    assert line.endswith("not met (valid calls under 90% after).")
    after["invalid_rate"]["rate"] = 0.05
    after["mean_return"] = {"mean": 0.55, "ci95": [0.52, 0.58]}  # GRPO made it worse, intervals apart
    (line,) = [x for x in _replicates(results) if x]
    assert "intervals apart." in line and line.endswith("not met (intervals after below).")


def test_grpo_selection_lists_every_saved_model_once_and_keeps_the_best_on_validation(tmp_path):
    from research.lm_learnability import grpo_checkpoints, pick_grpo_step

    done = tmp_path / "done"  # reached --steps 15, saving every 5: the Trainer's last folder is the final model too
    for step in (10, 5, 15):
        (done / f"checkpoint-{step}").mkdir(parents=True)
    (done / "checkpoint-3.json").write_text("{}")  # not a folder: not a model
    assert grpo_checkpoints(done, 15) == [
        (5, done / "checkpoint-5"),
        (10, done / "checkpoint-10"),
        (15, done / "checkpoint-15"),
    ]
    cut = tmp_path / "cut"  # stopped by the clock at step 12: the final model is the run's folder itself
    for step in (5, 10):
        (cut / f"checkpoint-{step}").mkdir(parents=True)
    assert grpo_checkpoints(cut, 12) == [(5, cut / "checkpoint-5"), (10, cut / "checkpoint-10"), (12, cut)]

    def scored(step, mean):
        return {"step": step, "validation": {"mean_return": {"mean": mean}}}

    assert pick_grpo_step([scored(5, 0.4), scored(10, 0.6), scored(12, 0.5)]) == 10
    assert pick_grpo_step([scored(5, 0.6), scored(10, 0.6)]) == 5  # a tie keeps the earlier step


def test_the_report_names_the_grpo_step_kept_on_validation_and_every_saved_ones_return():
    import copy
    import json

    from research.lm_learnability import RESULTS
    from research.lm_report import markdown

    results = copy.deepcopy(json.loads(RESULTS.read_text()))
    assert "GRPO saved its model" not in markdown(results)  # the published run evaluated its final model
    val = results["warm_starts"][0]["validation"]
    better = copy.deepcopy(val)
    better["mean_return"] = {"mean": 0.9, "ci95": [0.8, 1.0]}
    results["config"]["settings"].update(grpo_save_steps=5, select_episodes=200)
    results["grpo"].update(
        selection=[{"step": 5, "validation": val}, {"step": 10, "validation": better}], kept_step=10, global_step=12
    )
    m = val["mean_return"]
    assert (
        "GRPO saved its model every 5 steps, and the one evaluated is step 10 of 12, kept for its mean return on "
        "200 train-split validation tasks (easy, tasks 100000-100199; never the held-out ones): step 5: "
        f"{m['mean']:.3f} [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}], valid calls "
        f"{100 * (1 - val['invalid_rate']['rate']):.1f}%; step 10: 0.900 [0.800, 1.000]"
    ) in markdown(results)


def test_the_warm_start_stage_alone_keeps_the_best_on_validation_and_refuses_a_bad_setting_first(tmp_path):
    from research import lm_warm
    from research.lm_learnability import pick_warm_start

    tiny = ["hidden=32", "layers=1", "read_span=8", "sft_seeds=2", "processes=2", "warm_episodes=3"]
    out = tmp_path / "warm"
    with pytest.raises(SystemExit):  # a typo is refused before anything is built
        lm_warm.main(["--out", str(out), "--set", *tiny, "sft_sead=1"])
    assert not out.exists()
    report = lm_warm.main(["--out", str(out), "--seed", "6", "--minutes", "0.2", "--set", *tiny, "select_episodes=2"])
    assert report == json.loads((out / "warm.json").read_text())
    assert [w["seed"] for w in report["warm_starts"]] == [6, 7]
    assert all(w["steps"] >= 1 and w["validation"]["episodes"] == 2 for w in report["warm_starts"])
    # the same choice as the whole experiment makes, and the folder kept is a model the harness loads
    assert report["kept"] == pick_warm_start(report["warm_starts"])["dir"]
    assert (Path(report["kept"]) / "config.json").is_file()
    assert report["command"].startswith("python -m research.lm_warm --out ")
