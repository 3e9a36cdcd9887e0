"""Property tests: arbitrary call sequences on arbitrary scenarios stay inside the contract."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from releaseops_arena import ALL_FAMILIES, ALL_MIXES, DIFFICULTIES, TOOL_NAMES, ReleaseOpsToolEnv, rewards
from releaseops_arena.catalog import HOLD_REASONS, QUESTION_TYPES, RULE_IDS, WORKERS
from tests.scenarios import call_args, visible_ids

scenarios = st.fixed_dictionaries(
    {
        "family": st.sampled_from(ALL_FAMILIES),
        "seed": st.integers(0, 10_000),
        "difficulty": st.sampled_from(DIFFICULTIES),
        "archetype_mix": st.sampled_from(ALL_MIXES),
    }
)
# A call is (tool, argument choices); ids are picked from what is visible, or junk.
junk = st.one_of(st.text(max_size=80), st.integers(), st.none(), st.lists(st.integers(), max_size=2))
calls = st.lists(
    st.tuples(
        st.sampled_from(TOOL_NAMES + ("merge_pr", "rollback")),
        st.integers(0, 50),  # index into the visible ids
        st.sampled_from(RULE_IDS + QUESTION_TYPES + HOLD_REASONS + tuple(WORKERS) + ("S4",)),
        st.booleans(),  # use junk instead of a visible id
        junk,
    ),
    max_size=80,
)


def drive(scenario, sequence) -> tuple[list[str], ReleaseOpsToolEnv]:
    env = ReleaseOpsToolEnv()
    transcript = [env.reset(**scenario)]
    for tool, index, choice, use_junk, junk_value in sequence:
        ids = visible_ids(env)
        args = call_args(tool, junk_value if use_junk else ids[index % len(ids)], choice)
        try:
            if tool in TOOL_NAMES:
                out = getattr(env, tool)(**args)
            else:
                out = env._call_tool(tool, **args)  # what a server forwards for an unknown tool
            transcript.append(out)
        except ValueError as exc:  # the only exception a call may raise
            transcript.append("error:" + str(exc))
        w = env._episode.world
        assert w.budget_left >= 0 and w.evidence_left >= 0  # V2
        assert rewards.RETURN_MIN <= env.reward <= rewards.RETURN_MAX
    return transcript, env


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios, calls)
def test_random_calls_never_break_the_contract(scenario, sequence):
    transcript, env = drive(scenario, sequence)
    assert env._episode.counters.tool_calls <= rewards.MAX_TOOL_CALLS  # V3
    if env.done:
        assert env.metrics["outcome"] in ("safe_ship", "unsafe_ship", "missed_deadline")
        assert env.metrics["episode_return"] == env.reward
    # Replay is byte-identical.
    again, _ = drive(scenario, sequence)
    assert again == transcript


@settings(max_examples=60, deadline=None)
@given(scenarios, st.lists(st.sampled_from(["approve", "hold", "junk"]), min_size=200, max_size=200))
def test_every_episode_terminates_within_the_cap(scenario, moves):
    env = ReleaseOpsToolEnv()
    env.reset(**scenario)
    for move in moves:
        if env.done:
            break
        try:
            if move == "hold":
                env.hold_release("risk_too_high")
            elif move == "junk":
                env.approve_proposal("p0")
            else:
                w = env._episode.world
                env.approve_proposal(next(p for p in w.active if w.proposals[p].status == "pending"))
        except ValueError:
            pass
    assert env.done
    assert env._episode.counters.tool_calls <= rewards.MAX_TOOL_CALLS


def _invalid(call):
    try:
        call()
    except ValueError:
        return
    raise AssertionError("expected an invalid call")


def test_the_same_invalid_call_repeated_ends_the_episode_as_a_no_progress_loop():
    env = ReleaseOpsToolEnv()
    env.reset(seed=2)
    for _ in range(rewards.MAX_REPEATED_INVALID):
        assert not env.done
        _invalid(lambda: env.approve_proposal("p0"))
    assert env.done and env.metrics["terminal_reason"] == "no_progress_loop"
    assert env.metrics["outcome"] == "missed_deadline"
    assert env.reward == pytest.approx(rewards.MISSED_DEADLINE + rewards.MAX_REPEATED_INVALID * rewards.INVALID_ACTION)


def test_many_different_invalid_calls_in_a_row_end_the_episode_but_a_valid_call_resets_the_count():
    env = ReleaseOpsToolEnv()
    env.reset(seed=2)
    for i in range(rewards.MAX_CONSECUTIVE_INVALID - 1):
        _invalid(lambda i=i: env.approve_proposal(f"p{900 + i}"))
    env.ask_worker("sre", "risk_summary")
    for i in range(rewards.MAX_CONSECUTIVE_INVALID - 1):
        _invalid(lambda i=i: env.approve_proposal(f"p{800 + i}"))
    assert not env.done
    _invalid(lambda: env.approve_proposal("p1000"))
    assert env.done and env.metrics["terminal_reason"] == "no_progress_loop"


def test_calls_after_the_end_raise_and_change_nothing():
    env = ReleaseOpsToolEnv()
    env.reset(seed=2)
    while not env.done:
        env.hold_release("awaiting_fix")
    before = (env.reward, json.dumps(env.metrics), len(env._episode.audit))
    for call in (
        lambda: env.hold_release("awaiting_fix"),
        lambda: env.approve_proposal("p1"),
        lambda: env.inspect_ticket("ticket_1"),
    ):
        try:
            call()
            raise AssertionError("a call after the end must raise")
        except ValueError as exc:
            assert "episode is over" in str(exc)
    assert (env.reward, json.dumps(env.metrics), len(env._episode.audit)) == before


class _BadRepr:
    def __repr__(self):
        raise RuntimeError("repr exploded")


class _SneakyStr(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


def _nested(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("bad", [_nested(100_000), _BadRepr(), _SneakyStr("p1"), _SneakyStr("approve_proposal")])
def test_hostile_arguments_are_invalid_calls_not_crashes(bad):
    env = ReleaseOpsToolEnv()
    env.reset(seed=3)
    attempts = [
        lambda: env._call_tool("approve_proposal", proposal_id=bad),  # as a value
        lambda: env._call_tool(bad, proposal_id="p1"),
    ]  # as a tool name
    for attempt in attempts:
        with pytest.raises(ValueError):
            attempt()
        entry = env._episode.audit[-1]
        assert entry["error"] and entry["reward"] == rewards.INVALID_ACTION
    result = env._episode.step("approve_proposal", {bad: "p1"} if isinstance(bad, str) else bad)  # as a key / body
    assert result.error and not env.done  # the episode goes on
    env.hold_release("awaiting_fix")


@pytest.mark.parametrize("seed", ["\u0661\u0662", " 7 ", "1_000", "7.0", "-3", "", True, 3.0])
def test_seed_must_be_an_int_or_plain_ascii_digits(seed):
    with pytest.raises(ValueError, match="seed must be"):
        ReleaseOpsToolEnv().reset(seed=seed)


@pytest.mark.parametrize("seed", [7, "7", "0012"])
def test_int_and_digit_string_seeds_are_accepted(seed):
    assert ReleaseOpsToolEnv().reset(seed=seed).startswith("{")


def test_the_return_bounds_are_real():
    """RETURN_MAX is attained (a safe ship after paying for as many reveals as the budget and the
    release's shortcut sites allow: v3 draws at most len(SHORTCUT_COUNT) - 1 of them);
    no episode of the oracle, the planner or random play leaves [RETURN_MIN, RETURN_MAX]."""
    from releaseops_arena.policies import POLICIES, play
    from releaseops_arena.splits import scenarios

    best = max(play(POLICIES["oracle"](), s)["return"] for s in scenarios("unseen_family", 3000, "easy"))
    assert best == pytest.approx(rewards.RETURN_MAX)
    for name in ("planner", "random", "inspect_everything"):
        for s in scenarios("heldout_seeds", 200):
            assert rewards.RETURN_MIN <= play(POLICIES[name](), s)["return"] <= rewards.RETURN_MAX


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)


@given(json_values)
def test_the_renderer_writes_what_json_dumps_writes(value):
    # rendering.dumps reuses one C encoder for speed; the text must stay exactly json.dumps' compact form
    from releaseops_arena.rendering import dumps

    assert dumps(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@given(
    st.integers(0, 2**32),
    st.lists(
        st.tuples(
            st.sampled_from(["below", "between", "one_of", "shuffle"]), st.integers(1, 10**6), st.integers(0, 10**6)
        ),
        max_size=30,
    ),
)
def test_the_generators_draws_are_the_random_modules_draw_for_draw(seed, plan):
    # the worlds of every split depend on it: draws.py stands in for randrange, randint and choice
    import random

    from releaseops_arena import draws

    ours, theirs = random.Random(seed), random.Random(seed)
    for kind, n, low in plan:
        if kind == "below":
            assert draws.below(ours, n) == theirs.randrange(n)
        elif kind == "between":
            assert draws.between(ours, low, low + n) == theirs.randint(low, low + n)
        elif kind == "one_of":
            options = list(range(n % 50 + 1))
            assert draws.one_of(ours, options) == theirs.choice(options)
        else:
            mine, yours = list(range(n % 12)), list(range(n % 12))
            draws.shuffle(ours, mine)
            theirs.shuffle(yours)
            assert mine == yours
