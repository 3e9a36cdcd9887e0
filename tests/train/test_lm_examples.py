"""The LM study's before/after examples: which held-out episodes are shown, and where they are kept."""

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")


def fake_episodes(returns, first=2000):
    """`episode` for fake checkpoints (`grpo` is the after one): task first + i ends with returns[i] = (warm
    start's, GRPO's) return; a return given as (outcome, return) ends that other way."""
    from releaseops_arena.splits import task_scenario

    def episode(checkpoint, scenario):
        tasks = range(first, first + len(returns))
        index = next(i for i in tasks if task_scenario("heldout_seeds", i, "easy") == scenario)
        before, after = returns[index - first]
        value = after if Path(checkpoint).name == "grpo" else before
        outcome, value = value if isinstance(value, tuple) else ("safe_ship", value)
        return {"outcome": outcome, "return": value, "calls": [f"{Path(checkpoint).name} on task {index}"]}

    return episode


def test_the_first_gain_the_first_loss_and_the_first_alike_are_shown_in_that_order(monkeypatch):
    from research import lm_examples

    # task 2000: the same return, ended another way (not shown); 2001 alike; 2002 worse; 2003 better; 2004 better
    returns = [(1.0, ("abandoned", 1.0)), (1.0, 1.0), (1.3, 0.6), (0.9, 1.4), (0.2, 1.0)]
    monkeypatch.setattr(lm_examples, "episode", fake_episodes(returns))
    rows = lm_examples.examples("warm", "grpo", "easy", start=2000, search=5)
    assert [(r["kind"], r["task"]["index"]) for r in rows] == [("better", 2003), ("worse", 2002), ("same", 2001)]
    assert rows[0]["before"]["calls"] == ["warm on task 2003"] and rows[0]["after"]["calls"] == ["grpo on task 2003"]
    # a kind no searched task shows is left out, not filled with another
    assert [r["kind"] for r in lm_examples.examples("warm", "grpo", "easy", start=2000, search=2)] == ["same"]


def results_with_pair(tmp_path, start):
    """A copy of the study's results with one more paired entry, "Pair", whose checkpoints exist here."""
    from research.lm_learnability import RESULTS

    data = json.loads(RESULTS.read_text())
    for name in ("warm", "grpo"):
        (tmp_path / name).mkdir()
    entry = {**data["paired"][-1], "name": "Pair", "checkpoints": [str(tmp_path / "warm"), str(tmp_path / "grpo")]}
    entry["tasks_played"] = {"split": "heldout_seeds", "difficulty": "easy", "start": start}
    entry.pop("examples", None)  # played by the test
    data["paired"].append(entry)
    results = tmp_path / "lm.json"
    results.write_text(json.dumps(data))
    return results, data


def test_a_paired_runs_examples_are_played_on_its_tasks_kept_on_its_entry_and_rendered_after_it(
    tmp_path, monkeypatch, capsys
):
    from research import lm_examples
    from research.lm_report import markdown

    # the entry's own tasks start at 3000, not at --start's default
    monkeypatch.setattr(lm_examples, "episode", fake_episodes([(1.3, 0.6), (0.9, 1.4), (1.0, 1.0)], first=3000))
    results, data = results_with_pair(tmp_path, start=3000)
    for bad, why in (
        ([], "exactly one of"),
        (["--paired", "Pair"], "needs --into"),
        (["--paired", "Nope", "--into", str(results)], "no such entry"),
        (["runs/x", "--paired", "Pair", "--into", str(results)], "exactly one of"),
        (["--paired", "Pair", "--into", str(results), "--start", "2000"], "drop --start"),
    ):
        with pytest.raises(SystemExit):
            lm_examples.main(["--search", "3", *bad])
        assert why in capsys.readouterr().err
    assert json.loads(results.read_text()) == data  # nothing written by a refused command
    lm_examples.main(["--paired", "Pair", "--into", str(results), "--search", "3"])
    saved = json.loads(results.read_text())
    (kept,) = [e for e in saved["paired"] if e["name"] == "Pair"]
    assert [(r["kind"], r["task"]["index"]) for r in kept["examples"]] == [
        ("better", 3001),
        ("worse", 3000),
        ("same", 3002),
    ]
    assert saved["examples"] == data["examples"]  # the published run's examples stay as they were
    text = markdown(saved)
    after_pair = text[text.index("Pair (`") :]
    assert "**heldout_seeds task 3001 (easy), the first where GRPO ends better**" in after_pair
    assert "  1. grpo on task 3001" in after_pair
    assert "--paired Pair --into research/results/lm_learnability.json" in after_pair


def test_a_study_runs_examples_play_its_kept_warm_start_and_replace_the_published_ones(tmp_path, monkeypatch):
    from research import lm_examples
    from research.lm_learnability import RESULTS

    monkeypatch.setattr(lm_examples, "episode", fake_episodes([(1.0, 1.0), (0.5, 1.5)], first=2000))
    run = tmp_path / "run"
    for name in ("sft_seed1", "grpo"):
        (run / name).mkdir(parents=True)
    data = json.loads(RESULTS.read_text())
    data["sft"]["seed"] = 1
    results = tmp_path / "lm.json"
    results.write_text(json.dumps(data))
    lm_examples.main([str(run), "--into", str(results), "--search", "2"])
    saved = json.loads(results.read_text())
    assert [(r["kind"], r["task"]["index"]) for r in saved["examples"]] == [("better", 2001), ("same", 2000)]
    assert saved["examples"][0]["before"]["calls"] == ["sft_seed1 on task 2001"]  # the kept warm start's folder
    assert saved["paired"] == data["paired"]
