"""Choosing a finished GRPO run's checkpoint on validation: which models play, on which tasks, which is kept."""

import json

import pytest

pytest.importorskip("trl")


def grpo_run(tmp_path, global_step, checkpoints):
    run = tmp_path / "grpo"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"global_step": global_step}))
    for step in checkpoints:
        (run / f"checkpoint-{step}").mkdir()
    return run


def test_each_saved_model_plays_validation_and_the_best_is_kept(tmp_path, monkeypatch, capsys):
    import research.lm_select as lm_select

    run = grpo_run(tmp_path, 12, [5, 10, 20])  # checkpoint-20 is an older, longer run's: never played
    returns = {run / "checkpoint-5": 0.4, run / "checkpoint-10": 0.7, run: 0.5}
    played = []

    def fake_evaluation(path, n, workers, start, split, difficulty):
        played.append((path, n, start, split, difficulty))
        bad = {"rate": 0.05, "ci95": [0.04, 0.06], "n": 100}
        return {
            "mean_return": {"mean": returns[path], "ci95": [returns[path] - 0.1, returns[path] + 0.1]},
            "invalid_rate": bad,
        }

    monkeypatch.setattr(lm_select, "evaluation", fake_evaluation)
    out = tmp_path / "selection.json"
    result = lm_select.main([str(run), "--episodes", "50", "--start", "100000", "--out", str(out)])
    # the same 50 train-split validation tasks for every model, never the held-out split
    assert played == [(p, 50, 100000, "train", "easy") for p in (run / "checkpoint-5", run / "checkpoint-10", run)]
    assert [s["step"] for s in result["selection"]] == [5, 10, 12]
    assert result["kept_step"] == 10 and result["kept"] == str(run / "checkpoint-10")
    assert json.loads(out.read_text()) == result
    printed = capsys.readouterr().out
    assert "step 10: mean return 0.700 [0.600, 0.800], valid calls 95.0%" in printed
    assert f"kept step 10: {run / 'checkpoint-10'}" in printed


def test_a_folder_without_a_finished_run_is_refused_before_any_play(tmp_path, monkeypatch, capsys):
    import research.lm_select as lm_select

    monkeypatch.setattr(lm_select, "evaluation", lambda *a, **k: pytest.fail("played a model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit):
        lm_select.main([str(tmp_path / "empty")])
    assert "not a finished GRPO run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        lm_select.main([str(tmp_path / "empty"), "--episodes", "0"])
    assert "at least 1 validation task" in capsys.readouterr().err
