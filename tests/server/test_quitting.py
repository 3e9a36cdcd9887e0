"""Quitting never pays, however a client keeps score.

An episode cut at a random point and abandoned must score no better than the
same episode held on to its deadline (hold_release until the release runs out
of time, which costs nothing but time), under every way of keeping score a
trainer uses: the sum of step rewards with the reset's and without it, the
last step's reward, `get_reward()`, the remote env's `end_episode`, and a
socket closed mid-episode. Finished episodes' rewards, the reset's included,
still sum to their return.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from releaseops_arena import ReleaseOpsToolEnv, rewards
from releaseops_arena.splits import task_scenario
from tests.wire import local_transcript, open_socket, send

POLICIES = ("naive", "rule", "planner", "random", "inspect_everything")


def _rewards(scenario: dict, calls: list) -> tuple[ReleaseOpsToolEnv, list[float]]:
    """Replay calls in-process; each step's reward (the audit's, the one the wire carries)."""
    env = ReleaseOpsToolEnv()
    env.reset(**scenario)
    for tool, args in calls:
        try:
            getattr(env, tool)(**args)
        except ValueError:
            pass
    return env, [entry["reward"] for entry in env._episode.audit]


def scores(opening: float, steps: list[float], total: float) -> dict[str, float | None]:
    """Every way a client keeps score, from the reset's reward, the step rewards and the env's return."""
    return {
        "sum_with_reset": opening + sum(steps),
        "sum_from_first_step": sum(steps),
        "last_step": steps[-1] if steps else None,  # a client that keeps the last reward it saw
        "get_reward": total,
    }


def held_to_deadline(scenario: dict, calls: list) -> tuple[list[float], float]:
    """The same calls, then hold_release until the episode ends: the cheapest way to play on."""
    env, _ = _rewards(scenario, calls)
    while not env.done:
        env.hold_release("awaiting_fix")
    assert env.metrics["outcome"] == "missed_deadline"
    return [entry["reward"] for entry in env._episode.audit], env.reward


def abandoned(scenario: dict, calls: list) -> tuple[list[float], float]:
    env, steps = _rewards(scenario, calls)
    assert not env.done
    return steps, env.get_reward()


def assert_no_better(cut: dict, played_on: dict) -> None:
    for way, score in cut.items():
        if score is None:
            continue
        assert score <= played_on[way] + 1e-9, f"quitting pays under {way}: {score} > {played_on[way]}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(POLICIES),
    split=st.sampled_from(["train", "heldout_seeds", "unseen_family"]),
    index=st.integers(0, 400),
    difficulty=st.sampled_from(["easy", "medium", "hard"]),
    cut=st.floats(0, 1, exclude_max=True),
    seed=st.integers(0, 3),
)
def test_an_abandoned_episode_scores_no_better_than_holding_on_to_the_deadline(
    policy, split, index, difficulty, cut, seed
):
    scenario = task_scenario(split, index, difficulty)
    local = local_transcript(policy, scenario, seed)
    calls = local["calls"]
    if not local["metrics"]["tool_calls"]:
        return
    # Cut before the call that ended the episode (an episode a policy abandons itself ends early too).
    played = len(calls) - (0 if local["metrics"]["terminal_reason"] == "abandoned" else 1)
    k = int(cut * (played + 1))
    steps, total = abandoned(scenario, calls[:k])
    on_steps, on_total = held_to_deadline(scenario, calls[:k])
    opening = rewards.OPENING_REWARD
    assert_no_better(scores(opening, steps, total), scores(opening, on_steps, on_total))
    # get_reward's abandonment is charged exactly as the deadline (the discoveries made are paid either way).
    assert total == pytest.approx(on_total)
    # A finished episode's rewards, the reset's included, sum to its return.
    assert opening + sum(on_steps) == pytest.approx(on_total, abs=1e-6)
    full, full_steps = _rewards(scenario, calls)
    if full.done:
        assert opening + sum(full_steps) == pytest.approx(full.reward, abs=1e-6)


def test_no_client_scores_a_quit_before_the_first_call_above_a_missed_deadline():
    scenario = task_scenario("heldout_seeds", 3, "medium")
    steps, total = abandoned(scenario, [])
    on_steps, on_total = held_to_deadline(scenario, [])
    assert steps == [] and total == on_total == rewards.MISSED_DEADLINE
    assert rewards.OPENING_REWARD + sum(on_steps) == rewards.MISSED_DEADLINE
    assert sum(on_steps) == 0.0  # from the first step on, the held episode and the quit tie at zero


def test_the_opening_reward_is_the_same_for_every_world():
    """A constant: the reset's reward says nothing about the hidden draw."""
    seen = set()
    for split in ("train", "heldout_seeds", "unseen_family", "unseen_mix"):
        for index in range(20):
            env = ReleaseOpsToolEnv()
            env.reset(**task_scenario(split, index))
            seen.add(env.reward)
    assert seen == {rewards.OPENING_REWARD}


@pytest.mark.parametrize("policy, index", [("planner", 5), ("rule", 11), ("naive", 2)])
def test_over_the_wire_end_episode_and_a_closed_socket_score_no_better_than_the_deadline(live_server, policy, index):
    from client import make_remote_env_factory

    scenario = task_scenario("heldout_seeds", index, "medium")
    calls = local_transcript(policy, scenario, 0)["calls"]
    k = max(0, len(calls) // 2)
    on_steps, on_total = held_to_deadline(scenario, calls[:k])

    async def closed_mid_episode() -> list[float]:
        async with open_socket(live_server) as ws:
            reply = await send(ws, {"type": "reset", "data": scenario})
            seen = [reply["data"]["reward"]]
            for tool, args in calls[:k]:
                reply = await send(ws, {"type": "step", "data": {"tool_name": tool, "arguments": args}})
                seen.append(reply["data"]["reward"])
            assert not reply["data"]["done"]
        return seen  # the socket closes here, mid-episode

    seen = asyncio.run(closed_mid_episode())
    assert seen[0] == rewards.OPENING_REWARD
    closed = scores(seen[0], seen[1:], seen[0] + sum(seen[1:]))
    assert_no_better(closed, scores(rewards.OPENING_REWARD, on_steps, on_total))

    factory = make_remote_env_factory(live_server)
    remote = factory()
    try:
        assert remote.reset(**scenario)
        assert remote.reward == rewards.OPENING_REWARD
        for tool, args in calls[:k]:
            try:
                getattr(remote, tool)(**args)
            except ValueError:
                pass
        assert remote.get_reward() == pytest.approx(on_total)  # end_episode: charged as the deadline
        assert remote.metrics["terminal_reason"] == "abandoned"
    finally:
        factory.close()
