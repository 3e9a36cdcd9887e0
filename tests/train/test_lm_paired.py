"""The paired comparison of two checkpoints: the same tasks, each one's summary, the gain task by task."""

import json

import pytest

from releaseops_arena.splits import task_scenario
from training.evaluate import run_episodes

pytest.importorskip("trl")


def episodes(policy, start=2000, n=6):
    scenarios = [task_scenario("heldout_seeds", i, "easy") for i in range(start, start + n)]
    return [runs[0] for runs in run_episodes(policy, scenarios, progress=False)]


def test_the_gain_is_taken_task_by_task_and_refused_across_different_tasks():
    from research.lm_paired import paired

    rule, planner = episodes("rule"), episodes("planner")
    result = paired(rule, planner)
    gains = [p["episode_return"] - r["episode_return"] for r, p in zip(rule, planner)]
    assert result["gain"]["mean"] == pytest.approx(sum(gains) / len(gains), abs=1e-4)
    assert result["gain"]["mean"] == pytest.approx(
        result["after"]["mean_return"]["mean"] - result["before"]["mean_return"]["mean"], abs=1e-3
    )
    assert sum(result["tasks"].values()) == 6
    assert result["tasks"]["better"] == sum(g > 1e-9 for g in gains)
    same = paired(rule, rule)  # a checkpoint against itself: no gain, nothing apart
    assert same["gain"] == {"mean": 0.0, "ci95": [0.0, 0.0]} and not same["apart"]
    assert same["tasks"] == {"better": 0, "worse": 0, "same": 6}
    with pytest.raises(ValueError, match="same tasks"):
        paired(rule, episodes("planner", start=2001))


def test_the_command_keeps_the_episodes_and_a_second_run_only_reads_them(tmp_path, monkeypatch, capsys):
    from research import lm_paired

    plays = []

    def fake_played(checkpoint, start, n, workers, split, difficulty):
        plays.append(checkpoint)
        return episodes({"warm": "rule", "grpo": "planner"}[checkpoint], start, n)

    monkeypatch.setattr(lm_paired, "played", fake_played)
    out = tmp_path / "paired.json"
    argv = ["warm", "grpo", "--start", "2000", "-n", "4", "--out", str(out)]
    first = lm_paired.main(argv)
    assert plays == ["warm", "grpo"]
    assert sorted(json.loads(out.read_text())) == ["grpo@heldout_seeds/easy/2000+4", "warm@heldout_seeds/easy/2000+4"]
    assert lm_paired.main(argv) == first and plays == ["warm", "grpo"]  # read back, not played again
    printed = capsys.readouterr().out
    assert "paired gain" in printed and "over 4 tasks" in printed
    with pytest.raises(SystemExit):
        lm_paired.main(["warm", "grpo", "-n", "1"])
    assert "at least 2 tasks" in capsys.readouterr().err


def test_a_recorded_comparison_is_rendered_in_the_report_from_its_numbers(tmp_path, monkeypatch):
    from research import lm_paired
    from research.lm_learnability import RESULTS
    from research.lm_report import markdown

    monkeypatch.setattr(
        lm_paired, "played", lambda c, start, n, *_: episodes({"warm": "rule", "grpo": "planner"}[c], start, n)
    )
    results = tmp_path / "lm.json"
    results.write_text(RESULTS.read_text())
    argv = ["warm", "grpo", "-n", "3", "--into", str(results), "--name", "Rule against planner", "--note", "A check."]
    result = lm_paired.main(argv)
    lm_paired.main(argv)  # the same name again replaces the entry
    (entry,) = json.loads(results.read_text())["paired"]
    assert (
        entry["command"]
        == "python -m research.lm_paired warm grpo -n 3 --into "
        + str(results)
        + " --name 'Rule against planner' --note 'A check.'"
    )
    text = markdown(json.loads(results.read_text()))
    g = result["gain"]
    assert (
        f"Rule against planner (`{entry['command']}`): A check. Over 3 heldout_seeds tasks (easy, tasks 2000-2002)"
        in text
    )
    assert f"paired gain {g['mean']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]" in text
    with pytest.raises(SystemExit):  # a comparison recorded nowhere by name is refused before any play
        lm_paired.main(["warm", "grpo", "--into", str(results)])
