"""The learnability report's pieces: the verdicts per slice, the behaviour examples, and a
re-render from runs already made (a tiny checkpoint, LM results in lm_learnability's format)."""

import json

import pytest

from releaseops_arena.policies import POLICIES, play
from releaseops_arena.splits import task_scenario
from research import evidence_ablation as ea
from research import learnability as lb
from research import lm_learnability as lm
from research import structured_policy as sp
from tests.live_server import REPO_ROOT
from training.evaluate import evaluate, run_episodes


def episodes(n):
    return [
        runs[0]
        for runs in run_episodes("rule", [task_scenario("heldout_seeds", i, "easy") for i in range(n)], progress=False)
    ]


def result(safe, ret, width=0.02):
    return {
        "metrics": {
            "safe_ship": {"rate": safe, "ci95": [safe - width, safe + width]},
            "mean_return": {"mean": ret, "ci95": [ret - width, ret + width]},
        }
    }


def test_checks_name_every_policy_not_beaten_and_the_share_of_the_gap_closed():
    results = {"rule": result(0.60, 0.30), "planner": result(0.80, 0.50), "trained": result(0.75, 0.35)}
    exploits = {"blind": result(0.40, -0.5), "blind_probe": result(0.74, 0.0)}
    checks = lb.slice_checks(results, exploits)
    assert checks["safe_ship"] == {
        "above_rule": True,
        "exploits_not_beaten": ["blind_probe"],
        "best_exploit": "blind_probe",
        "gap_closed": 0.75,
    }
    assert checks["mean_return"]["above_rule"] is True and checks["mean_return"]["gap_closed"] == 0.25
    # A planner no better than the rule leaves no gap to close.
    assert lb.slice_checks({**results, "planner": result(0.60, 0.20)}, {})["safe_ship"]["gap_closed"] is None


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("sp") / "w.pt"
    sp.train(
        minutes=5,
        group=4,
        scenarios_per_step=2,
        max_steps=2,
        seed=1,
        warm_start="rule",
        warm_episodes=16,
        validate_every=0,
        out=path,
    )
    return path


def test_behaviour_shows_the_demo_seeds_before_and_after_and_the_first_task_where_outcomes_differ(checkpoint):
    trained = lambda: sp.StructuredPolicy(str(checkpoint))  # noqa: E731
    before = lambda: sp.StructuredPolicy(str(checkpoint.with_suffix(".warm.pt")))  # noqa: E731
    examples = lb.behaviour(trained, before, search=20)
    for seed in ("Seed A: intervention matters", "Seed B: restraint matters"):
        assert {"rule", "before training", "after training"} <= set(examples[seed])
    partings = {k: v for k, v in examples.items() if lb.PARTING in k}
    assert partings, "a freshly cloned policy parts from the rule somewhere in 20 tasks per slice"
    for title, example in partings.items():
        name, index = title.split(":")[0], int(title.rsplit("task ", 1)[1].rstrip(")"))
        split, difficulty = name.split("/")
        assert example["scenario"] == task_scenario(split, index, difficulty)
        assert example["rule"]["outcome"] != example["after training"]["outcome"]
        for i in range(index):  # the first such task, not the best
            s = task_scenario(split, i, difficulty)
            assert play(POLICIES["rule"](), s)["metrics"]["outcome"] == play(trained(), s)["metrics"]["outcome"]
        assert all("(" in c for c in example["after training"]["calls"])


def write_calibration(path, n=4):
    """An n-task calibration in research.calibrate's layout, naive standing in for every exploit."""
    slices = {
        f"{split}/{d}": dict.fromkeys(lb.EXPLOITS, evaluate("naive", split, n, d, progress=False))
        for split, d in lb.SLICES
    }
    path.write_text(json.dumps({"n": n, "slices": slices}))


def test_the_report_renders_from_a_checkpoint_and_lm_results_without_training(checkpoint, tmp_path):
    write_calibration(tmp_path / "cal.json")
    # An LM run still going has recorded only its variants; the report renders that much.
    (tmp_path / "lm.json").write_text(
        json.dumps({"variants": [lm.variant_row("A", "a note", lm.summary(episodes(4)), "4 episodes")]})
    )
    docs, out = tmp_path / "docs", tmp_path / "learnability.json"
    lb.main(
        [
            "--structured-checkpoint",
            str(checkpoint),
            "--lm-results",
            str(tmp_path / "lm.json"),
            "-n",
            "4",
            "--search",
            "3",
            "--calibration",
            str(tmp_path / "cal.json"),
            "--docs",
            str(docs),
            "--out",
            str(out),
        ]
    )
    data = json.loads(out.read_text())
    assert set(data["structured"]["slices"]) == {f"{s}/{d}" for s, d in lb.SLICES}
    part = data["structured"]["slices"]["unseen_family/hard"]
    assert {"rule", "planner", "warm start", "trained", "evidence_first"} == set(part["results"])
    assert set(part["exploits"]) == set(lb.EXPLOITS)
    evidence = data["structured"]["evidence_ablation"]
    assert set(evidence["slices"]["unseen_family/hard"]) == {"rule", "evidence_first", "planner", "trained"}
    assert set(evidence["slices"]["unseen_family/hard"]["trained"]) == set(ea.READERS)
    text = (docs / "learnability.md").read_text()
    assert "What the evidence reader knows" in text and "train artifacts only" in text
    assert "Read from" in text and "evaluated by this command" in text and "a note" in text
    for png in ("structured_curve", "bars_heldout_seeds", "bars_unseen_family"):
        assert (docs / f"learnability_{png}.png").stat().st_size > 1000, png
    # Later LM results (here with GRPO rewards): only the LM section is read again, the structured
    # numbers stay as measured, without replaying a single episode.
    (tmp_path / "lm.json").write_text(
        json.dumps({**json.loads((tmp_path / "lm.json").read_text()), "grpo": {"steps": 2, "rewards": [0.1, 0.3]}})
    )
    lb.main(
        [
            "--rerender",
            "--lm-results",
            str(tmp_path / "lm.json"),
            "-n",
            "4",
            "--calibration",
            str(tmp_path / "cal.json"),
            "--docs",
            str(docs),
            "--out",
            str(out),
        ]
    )
    again = json.loads(out.read_text())
    assert again["structured"] == data["structured"] and again["command"] == data["command"]
    assert again["lm_curve"] and (docs / "learnability_lm_curve.png").stat().st_size > 1000

    # After a change to the planner, --replay plays it again (slices and evidence ablation) and keeps the
    # trained results; here a stale planner row stands in for the change.
    rerender = ["--rerender", "--lm-results", str(tmp_path / "lm.json"), "-n", "4"]
    rerender += ["--calibration", str(tmp_path / "cal.json"), "--docs", str(docs), "--out", str(out)]
    stale = json.loads(out.read_text())
    stale["structured"]["slices"]["unseen_mix/hard"]["results"]["planner"]["metrics"]["safe_ship"]["rate"] = 0.01
    stale["structured"]["evidence_ablation"]["slices"]["unseen_family/hard"]["planner"] = {}
    out.write_text(json.dumps(stale))
    lb.main([*rerender, "--replay", "planner"])
    replayed = json.loads(out.read_text())
    assert replayed["structured"]["slices"] == data["structured"]["slices"]  # played again: as first measured
    assert replayed["structured"]["evidence_ablation"] == data["structured"]["evidence_ablation"]
    assert replayed["replayed"] == ["planner"]
    # A rule that no longer plays as stored means other tasks or another engine: replay refuses.
    stale["structured"]["slices"]["heldout_seeds/medium"]["results"]["rule"]["metrics"]["safe_ship"]["rate"] = 0.01
    out.write_text(json.dumps(stale))
    with pytest.raises(SystemExit, match="replay everything"):
        lb.main([*rerender, "--replay", "planner"])
    with pytest.raises(SystemExit):
        lb.main(["--replay", "planner", "--lm-minutes", "0", "-n", "4", "--calibration", str(tmp_path / "cal.json")])


def test_a_task_count_other_than_the_calibrations_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        lb.main(["--lm-minutes", "0", "-n", "7", "--calibration", str(tmp_path / "none.json")])
    assert "python -m research.calibrate -n 7" in capsys.readouterr().err
    (tmp_path / "cal.json").write_text(json.dumps({"n": 500, "slices": {}}))
    with pytest.raises(SystemExit):
        lb.main(["--lm-minutes", "0", "-n", "7", "--calibration", str(tmp_path / "cal.json")])
    assert "must come from the same tasks" in capsys.readouterr().err


def test_the_one_command_trains_the_structured_policy_then_writes_the_report(tmp_path):
    # The path a user takes with no earlier runs, at smoke scale: clone, GRPO, select, evaluate, render.
    write_calibration(tmp_path / "cal.json")
    runs, docs, out = tmp_path / "runs", tmp_path / "docs", tmp_path / "learnability.json"
    lb.main(
        [
            "--minutes",
            "0.05",
            "--warm-episodes",
            "12",
            "--validation-episodes",
            "6",
            "--lm-minutes",
            "0",
            "-n",
            "4",
            "--search",
            "2",
            "--runs",
            str(runs),
            "--docs",
            str(docs),
            "--out",
            str(out),
            "--calibration",
            str(tmp_path / "cal.json"),
        ]
    )
    for suffix in (".pt", ".warm.pt", ".json"):
        assert (runs / f"structured{suffix}").exists(), suffix
    data = json.loads(out.read_text())
    s = data["structured"]
    assert s["provenance"].startswith("Trained by this command")
    assert s["training"]["warm_episodes"] == 12 and s["training"]["steps"] >= 1
    assert "--warm-episodes 12" in json.loads((runs / "structured.json").read_text())["command"]
    assert set(s["slices"]) == {f"{split}/{d}" for split, d in lb.SLICES}
    assert "lm" not in data and "Trained by this command" in (docs / "learnability.md").read_text()


def test_an_earlier_checkpoint_without_its_cloned_start_is_refused_before_any_play(tmp_path, capsys):
    checkpoint = tmp_path / "s.pt"
    checkpoint.write_bytes(b"")
    (tmp_path / "s.json").write_text("{}")
    calibration = tmp_path / "calibration.json"
    calibration.write_text(
        json.dumps({"n": 10, "slices": {f"{s}/{d}": {e: {} for e in lb.EXPLOITS} for s, d in lb.SLICES}})
    )
    with pytest.raises(SystemExit):
        lb.main(
            [
                "--structured-checkpoint",
                str(checkpoint),
                "-n",
                "10",
                "--calibration",
                str(calibration),
                "--docs",
                str(tmp_path),
                "--out",
                str(tmp_path / "l.json"),
            ]
        )
    assert (
        "s.warm.pt does not exist (research.structured_policy writes it beside the checkpoint)"
        in capsys.readouterr().err
    )


def test_the_evidence_ablation_unreads_only_the_held_out_artifacts_fields_and_restores_the_reader():
    from releaseops_arena.policies import base as policy
    from releaseops_arena.policies import trained as trained_policy

    snapshot = {"kind": "test_report", "payment_assertions_weakened": 2, "tests_disabled": []}
    closed = {"kind": "ticket", "reported": "P1", "status": "resolved", "error_rate_since_fix": "2.1%"}
    disabled = {"kind": "pr_diff", "tests_disabled": ["test_refund"]}
    assert policy.evidence_violation(snapshot) == "S2" and policy.evidence_violation(closed) == "S1"
    with ea.evidence_reader("train artifacts"):
        assert trained_policy.evidence_violation(snapshot) is None and policy.evidence_violation(closed) is None
        assert policy.evidence_violation(disabled) == "S2"  # a train mechanism's artifact still reads
    assert trained_policy.evidence_violation is policy.evidence_violation is ea._SHIPPED
    with pytest.raises(ValueError, match="valid: every artifact, train artifacts"):
        with ea.evidence_reader("none"):
            pass


def test_the_evidence_ablation_plays_the_same_rows_in_parallel(checkpoint):
    """Rows played side by side in spawned processes (each swaps the reader in its own modules) are the
    rows one process plays, the trained checkpoint's included."""
    parallel = ea.evidence_ablation(checkpoint, 3, workers=2)
    assert parallel == ea.evidence_ablation(checkpoint, 3)
    assert set(parallel["unseen_family/hard"]) == {"rule", "evidence_first", "planner", "trained"}


def test_the_published_lm_preset_is_the_recipe_the_report_was_measured_with():
    """`--preset published` reproduces the reported run: its settings are exactly those the results recorded."""
    from research.lm_settings import PRESETS, SETTINGS

    measured = json.loads((REPO_ROOT / "research/results/lm_learnability.json").read_text())["config"]["settings"]
    assert PRESETS["published"] == measured
    assert PRESETS["defaults"] == SETTINGS and set(PRESETS["published"]) == set(SETTINGS)


def test_the_boards_results_page_reads_the_calibration_report_it_links_to():
    """The board's package data is the calibration's own numbers, not a hand-kept copy."""
    from research.calibrate import board_results

    calibration = json.loads((REPO_ROOT / "research/results/calibration.json").read_text())
    learned = json.loads((REPO_ROOT / "research/results/learnability.json").read_text())
    shipped = json.loads((REPO_ROOT / "server/assets/results.json").read_text())
    assert shipped == board_results(calibration, learned)
    assert set(shipped["slices"]["heldout_seeds/medium"]) >= {"naive", "rule", "planner", "trained", "oracle"}
    assert (
        shipped["slices"]["heldout_seeds/medium"]["naive"]["safe_ship"]
        < 0.5
        < (shipped["slices"]["heldout_seeds/medium"]["planner"]["safe_ship"])
    )
