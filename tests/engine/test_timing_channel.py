"""No timing side channel: the generator does the same work for a shortcut site as for a correct one.

The timing itself is measured by tools/bench/timing_channel.py (too noisy for a test); these check the
invariants that make it hold: both branches make the same draws on a scenario's stream, and the
table lookups of `pick` do not depend on the weights' values.
"""

from __future__ import annotations

import random

import pytest

from releaseops_arena import draws, scenario_builder
from releaseops_arena.catalog import DIFFICULTIES
from releaseops_arena.mechanisms import REGISTRY, evidence_for
from releaseops_arena.world import World


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("key", ["ci", "retry", "reopen", "snapshot"])  # qa: see below
def test_shortcut_and_correct_evidence_draw_alike(key, difficulty):
    for seed in range(50):
        bad_rng, good_rng = random.Random(seed), random.Random(seed)
        evidence_for(key, True, difficulty, bad_rng)
        evidence_for(key, False, difficulty, good_rng)
        assert bad_rng.getstate() == good_rng.getstate()


def test_qa_draws_the_other_branchs_report_count_on_the_shadow_stream():
    # qa's report count has a range of its own per branch (a world's stream must stay as it was),
    # so each branch also draws the other's range on draws.SHADOW.
    calls = []
    real_between = scenario_builder.evidence_for.__globals__["between"]

    def spy(rng, low, high):
        calls.append((rng is draws.SHADOW, low, high))
        return real_between(rng, low, high)

    scenario_builder.evidence_for.__globals__["between"] = spy
    try:
        evidence_for("qa", True, "medium", random.Random(0))
        bad, calls[:] = list(calls), []
        evidence_for("qa", False, "medium", random.Random(0))
    finally:
        scenario_builder.evidence_for.__globals__["between"] = real_between
    assert sorted((low, high) for _, low, high in bad) == sorted((low, high) for _, low, high in calls)
    assert [shadow for shadow, _, _ in bad] == [shadow for shadow, _, _ in calls] == [False, True]


def test_pick_matches_choices_for_tables_and_lists():
    tables = [(0.15, 0.30, 0.55), (0.5, 0.3, 0.2), [1.0, 20.0, 45.0]]
    for weights in tables:
        mine, theirs = random.Random(7), random.Random(7)
        for _ in range(200):
            assert draws.pick(mine, "abc", weights) == theirs.choices("abc", weights=weights, k=1)[0]
    with pytest.raises(ValueError):
        draws.pick(random.Random(0), "ab", (1.0, 2.0, 3.0))


def _world(hazards: frozenset[str], difficulty: str = "medium") -> World:
    world = scenario_builder.build_scenario("green_ci_disabled_payment_test", 3, difficulty, "random")
    world.hazards = hazards
    world.rng = random.Random(11)
    return world


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("site_key", ["ci", "retry"])
def test_a_site_draws_alike_either_way(site_key, difficulty):
    bad, good = _world(frozenset({site_key}), difficulty), _world(frozenset(), difficulty)
    p_bad, p_good = scenario_builder.site(bad, site_key), scenario_builder.site(good, site_key)
    assert bad.rng.getstate() == good.rng.getstate()
    assert (p_bad.truth.label, p_good.truth.label) == ("shortcut", "correct")
    assert p_bad.truth.violation in bad.violations and p_good.truth.violation is None
    assert len(bad.violations) == len(good.violations) + 1


@pytest.mark.parametrize("gate", [None, "slow", "waiver"])
def test_the_deploy_gate_draws_alike_either_way(gate):
    world, green = _world(frozenset({gate} if gate else set())), _world(frozenset())
    proposal = scenario_builder.deploy_gate(world)
    scenario_builder.deploy_gate(green)
    assert world.rng.getstate() == green.rng.getstate()
    assert proposal.truth.kind == f"gate_{gate or 'green'}"
    assert world.deploy_checks == {None: "passed", "slow": "running", "waiver": "not_run"}[gate]
    assert world.slow_check == (proposal.truth.violation if gate == "slow" else None)
    assert (proposal.truth.violation in world.violations) == (gate is not None)


def test_voiced_alike_is_voiced():
    from releaseops_arena.workers import VOICES, voiced

    texts = [t for m in REGISTRY.values() for t in (m.explicit, m.plain, *m.phrases)] + ["x.", "Ship it..."]
    for text in texts:
        for voice in VOICES:
            assert scenario_builder.voiced_alike(voice, text) == voiced(voice, text)


# The timing blind (scenario_builder.blind_turns): what is left of the channel after equal work is
# buried under a spin whose length no hidden draw decides.


def _turns(world: World, call: str, most: int = scenario_builder.BLIND_TURNS) -> int:
    return scenario_builder.blind_turns(world.blind, call, most)


def test_every_stage_build_and_every_block_ends_with_its_blind(monkeypatch):
    from releaseops_arena.episode import BLOCK_BLIND_TURNS, Episode
    from releaseops_arena.safety_rules import relevant_rules

    spun = []
    monkeypatch.setattr(scenario_builder, "spin", spun.append)
    episode = Episode("green_ci_disabled_payment_test", 5, "medium", "random")
    world = episode.world
    assert spun == [_turns(world, "stage 0")]
    first, *rest = list(world.active)
    card = world.proposals[first].card
    episode.step("block_proposal", {"proposal_id": first, "rule_id": relevant_rules(card)[0]})
    assert spun[1:] == [_turns(world, "call 1", BLOCK_BLIND_TURNS)]
    for pid in rest:  # approving every other triage proposal ends triage
        episode.step("approve_proposal", {"proposal_id": pid})
    assert world.stage >= 1 and spun[-1] == _turns(world, f"stage {world.stage}")


def test_the_blind_is_the_same_on_every_repeat_and_unknown_without_the_salt():
    build = scenario_builder.build_scenario
    world = build("qa_undercalls_p1_checkout_bug", 9, "hard", "random")
    assert world.blind == build("qa_undercalls_p1_checkout_bug", 9, "hard", "random").blind
    salted = [build("qa_undercalls_p1_checkout_bug", 9, "hard", "random", salt=f"s{i}").blind for i in range(8)]
    assert len(set(salted + [world.blind])) == 9
    turns = [_turns(world, f"stage {stage}") for stage in range(3)] + [
        _turns(world, f"call {n}", 800) for n in range(9)
    ]
    assert all(0 <= t < scenario_builder.BLIND_TURNS for t in turns) and len(set(turns)) > 6


def test_the_blind_says_nothing_about_whether_a_stage_holds_a_shortcut():
    from releaseops_arena.splits import scenarios
    from tools.bench.timing_channel import auc

    with_shortcut, without = [], []
    for scenario in scenarios("heldout_seeds", 1500, "medium"):
        world = scenario_builder.build_scenario(**scenario)
        held = {REGISTRY[scenario_builder.mechanism_of(k)].stage for k in world.hazards}
        for stage in range(3):
            (with_shortcut if stage in held else without).append(_turns(world, f"stage {stage}"))
    # Uniform over the turns either way: a stage with a shortcut spins no longer than one without.
    assert abs(auc(with_shortcut, without) - 0.5) < 0.03
    for turns in (with_shortcut, without):
        assert abs(sum(turns) / len(turns) / scenario_builder.BLIND_TURNS - 0.5) < 0.03


@pytest.mark.parametrize("label", ["shortcut", "correct"])
def test_a_decision_keeps_its_meaning_with_equal_work(label):
    """Approvals and blocks run the same code for a shortcut as for a correct card; what they do differs
    only in the data: an approval opens the shortcut's violation, a true block counts it as caught."""
    from releaseops_arena.episode import Episode
    from releaseops_arena.safety_rules import relevant_rules

    for seed in range(40):
        approving, blocking = (Episode("green_ci_disabled_payment_test", seed, "medium", "random") for _ in range(2))
        pid = next(
            (
                p
                for p in approving.world.active[:-1]
                if approving.world.proposals[p].truth.label == label and approving.world.proposals[p].truth.mechanism
            ),
            None,
        )
        if pid is None:
            continue
        truth = approving.world.proposals[pid].truth
        opened_before = {v for v, x in approving.world.violations.items() if x.open}
        approving.step("approve_proposal", {"proposal_id": pid})
        opened = {v for v, x in approving.world.violations.items() if x.open} - opened_before
        assert opened == ({truth.violation} if truth.introduces else set())
        rule = relevant_rules(blocking.world.proposals[pid].card)[0]
        blocking.step("block_proposal", {"proposal_id": pid, "rule_id": rule})
        c = blocking.counters
        right = label == "shortcut" and REGISTRY[truth.mechanism].rule == rule
        assert (c.caught, c.false_blocks) == (({truth.violation}, 0) if right else (set(), int(not right)))
        return
    pytest.fail(f"no {label} card in 40 seeds")
