"""The evaluation harness, datasets, plots and demo files (small runs; not the calibration numbers)."""

import json
import math

import pytest

from releaseops_arena import HELDOUT_FAMILIES, HELDOUT_MIXES, ReleaseOpsToolEnv
from releaseops_arena.brief import PROMPT_VERSION, prompt_messages
from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.splits import SPLITS, reset_arguments, scenarios
from research.make_demo import DEMO_DIR
from research.make_demo import build as build_demo
from research.plot_metrics import plot
from training import evaluate as ev
from training.make_dataset import COLUMNS, build


def test_wilson_interval_matches_known_values():
    assert ev.wilson(0, 0) == [0.0, 0.0]
    lo, hi = ev.wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    lo, hi = ev.wilson(0, 20)
    assert lo == 0.0 and hi == pytest.approx(0.1611, abs=1e-4)


def test_mean_interval():
    lo, hi = ev.mean_ci([1.0, -1.0, 1.0, -1.0])
    assert lo == pytest.approx(-1.96 * math.sqrt(4 / 3) / 2, abs=1e-3) and hi == pytest.approx(-lo, abs=1e-6)


def episode(**kw):
    base = {
        "episode_return": 1.0,
        "p1_present": False,
        "p1_caught": False,
        "blocks": 0,
        "false_blocks": 0,
        "tool_calls": 4,
        "budget_total": 2,
        "budget_used": 1,
        "safe_ship": True,
        "unsafe_ship": False,
        "missed_deadline": False,
        "invalid_actions": 0,
    }
    return {**base, **kw}


def test_summary_arithmetic():
    eps = [
        episode(),
        episode(
            safe_ship=False,
            unsafe_ship=True,
            episode_return=-1.0,
            p1_present=True,
            blocks=2,
            false_blocks=1,
            invalid_actions=2,
        ),
        episode(p1_present=True, p1_caught=True, blocks=2, budget_used=2),
    ]
    s = ev.summarize(eps)
    assert s["safe_ship"]["rate"] == pytest.approx(2 / 3, abs=1e-4)
    assert s["unsafe_ship"]["rate"] == pytest.approx(1 / 3, abs=1e-4)
    assert s["p1_catch"] == {"rate": 0.5, "ci95": ev.wilson(1, 2), "n": 2}
    assert s["false_block"]["rate"] == pytest.approx(1 / 4)
    assert s["budget_used"]["rate"] == pytest.approx(4 / 6, abs=1e-4)
    assert s["invalid_action"]["rate"] == pytest.approx(2 / 12, abs=1e-4)
    assert s["mean_return"]["mean"] == pytest.approx(1 / 3, abs=1e-4)


def test_splits_are_disjoint_and_hold_out_the_unseen_family_and_mix():
    seen = {}
    for split in SPLITS:
        rows = list(scenarios(split, 300))
        seeds = {r["seed"] for r in rows}
        for other, other_seeds in seen.items():
            assert not seeds & other_seeds, (split, other)
        seen[split] = seeds
    train = list(scenarios("train", 2000))
    assert not {r["family"] for r in train} & set(HELDOUT_FAMILIES)
    assert not {r["archetype_mix"] for r in train} & set(HELDOUT_MIXES)
    assert {r["family"] for r in scenarios("unseen_family", 50)} == set(HELDOUT_FAMILIES)
    assert {r["archetype_mix"] for r in scenarios("unseen_mix", 50)} == set(HELDOUT_MIXES)


def test_unknown_split_is_refused():
    with pytest.raises(ValueError, match="valid: train, heldout_seeds"):
        list(scenarios("validation", 3))


def test_a_window_past_the_end_of_a_split_is_refused():
    """Seeds past a split's end belong to the next split: train must never reach held-out seeds."""
    last = list(scenarios("train", 1, start=999_999))
    assert last[0]["seed"] == 999_999
    with pytest.raises(ValueError, match="start \\+ n must lie in 0..1000000"):
        list(scenarios("train", 2, start=999_999))


def test_deterministic_policies_give_identical_results_serial_and_parallel():
    a = ev.evaluate("rule", "heldout_seeds", 40, "medium", progress=False)
    b = ev.evaluate("rule", "heldout_seeds", 40, "medium", workers=2, progress=False)
    assert a == b


def test_paired_win_rate_and_pass_k():
    rule = ev.evaluate("rule", "heldout_seeds", 30, "medium", progress=False)
    oracle = ev.evaluate("oracle", "heldout_seeds", 30, "medium", baseline=rule, progress=False)
    win = oracle["metrics"]["rule_win"]
    assert win["wins"] + win["ties"] + win["losses"] == 30
    pairs = list(zip(oracle["episodes"], rule["episodes"]))
    assert [a["seed"] for a, _ in pairs] == [b["seed"] for _, b in pairs]  # paired: the same scenarios
    assert win["wins"] == sum(a["episode_return"] > b["episode_return"] for a, b in pairs)
    assert win["losses"] == sum(a["episode_return"] < b["episode_return"] for a, b in pairs)
    assert win["wins"] > 0
    # Nothing beats the oracle's +1: it ships safely every time. v3: a release can hold more shortcuts at
    # triage than one phase's two evidence actions reveal, and the oracle never holds just to read more, so
    # the rule can out-earn it only by paying for more reveals (more budget) on a safe ship of its own.
    assert all(a["outcome"] == "safe_ship" for a, _ in pairs)
    for a, b in pairs:
        if b["episode_return"] > a["episode_return"]:
            assert b["outcome"] == "safe_ship" and b["budget_used"] > a["budget_used"], (a, b)
    rnd = ev.evaluate("random", "heldout_seeds", 10, "medium", k=3, progress=False)
    assert rnd["pass_k"]["k"] == 3 and rnd["pass_k"]["n"] == 10
    assert set(rnd["by_family"]) <= set(SPLITS["heldout_seeds"]["families"])


def test_cli_writes_json_and_prints_a_markdown_table(tmp_path, capsys):
    out = tmp_path / "r.json"
    ev.main(["--policy", "rule,naive", "-n", "12", "--difficulty", "easy", "--workers", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert printed.startswith("| policy | safe ship %") and "| naive |" in printed
    data = json.loads(out.read_text())
    assert [r["policy"] for r in data["results"]] == ["rule", "naive"]


def test_unknown_policy_is_refused_with_the_valid_names():
    with pytest.raises(ValueError, match="valid: random, naive, rule"):
        ev.make_policy("clever")


def test_dataset_rows_have_exactly_the_training_columns():
    ds = build("train", 24)
    assert ds.column_names == COLUMNS
    row = ds[0]
    # The brief as the system message, then the user turn the board joins on a line of its own.
    assert row["prompt"] == prompt_messages() and row["prompt_version"] == PROMPT_VERSION
    assert row["prompt"][0]["role"] == "system" and row["prompt"][-1]["content"].endswith("\n")
    assert row["split"] == "train"
    assert build("train", 24).to_list() == ds.to_list()  # deterministic
    for row in ds.select(range(5)):  # a row is a task: the env plays the split's scenario of that index
        assert ReleaseOpsToolEnv().reset(**row) == ReleaseOpsToolEnv().reset(
            **scenarios("train", 1, row["difficulty"], start=row["index"]).__next__()
        )
    hard = build("unseen_family", 6, "hard")
    assert set(hard["difficulty"]) == {"hard"} and hard["index"] == list(range(6))


def test_with_the_secret_set_evaluation_rows_carry_their_task_tokens(monkeypatch):
    from releaseops_arena.splits import ReleaseTasks, start_episode

    monkeypatch.setenv("RELEASEOPS_EVAL_SECRET", "operator-secret")
    rows = build("heldout_seeds", 4)
    assert rows.column_names == [*COLUMNS, "token"]
    for row in rows:  # a server with that secret plays each row
        start_episode(row, ReleaseTasks(secret="operator-secret"))
    assert build("train", 4).column_names == COLUMNS  # train needs no token


# ------------------------------------------------ the benchmark version on every result and row


def test_evaluation_results_carry_the_benchmark_version_and_refuse_a_baseline_of_another(tmp_path, capsys):
    rule = ev.evaluate("rule", "heldout_seeds", 6, "easy", progress=False)
    assert rule["benchmark_version"] == BENCHMARK_VERSION == "v3"
    naive = ev.evaluate("naive", "heldout_seeds", 6, "easy", baseline=rule, progress=False)
    assert naive["benchmark_version"] == BENCHMARK_VERSION and "rule_win" in naive["metrics"]
    for stale in ({**rule, "benchmark_version": "v2"}, {k: v for k, v in rule.items() if k != "benchmark_version"}):
        with pytest.raises(ValueError, match="results of different benchmark versions are never mixed"):
            ev.evaluate("naive", "heldout_seeds", 6, "easy", baseline=stale, progress=False)
        with pytest.raises(ValueError, match=r"benchmark version (v2|unversioned)\)"):
            ev.add_rule_win(dict(naive), stale)
    out = tmp_path / "r.json"
    ev.main(["--policy", "naive", "-n", "4", "--difficulty", "easy", "--workers", "1", "--out", str(out)])
    capsys.readouterr()
    data = json.loads(out.read_text())
    assert data["benchmark_version"] == BENCHMARK_VERSION and data["prompt_version"] == PROMPT_VERSION
    assert [r["benchmark_version"] for r in data["results"]] == [BENCHMARK_VERSION]
    assert [r["prompt_version"] for r in data["results"]] == [PROMPT_VERSION]  # the brief an LLM played from


def test_dataset_rows_carry_the_benchmark_version_which_every_reset_ignores():
    rows = build("heldout_seeds", 3)
    assert "benchmark_version" in COLUMNS and rows["benchmark_version"] == [BENCHMARK_VERSION] * 3
    for row in rows:
        # In-process and remote (TRL's environment_factory calls reset(**row)): the column is dropped.
        assert "benchmark_version" not in reset_arguments(row)
        assert ReleaseOpsToolEnv().reset(**row) == ReleaseOpsToolEnv().reset(
            split=row["split"], index=row["index"], difficulty=row["difficulty"]
        )


def test_plot_writes_a_png(tmp_path):
    rule = ev.evaluate("rule", "heldout_seeds", 12, "medium", progress=False)
    oracle = ev.evaluate("oracle", "heldout_seeds", 12, "medium", progress=False)
    out = plot([rule, oracle], tmp_path / "m.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["seed_a_bad_ci.json", "seed_b_budget_restraint.json"])
def test_demo_files_are_current(name):
    # Regenerate with `python -m research.make_demo` when the engine changes.
    assert json.loads((DEMO_DIR / name).read_text()) == build_demo()[name]


def test_demo_stories_hold():
    demo = build_demo()
    a = demo["seed_a_bad_ci.json"]["transcripts"]
    assert a["naive"]["outcome"] == "unsafe_ship" and a["oracle"]["outcome"] == "safe_ship"
    b = demo["seed_b_budget_restraint.json"]["transcripts"]
    assert b["inspect_everything"]["outcome"] == "unsafe_ship" and b["rule"]["outcome"] == "safe_ship"
