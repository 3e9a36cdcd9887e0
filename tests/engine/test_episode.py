"""Engine v2: the world's mechanics, one test per design principle, and the mechanisms' evidence.

Over 400 lines: one test per mechanic of the episode, sharing its helpers.
"""

import json

import pytest

from releaseops_arena import ALL_FAMILIES, DIFFICULTIES, ReleaseOpsToolEnv, rewards
from releaseops_arena.catalog import ARTIFACT_BY_KIND
from releaseops_arena.episode import Episode
from releaseops_arena.mechanisms import FAMILY_MECHANISM, GATE, REGISTRY, evidence_for
from releaseops_arena.policies import AlwaysHold, Naive, Oracle, play
from releaseops_arena.rendering import card_view, worker_view
from releaseops_arena.scenario_builder import EVIDENCE_PER_ROUND
from releaseops_arena.world import Truth
from tests.scenarios import find, shortcut_site


def started(scenario):
    env = ReleaseOpsToolEnv()
    board = json.loads(env.reset(**scenario))
    return env, board


def world(env):
    return env._episode.world


def pending(env):
    w = world(env)
    return [w.proposals[pid] for pid in w.active if w.proposals[pid].status == "pending"]


def by_request(env, request):
    return next(p for p in pending(env) if p.card.request == request)


def approve_all_but_ship(env):
    """Approve every pending proposal until only the ship is left (or the episode ends)."""
    while not env.done:
        rest = [p for p in pending(env) if not p.truth.ships]
        if not rest:
            return
        env.approve_proposal(rest[0].id)


def resolve(env, p):
    """Decline an overcautious request (free); approve anything else."""
    if p.truth.label == "overcautious":
        env.block_proposal(p.id, "S1" if "severity" in p.card.risk else "S3")
    else:
        env.approve_proposal(p.id)


def hours(env):
    w = world(env)
    return 12 * (w.rounds_total - w.round)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_the_oracle_ships_safely_with_and_without_the_shortcut(family, difficulty):
    for hazards in (set(), {FAMILY_MECHANISM[family]}):
        run = play(Oracle(), find(family, hazards, difficulty))
        assert run["metrics"]["outcome"] == "safe_ship", (hazards, run["steps"])


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_approving_everything_ships_unsafely_whenever_a_shortcut_is_there(family):
    run = play(Naive(), find(family, {FAMILY_MECHANISM[family]}))
    assert run["metrics"]["outcome"] == "unsafe_ship"
    assert run["metrics"]["rules_violated"] == [REGISTRY[FAMILY_MECHANISM[family]].rule]


def test_holding_forever_misses_the_deadline():
    run = play(AlwaysHold(), find("qa_undercalls_p1_checkout_bug", set()))
    assert run["metrics"]["outcome"] == "missed_deadline"
    assert run["metrics"]["terminal_reason"] == "deadline"


# Principle 1: information costs budget, time costs the deadline, a wrong accusation costs more.


def test_a_ship_block_citing_a_rule_the_ship_does_not_break_is_a_false_block():
    env, _ = started(find("qa_undercalls_p1_checkout_bug", {"qa"}, "easy"))  # only S1 is broken
    approve_all_but_ship(env)
    before, ship = hours(env), by_request(env, "ship_release_candidate")
    env.block_proposal(ship.id, "S2")  # something is wrong, but not S2
    assert env._episode.counters.false_blocks == 1
    assert hours(env) == before - 24  # the phase and the appeal
    assert not [p for p in pending(env) if p.truth.fixes]  # no fix comes back for a rule not broken


def test_a_ship_block_citing_the_broken_rule_brings_back_its_fix_and_a_late_code_fix_costs_the_gate_again():
    env, _ = started(find("qa_undercalls_p1_checkout_bug", {"qa"}, "easy"))
    approve_all_but_ship(env)
    before, ship = hours(env), by_request(env, "ship_release_candidate")
    env.block_proposal(ship.id, "S1")
    assert env._episode.counters.false_blocks == 0
    assert hours(env) == before - 24  # the ship phase again, and the gate for the late fix
    fix = next(p for p in pending(env) if p.truth.fixes)
    env.approve_proposal(fix.id)
    env.approve_proposal(by_request(env, "ship_release_candidate").id)
    assert env.metrics["outcome"] == "safe_ship"


def test_a_late_s3_catch_at_the_ship_costs_one_phase():
    # No overcautious request: an approved delay would spend the one spare phase the late catch needs.
    env, _ = started(find("release_manager_ships_before_evidence", {"slow"}, overcautious_stage=-1))
    approve_all_but_ship(env)
    before = hours(env)
    env.block_proposal(by_request(env, "ship_release_candidate").id, "S3")
    assert hours(env) == before - 12 and world(env).deploy_checks == "passed"
    env.approve_proposal(by_request(env, "ship_release_candidate").id)
    assert env.metrics["outcome"] == "safe_ship"


def test_a_salt_draws_different_worlds_and_each_stays_deterministic():
    public = Episode("green_ci_disabled_payment_test", 5, "medium", "random").initial_observation
    salted = Episode("green_ci_disabled_payment_test", 5, "medium", "random", salt="private-eval-2026")
    assert salted.initial_observation != public
    assert (
        salted.initial_observation
        == Episode(
            "green_ci_disabled_payment_test", 5, "medium", "random", salt="private-eval-2026"
        ).initial_observation
    )
    assert "salt" not in salted.config and "private-eval-2026" not in json.dumps(salted.config)


@pytest.mark.parametrize("key", ["ci", "qa", "retry"])
def test_a_true_block_at_the_site_costs_no_time_and_the_fix_joins_the_next_stage(key):
    family = next(f for f, m in FAMILY_MECHANISM.items() if m == key)
    env, _ = started(find(family, {key}))
    while REGISTRY[key].stage > world(env).stage:
        env.approve_proposal(pending(env)[0].id)
    site = shortcut_site(pending(env), key)  # v3: not its correct copy (`qa@2`) on the same board
    stage, before = world(env).stage, hours(env)
    env.block_proposal(site.id, REGISTRY[key].rule)
    while world(env).stage == stage:
        resolve(env, pending(env)[0])
    assert world(env).stage == stage + 1 and hours(env) == before - 12  # just the phase itself
    assert env._episode.counters.false_blocks == 0
    assert any(p.truth.fixes == site.truth.violation for p in pending(env))


def test_a_false_block_of_a_site_costs_two_phases_and_repeats_the_stage():
    env, _ = started(find("green_ci_disabled_payment_test", set()))
    site = next(p for p in pending(env) if p.truth.mechanism == "ci")
    before = hours(env)
    env.block_proposal(site.id, "S2")
    while world(env).round == 0:
        env.approve_proposal(pending(env)[0].id)
    assert world(env).stage == 0 and hours(env) == before - 24
    assert env._episode.counters.false_blocks == 1
    assert any(p.card.claim == site.card.claim for p in pending(env))  # the appeal: resubmitted unchanged


def test_declining_an_overcautious_request_is_free_and_approving_it_costs_a_phase():
    scenario = find("green_ci_disabled_payment_test", set(), overcautious_stage=0)
    for decline in (True, False):
        env, _ = started(scenario)
        delay = next(p for p in pending(env) if p.truth.label == "overcautious")
        if decline:
            env.block_proposal(delay.id, "S1")
        else:
            env.approve_proposal(delay.id)
        while world(env).stage == 0:
            env.approve_proposal(pending(env)[0].id)
        assert hours(env) == (36 if decline else 24)
        assert env._episode.counters.false_blocks == 0


# Principle 2: time alone fixes nothing supervision should catch.


def _to_ship_with_canary_stalled(checked: bool):
    # No overcautious request: the hold spends the one spare phase, an approved delay would miss the deadline.
    env, _ = started(find("release_manager_ships_before_evidence", {"slow"}, overcautious_stage=-1))
    while world(env).stage < 1:
        env.approve_proposal(pending(env)[0].id)
    if checked:
        env.inspect_ci_run(world(env).deploy_run)
    env.hold_release("deploy_checks_pending")
    approve_all_but_ship(env)
    return env


def test_waiting_does_not_finish_a_canary_the_supervisor_never_checked():
    env = _to_ship_with_canary_stalled(checked=False)
    assert world(env).deploy_checks == "running"
    env.approve_proposal(by_request(env, "ship_release_candidate").id)
    assert env.metrics["outcome"] == "unsafe_ship" and env.metrics["rules_violated"] == ["S3"]


def test_a_checked_canary_held_for_finishes_and_ships_safely():
    env = _to_ship_with_canary_stalled(checked=True)
    assert world(env).deploy_checks == "passed"
    env.approve_proposal(by_request(env, "ship_release_candidate").id)
    assert env.metrics["outcome"] == "safe_ship"


def test_an_approved_delay_does_not_finish_a_stalled_canary():
    env, _ = started(find("release_manager_ships_before_evidence", {"slow"}, overcautious_stage=1))
    while world(env).stage < 2 and not env.done:
        approve_all_but_ship(env)
    assert world(env).deploy_checks == "running"


# Principle 3: slack is tight, visible and the same whatever the hidden draws.


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_slack_and_budget_do_not_depend_on_the_hidden_shortcuts(difficulty):
    seen = {
        (Episode(f, s, difficulty, "random").world.rounds_total, Episode(f, s, difficulty, "random").world.budget)
        for f in ALL_FAMILIES
        for s in range(40)
    }
    assert len(seen) == 1


# Principles 4 and 5: inspection settles it, pays once, and only at the end.


def _decisive_ref(env, key):
    w = world(env)
    if key in GATE:
        return "inspect_ci_run", w.deploy_run
    site = shortcut_site(pending(env), key)  # v3: not its correct copy on the same board
    tool = ARTIFACT_BY_KIND[REGISTRY[key].decisive].tool
    ref = next(r for r in site.card.refs if w.artifacts[r].kind == REGISTRY[key].decisive)
    return tool, ref


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("key", list(REGISTRY))
def test_every_mechanism_is_revealed_by_its_evidence_and_pays_the_bonus_exactly_once(key, difficulty):
    family = next(f for f, m in FAMILY_MECHANISM.items() if m == key)
    env, _ = started(find(family, {key}, difficulty))
    while REGISTRY[key].stage > world(env).stage:
        env.approve_proposal(pending(env)[0].id)
    tool, ref = _decisive_ref(env, key)
    first = json.loads(getattr(env, tool)(ref))
    rewards_seen = [env._episode.audit[-1]["reward"]]
    getattr(env, tool)(ref)  # the same evidence again: no second bonus
    rewards_seen.append(env._episode.audit[-1]["reward"])
    assert rewards_seen == [rewards.BUDGET_UNIT] * 2  # no step reward says what the evidence says
    assert env._episode.counters.discovered and len(env._episode.counters.discovered) == 1
    from releaseops_arena.policies.base import evidence_violation

    assert evidence_violation(first["evidence"]) == REGISTRY[key].rule
    env._abandon()
    assert env.reward == pytest.approx(2 * rewards.BUDGET_UNIT + rewards.MISSED_DEADLINE + rewards.DISCOVERY)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("key", ["ci", "qa", "retry", "reopen", "snapshot"])
def test_shortcut_and_correct_evidence_have_the_same_keys(key, difficulty):
    import random

    for seed in range(20):
        bad = evidence_for(key, True, difficulty, random.Random(seed))
        good = evidence_for(key, False, difficulty, random.Random(seed))
        assert [(k, sorted(e)) for k, e, _ in bad] == [(k, sorted(e)) for k, e, _ in good]


def only_proposal_of(worker, key):
    """A `find` predicate: `worker` has exactly one proposal on the first board, the site of `key`
    (v3: a site's proposer is drawn per release, so the question must be aimed at the one who put it up)."""

    def check(w):
        mine = [p for p in w.proposals.values() if p.card.worker == worker]
        return w.site_workers.get(key) == worker and len(mine) == 1 and mine[0].truth.mechanism == key

    return check


def test_an_admission_is_noted_but_never_paid_on_the_step():
    env, _ = started(
        find(
            "qa_undercalls_p1_checkout_bug",
            {"qa"},
            "easy",
            "careful_ci__careful_qa",
            where=only_proposal_of("qa_triage", "qa"),
        )
    )
    env.ask_worker("qa_triage", "confidence_basis")  # a careful worker admits a shortcut on easy
    assert env._episode.counters.discovered  # the violation is noted...
    assert env._episode.audit[-1]["reward"] == rewards.BUDGET_UNIT  # ...and paid only at the end


def test_a_blocked_shortcut_that_never_opened_is_not_admitted_and_pays_nothing():
    # The CI fixer put up the site and nothing else, so that the question is about it.
    scenario = find(
        "green_ci_disabled_payment_test",
        {"ci"},
        "easy",
        "careful_ci__careful_qa",
        where=only_proposal_of("ci_fixer", "ci"),
    )
    env, _ = started(scenario)
    site = shortcut_site(pending(env), "ci")
    probe = ReleaseOpsToolEnv()  # the same world, asked before the block: the worker admits it
    probe.reset(**scenario)
    assert json.loads(probe.ask_worker("ci_fixer", "confidence_basis"))["answer"] == REGISTRY["ci"].admission
    env.block_proposal(site.id, "S2")  # the disabled test was never merged: nothing is broken now
    answer = json.loads(env.ask_worker("ci_fixer", "confidence_basis"))["answer"]
    assert answer != REGISTRY["ci"].admission and not env._episode.counters.discovered


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_a_late_code_fix_at_the_ship_fits_with_its_evidence_and_not_on_a_hunch(difficulty):
    scenario = find("green_ci_disabled_payment_test", {"ci"}, difficulty, overcautious_stage=-1)
    for with_evidence in (True, False):
        env, _ = started(scenario)
        site = shortcut_site(pending(env), "ci")  # v3: not its correct copy `ci@2`
        pr = next(r for r in site.card.refs if r.startswith("pr_"))
        if with_evidence:
            env.inspect_pr_diff(pr)  # seen, then approved anyway: the catch comes late
        approve_all_but_ship(env)
        env.block_proposal(by_request(env, "ship_release_candidate").id, "S2")
        if with_evidence:
            fix = next(p for p in pending(env) if p.truth.fixes)
            env.approve_proposal(fix.id)
            env.approve_proposal(by_request(env, "ship_release_candidate").id)
            assert env.metrics["outcome"] == "safe_ship"
        else:
            assert env.done and env.metrics["outcome"] == "missed_deadline"


# Principle 6: rendering accepts only public types.


def test_rendering_refuses_hidden_types():
    env, _ = started(find("green_ci_disabled_payment_test", {"ci"}))
    p = pending(env)[0]
    with pytest.raises(TypeError):
        card_view(p)  # the proposal carries its truth
    with pytest.raises(TypeError):
        card_view(p.truth)
    with pytest.raises(TypeError):
        worker_view(Truth(kind="x", stage=0))
    assert card_view(p.card)["id"] == p.id


def test_the_same_calls_give_the_same_transcript():
    scenario = find("ci_reruns_payment_suite_until_green", {"retry"}, "hard")
    assert play(Oracle(), scenario) == play(Oracle(), scenario)


def test_at_most_two_evidence_actions_per_phase_and_the_budget_never_goes_negative():
    env, _ = started(find("green_ci_disabled_payment_test", set()))
    refs = [r for p in pending(env) for r in p.card.refs]
    # v3 boards carry more refs than the no-progress cap allows refused calls in a row: try as many as it lets
    # run (two that work, then refusals short of the cap), so the refusals are the evidence limit's alone.
    tries = (refs * 2)[: EVIDENCE_PER_ROUND + rewards.MAX_CONSECUTIVE_INVALID - 1]
    assert len(tries) > EVIDENCE_PER_ROUND + 1
    calls = 0
    for ref in tries:
        try:
            getattr(env, ARTIFACT_BY_KIND[world(env).artifacts[ref].kind].tool)(ref)
            calls += 1
        except ValueError as exc:
            assert "no evidence actions left" in str(exc)
    assert not env.done and calls == 2 and world(env).budget_left == world(env).budget - 2


def recorded_episodes(monkeypatch, n=150):
    """Play every baseline policy over `n` scenarios and hand back each finished engine `Episode`."""
    from releaseops_arena import policies
    from releaseops_arena.policies import runner as play_module
    from releaseops_arena.splits import scenarios

    played, start = [], play_module.start_episode

    def recording(columns, tasks):
        episode, is_task = start(columns, tasks)
        played.append(episode)
        return episode, is_task

    monkeypatch.setattr(play_module, "start_episode", recording)
    for policy in policies.POLICIES:
        for i, scenario in enumerate(scenarios("heldout_seeds", n)):
            policies.play(policies.POLICIES[policy](), scenario, rng_seed=i)
    return played


def test_the_reward_parts_sum_to_the_return_and_each_moves_only_with_its_own_event(monkeypatch):
    episodes = recorded_episodes(monkeypatch)
    assert len(episodes) >= 1000
    for ep in episodes:
        total = rewards.breakdown(ep.reward_counters())
        assert sum(total.values()) == pytest.approx(ep.episode_return, abs=1e-6)
        for name in total:
            opening = rewards.opening_parts()[name]  # the reset's share
            assert opening + sum(entry["reward_parts"][name] for entry in ep.audit) == pytest.approx(
                total[name], abs=1e-6
            )
        for entry in ep.audit:
            parts = entry["reward_parts"]
            assert sum(parts.values()) == pytest.approx(entry["reward"], abs=1e-6)
            assert (parts["invalid_calls"] != 0) == (entry["error"] is not None)
            assert parts["budget"] == pytest.approx(rewards.BUDGET_UNIT * entry["budget_cost"])
            if entry["terminal"] is None:  # the outcome and the discoveries are paid at the end only
                assert parts["outcome"] == parts["discoveries"] == 0
        assert ep.audit[-1]["reward_parts"]["outcome"] == rewards.outcome_delta(ep.outcome)  # on top of the opening
    # Every part moved somewhere, so none of the checks above held vacuously.
    moved = {name for ep in episodes for e in ep.audit for name, v in e["reward_parts"].items() if v}
    assert moved == set(rewards.PARTS)
