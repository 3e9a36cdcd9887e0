"""The paired comparison of two checkpoints: the same tasks, each one's summary, the gain task by task."""

import json

import pytest

from releaseops_arena.splits import task_scenario
from training.evaluate import run_episodes

pytest.importorskip("trl")

_PLAYED: dict = {}


def episodes(policy, start=2000, n=4):
    """Real episode metrics of a built-in policy on held-out tasks (played once per test session)."""
    if (policy, start, n) not in _PLAYED:
        scenarios = [task_scenario("heldout_seeds", i, "easy") for i in range(start, start + n)]
        _PLAYED[policy, start, n] = [runs[0] for runs in run_episodes(policy, scenarios, progress=False)]
    return [dict(e) for e in _PLAYED[policy, start, n]]


def shifted(eps, by):
    return [{**e, "episode_return": e["episode_return"] + by} for e in eps]


def test_the_gain_is_taken_task_by_task_and_the_intervals_placed_either_way():
    from research.lm_paired import paired

    rule = episodes("rule")
    up = paired(rule, shifted(rule, 5.0))  # every task 5 better: the gain is exactly 5, its interval too
    assert up["gain"] == {"mean": 5.0, "ci95": [5.0, 5.0]} and up["intervals"] == "after above"
    assert up["tasks"] == {"better": 4, "worse": 0, "same": 0}
    down = paired(rule, shifted(rule, -5.0))
    assert down["gain"]["mean"] == -5.0 and down["intervals"] == "after below"
    assert down["tasks"] == {"better": 0, "worse": 4, "same": 0}
    same = paired(rule, rule)
    assert same["gain"] == {"mean": 0.0, "ci95": [0.0, 0.0]} and same["intervals"] == "overlapping"
    assert same["tasks"] == {"better": 0, "worse": 0, "same": 4}
    # one task 1 better, the rest unchanged: mean 0.25, and an interval that includes 0 over 4 tasks
    mixed = paired(rule, [{**e, "episode_return": e["episode_return"] + (i == 0)} for i, e in enumerate(rule)])
    assert mixed["gain"]["mean"] == 0.25 and mixed["gain"]["ci95"][0] < 0 < mixed["gain"]["ci95"][1]
    assert paired(rule, episodes("planner"))["before"]["episodes"] == 4  # two policies' real episodes
    with pytest.raises(ValueError, match="same tasks"):
        paired(rule, episodes("rule", start=2001))


def fake_played(plays):
    def play(checkpoint, start, n, workers, split, difficulty):
        plays.append(checkpoint)
        base = episodes("rule")
        return (base * n)[:n] if checkpoint == "warm" else shifted((base * n)[:n], 0.5)

    return play


def test_the_command_keeps_the_episodes_and_a_second_run_only_reads_them(tmp_path, monkeypatch, capsys):
    from research import lm_paired

    plays = []
    monkeypatch.setattr(lm_paired, "played", fake_played(plays))
    out = tmp_path / "paired.json"
    argv = ["warm", "grpo", "--start", "2000", "-n", "40", "--out", str(out)]
    first = lm_paired.main(argv)
    assert plays == ["warm", "grpo"]
    assert sorted(json.loads(out.read_text())) == [
        "grpo@heldout_seeds/easy/2000+40",
        "warm@heldout_seeds/easy/2000+40",
    ]
    assert lm_paired.main(argv) == first and plays == ["warm", "grpo"]  # read back, not played again
    assert "paired gain +0.500 [+0.500, +0.500] over 40 tasks: 40 better, 0 worse" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        lm_paired.main(["warm", "grpo", "-n", "5"])
    assert "at least 30 tasks" in capsys.readouterr().err


def target_summary(text: str) -> str:
    """The report's line over every GRPO run measured against the LM target."""
    start = "LM target (valid calls ≥ 90% before and after GRPO"
    (line,) = [line for line in text.splitlines() if line.startswith(start)]
    return line


def test_a_recorded_comparison_is_rendered_in_the_report_from_its_numbers(tmp_path, monkeypatch, capsys):
    from research import lm_paired
    from research.lm_learnability import RESULTS
    from research.lm_report import markdown

    plays = []
    monkeypatch.setattr(lm_paired, "played", fake_played(plays))
    results = tmp_path / "lm.json"
    results.write_text(RESULTS.read_text())
    argv = ["warm", "grpo", "-n", "30", "--into", str(results), "--name", "Rule, raised", "--note", "A check."]
    lm_paired.main(argv)
    lm_paired.main(argv)  # the same name again replaces the entry
    (entry,) = [e for e in json.loads(results.read_text())["paired"] if e["name"] == "Rule, raised"]
    # the command that plays it again, without where it was written or what it is called
    assert entry["command"] == "python -m research.lm_paired warm grpo --start 2000 -n 30"
    text = markdown(json.loads(results.read_text()))
    assert f"Rule, raised (`{entry['command']}`): A check. Over 30 heldout_seeds tasks (easy, tasks 2000-2029)" in text
    assert "paired gain +0.500 [+0.500, +0.500], above 0 (30 tasks better, 0 worse, 0 the same)." in text
    # the rule makes no refused call, so only the intervals decide the study's LM target here
    assert "(valid calls ≥ 90% before and after, return intervals apart, after above): met." in text
    # the line over every run measured counts them all and names this one among those that meet the target
    recorded = json.loads(results.read_text())
    runs = 1 + len(recorded.get("replicates", [])) + len(recorded["paired"])
    assert f"of the {runs} GRPO runs checked against it" in text and "Rule, raised" in target_summary(text)
    flat = json.loads(results.read_text())
    flat["paired"] = [entry]
    entry["intervals"] = "overlapping"
    entry["after"]["invalid_rate"]["rate"] = 0.15
    assert "apart, after above): not met (valid calls under 90% after; intervals overlapping)." in markdown(flat)
    assert f"of the {1 + len(flat.get('replicates', [])) + 1} GRPO runs checked against it" in markdown(flat)
    assert "Rule, raised" not in target_summary(markdown(flat))
    # a pass by a hair among many tries: apart at 95%, overlapping once widened for the number of tries
    hair = {**entry, "name": "By a hair", "intervals": "after above"}
    hair["before"] = {**entry["before"], "mean_return": {"mean": 0.5, "ci95": [0.4, 0.6]}}
    hair["after"] = {**entry["after"], "mean_return": {"mean": 0.71, "ci95": [0.61, 0.81]}}
    hair["before"]["invalid_rate"] = hair["after"]["invalid_rate"] = {"rate": 0.05, "ci95": [0.04, 0.06], "n": 500}
    flat["paired"] = [hair]
    # the tries: these runs and every GRPO row of the variants table (an overcount, on purpose)
    tries = 1 + len(flat.get("replicates", [])) + 1 + sum("GRPO" in v["name"] for v in flat["variants"])
    assert f"By a hair (widened for {tries} tries, " in target_summary(markdown(flat))
    assert ", overlapping)." in target_summary(markdown(flat))
    hair["after"]["mean_return"] = {"mean": 0.9, "ci95": [0.8, 1.0]}
    assert ", still apart)." in target_summary(markdown(flat))
    flat["paired"] = [entry]
    entry["before"]["invalid_rate"] = {"rate": None, "ci95": [0.0, 0.0], "n": 0}  # a model that made no call
    assert "(no calls, missed deadlines" in markdown(flat)
    assert "not met (valid calls under 90% before and after; intervals overlapping)." in markdown(flat)
    played = len(plays)
    for bad, why in (
        (["--into", str(results)], "needs --name"),
        (["--into", "nowhere.json", "--name", "x"], "no such"),
    ):
        with pytest.raises(SystemExit):  # refused before any play
            lm_paired.main(["warm", "grpo", "-n", "30", *bad])
        assert why in capsys.readouterr().err
    assert len(plays) == played
