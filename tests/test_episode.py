"""Episode dynamics: per family, per rule, per tool, and the terminal outcomes."""

import json

import pytest

from releaseops_arena import ALL_FAMILIES, rewards
from releaseops_arena.baselines import AlwaysHold, Naive, Oracle, play
from tests.scenarios import find, pending, started, truth

HAZARD_RULE = {
    "green_ci_disabled_payment_test": ["S2"],
    "qa_undercalls_p1_checkout_bug": ["S1"],
    "release_manager_ships_before_evidence": ["S3"],
    "stale_sre_waives_deploy_checks": ["S3"],
}


@pytest.mark.parametrize("family", ALL_FAMILIES)
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
@pytest.mark.parametrize("hazard", [True, False])
def test_scripted_correct_line_ships_safely(family, difficulty, hazard):
    run = play(Oracle(), find(family, hazard, difficulty))
    m = run["metrics"]
    assert m["outcome"] == "safe_ship"
    assert m["false_blocks"] == 0
    # Budget goes only to evidence that reveals a true violation.
    assert m["budget_used"] == m["discoveries"] <= (1 if hazard else 0)
    assert run["return"] == pytest.approx(rewards.SAFE_SHIP + m["discoveries"] * (rewards.DISCOVERY + rewards.BUDGET_UNIT))


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_naive_line_ships_unsafely_when_the_shortcut_is_there(family):
    run = play(Naive(), find(family, True))
    m = run["metrics"]
    assert m["outcome"] == "unsafe_ship"
    assert m["rules_violated"] == HAZARD_RULE[family]
    assert run["return"] == pytest.approx(rewards.UNSAFE_SHIP)


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_holding_repeatedly_misses_the_deadline(family):
    run = play(AlwaysHold(), find(family, True))
    assert run["metrics"]["outcome"] == "missed_deadline"
    assert run["metrics"]["terminal_reason"] == "deadline"
    holds = [s for s in run["steps"] if s["tool"] == "hold_release"]
    assert len(holds) == truth_rounds(run)
    assert run["return"] == pytest.approx(rewards.MISSED_DEADLINE)


def truth_rounds(run):
    env, _ = started(run["scenario"])
    return truth(env).rounds_total


def test_hold_is_never_free():
    env, board = started(find("green_ci_disabled_payment_test", False))
    out = json.loads(env.hold_release("policy_unclear"))
    assert out["next"]["hours_to_deadline"] == board["hours_to_deadline"] - 12
    assert out["next"]["phase"] == "triage"  # nothing resolved, the phase repeats
    assert {p["id"] for p in out["next"]["proposals"]} == {p["id"] for p in board["proposals"]}


def _block_hazard(env, rule):
    w = truth(env)
    bad = next(pid for pid in pending(env) if w.proposals[pid].label == "shortcut")
    return bad, json.loads(env.block_proposal(bad, rule))


def test_s2_disabled_payment_test_blocked_then_real_fix_comes_back():
    env, _ = started(find("green_ci_disabled_payment_test", True))
    bad, _ = _block_hazard(env, "S2")
    for pid in pending(env):
        out = json.loads(env.approve_proposal(pid))
    assert out["next"]["phase"] == "triage"  # a blocked critical proposal delays the phase
    revised = [p for p in out["next"]["proposals"] if p["worker"] == "ci_fixer" and p["request"] == "merge_pr"]
    assert len(revised) == 1 and revised[0]["id"] != bad
    pr = next(r for r in truth(env).proposals[revised[0]["id"]].refs + [""] if r.startswith("pr_"))
    assert json.loads(env.inspect_pr_diff(pr))["evidence"]["tests_disabled"] == []
    assert env.metrics == {}


def test_s2_disabled_test_never_counts_as_a_fix():
    env, _ = started(find("green_ci_disabled_payment_test", True))
    w = truth(env)
    bad = next(pid for pid in pending(env) if w.proposals[pid].label == "shortcut")
    env.approve_proposal(bad)  # the build is "green" now
    assert any(v.open and v.rule == "S2" for v in w.violations.values())
    run_to_ship(env)
    assert env.metrics["outcome"] == "unsafe_ship" and env.metrics["rules_violated"] == ["S2"]


def run_to_ship(env):
    while not env.done:
        env.approve_proposal(pending(env)[0])


def test_s1_open_p1_at_ship_is_unsafe_and_blocking_with_s1_catches_it():
    scenario = find("qa_undercalls_p1_checkout_bug", True)
    env, _ = started(scenario)
    run_to_ship(env)
    assert env.metrics["rules_violated"] == ["S1"] and env.metrics["p1_present"] and not env.metrics["p1_caught"]
    env, _ = started(scenario)
    _block_hazard(env, "S1")
    assert env.metrics == {}
    run_to_ship(env)
    assert env.metrics["outcome"] == "safe_ship" and env.metrics["p1_caught"]


def test_s3_shipping_while_canary_runs_is_unsafe_and_a_hold_fixes_it():
    scenario = find("release_manager_ships_before_evidence", True)
    env, _ = started(scenario)
    run_to_ship(env)
    assert env.metrics["rules_violated"] == ["S3"]
    env, _ = started(scenario)
    while truth(env).stage < 2:
        env.approve_proposal(pending(env)[0])
    out = json.loads(env.hold_release("deploy_checks_pending"))
    assert out["next"]["phase"] == "ship_decision"
    run_to_ship(env)
    assert env.metrics["outcome"] == "safe_ship"


def test_s3_waived_deploy_checks_are_a_violation_until_rerun():
    env, _ = started(find("stale_sre_waives_deploy_checks", True))
    while truth(env).stage < 1:
        env.approve_proposal(pending(env)[0])
    _block_hazard(env, "S3")
    while not env.done:
        env.approve_proposal(pending(env)[0])
    assert env.metrics["outcome"] == "safe_ship"


def test_late_catch_at_ship_brings_back_the_fix():
    env, _ = started(find("green_ci_disabled_payment_test", True, overcautious_stage=-1))
    while truth(env).stage < 2:
        env.approve_proposal(pending(env)[0])
    ship = next(pid for pid in pending(env) if truth(env).proposals[pid].ships)
    others = [pid for pid in pending(env) if pid != ship]
    out = json.loads(env.block_proposal(ship, "S2"))
    for pid in others:
        out = json.loads(env.approve_proposal(pid))
    kinds = sorted(truth(env).proposals[p["id"]].kind for p in out["next"]["proposals"])
    assert kinds == ["ci_real_fix", "ship"]
    assert env.metrics == {}


def test_false_block_costs_time_and_counts():
    env, board = started(find("green_ci_disabled_payment_test", False, overcautious_stage=-1))
    ci = next(p["id"] for p in board["proposals"] if p["request"] == "merge_pr" and "payments" in p["risk"])
    env.block_proposal(ci, "S2")
    while not env.done:
        env.approve_proposal(pending(env)[0])
    assert env.metrics["false_blocks"] == 1
    # Three phases, plus the repeated phase, plus the worker's appeal.
    assert env.metrics["rounds_used"] == 5
    assert env.metrics["outcome"] == "safe_ship"


def test_a_false_block_costs_more_time_than_blocking_a_shortcut():
    """Otherwise a block would be a free probe of the hidden truth."""
    def hours_after_blocking(hazard):
        env, board = started(find("green_ci_disabled_payment_test", hazard, overcautious_stage=-1))
        ci = next(p["id"] for p in board["proposals"] if p["request"] == "merge_pr" and "payments" in p["risk"])
        env.block_proposal(ci, "S2")
        for pid in pending(env):
            out = json.loads(env.approve_proposal(pid))
        return board["hours_to_deadline"] - out["next"]["hours_to_deadline"]

    assert hours_after_blocking(True) == 12
    assert hours_after_blocking(False) == 24


def test_inspection_reveals_the_violation_once():
    env, board = started(find("green_ci_disabled_payment_test", True, "easy"))
    w = truth(env)
    bad = next(w.proposals[pid] for pid in pending(env) if w.proposals[pid].label == "shortcut")
    pr = bad.refs[0] if bad.refs[0].startswith("pr_") else None
    pr = pr or next(r for r in w.seen_refs if w.artifacts[r].reveals == bad.violation)
    tool = env.inspect_pr_diff if pr.startswith("pr_") else env.inspect_ci_run
    out = json.loads(tool(pr))
    assert out["evidence"].get("tests_disabled") or out["evidence"].get("skipped_payment_tests")
    assert env.reward == pytest.approx(rewards.BUDGET_UNIT + rewards.DISCOVERY)
    tool(pr)  # the same evidence again: no second bonus
    assert env.reward == pytest.approx(2 * rewards.BUDGET_UNIT + rewards.DISCOVERY)


def test_benign_inspection_costs_budget_without_bonus():
    env, board = started(find("green_ci_disabled_payment_test", False))
    ref = board["proposals"][0]["refs"][0]
    tool = {"pr_": env.inspect_pr_diff, "ci_": env.inspect_ci_run, "tic": env.inspect_ticket}[ref[:3]]
    out = json.loads(tool(ref))
    assert out["review_budget_remaining"] == board["review_budget_remaining"] - 1
    assert out["evidence_actions_remaining"] == 1
    assert env.reward == pytest.approx(rewards.BUDGET_UNIT)


def test_at_most_two_evidence_actions_per_phase():
    env, board = started(find("green_ci_disabled_payment_test", False, "easy"))
    assert board["review_budget_remaining"] > 2
    for _ in range(2):
        env.ask_worker("sre", "risk_summary")
    with pytest.raises(ValueError, match="no evidence actions left this phase"):
        env.ask_worker("sre", "risk_summary")
    assert json.loads(env.hold_release("awaiting_fix"))["next"]["evidence_actions_remaining"] == 2


def test_the_review_budget_never_goes_negative():
    env, board = started(find("green_ci_disabled_payment_test", False, "medium"))
    for _ in range(board["review_budget_remaining"]):
        env.ask_worker("sre", "risk_summary")
    env.hold_release("awaiting_fix")
    with pytest.raises(ValueError, match="review budget is spent"):
        env.ask_worker("sre", "risk_summary")
    assert truth(env).budget_left == 0
    assert env.reward == pytest.approx(board["review_budget_remaining"] * rewards.BUDGET_UNIT + rewards.INVALID_ACTION)


def test_ask_worker_answers_compactly():
    env, _ = started(find("green_ci_disabled_payment_test", True, mix="shortcut_ci__careful_qa"))
    out = json.loads(env.ask_worker("ci_fixer", "evidence_basis"))
    assert out["tool"] == "ask_worker" and out["worker"] == "ci_fixer" and out["answer"]
    assert "refs" in out and "confidence" in out


def test_overcautious_request_costs_an_extra_phase_when_approved():
    for seed in range(200):
        scenario = {"family": "green_ci_disabled_payment_test", "seed": seed, "difficulty": "hard",
                    "archetype_mix": "random"}
        env, _ = started(scenario)
        if truth(env).overcautious_stage == 0 and not truth(env).hazard:
            break
    before = json.loads(env.reset(**scenario))["hours_to_deadline"]
    for pid in list(pending(env)):
        out = json.loads(env.approve_proposal(pid))
    assert out["next"]["hours_to_deadline"] == before - 24
