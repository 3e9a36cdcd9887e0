"""The reward as a rubric tree: named parts, totals equal to the engine's returns, the breakdown on the wire."""

import pytest
from openenv.core import GenericEnvClient

from client.models import ReleaseOpsAction
from releaseops_arena import rewards
from releaseops_arena.splits import scenarios
from server.releaseops_environment import ReleaseOpsEnvironment
from server.rubric import EpisodeReturn
from tests.wire import local_transcript

POLICIES = ["planner", "rule", "random", "naive", "block_everything", "oracle"]


def test_the_tree_names_one_child_per_part_of_the_reward_table():
    rubric = EpisodeReturn()
    assert [name for name, _ in rubric.named_rubrics()] == ["outcome", "budget", "invalid_calls", "discoveries"]
    assert all(child.last_score is None for child in rubric.children())


def test_the_rubric_total_is_the_engine_return_on_thousands_of_episodes():
    env = ReleaseOpsEnvironment()
    played = 0
    for policy in POLICIES:
        for i, scenario in enumerate(scenarios("heldout_seeds", 200)):
            local = local_transcript(policy, scenario, rng_seed=i)
            env.reset(**scenario)
            assert env.rubric.last_score is None  # a new episode forgets the last one's scores
            for tool, args in local["calls"]:
                observation = env.step(ReleaseOpsAction(tool_name=tool, arguments=args))
            if not observation.done:  # the policy stopped: the engine scores the cut episode
                observation = env.step(ReleaseOpsAction(tool_name="end_episode"))
            assert env.rubric.last_score == pytest.approx(observation.episode_return, abs=1e-6)
            assert observation.metadata == {}  # the record is offered in state, once
            breakdown = env.state.reward_breakdown
            assert breakdown == {name: child.last_score for name, child in env.rubric.named_children()}
            assert sum(breakdown.values()) == pytest.approx(local["return"], abs=1e-6)
            assert breakdown["outcome"] == rewards.OUTCOME_REWARD[observation.outcome]
            played += 1
    assert played == 1200


def test_the_breakdown_reaches_a_generic_env_client(live_server):
    with GenericEnvClient(base_url=live_server).sync() as env:
        env.reset(split="heldout_seeds", index=4)
        result = env.step({"tool_name": "end_episode", "arguments": {}})
        record = env.state()
    assert result.done
    assert record["reward_breakdown"] == {
        "outcome": rewards.MISSED_DEADLINE,
        "budget": 0.0,
        "invalid_calls": 0.0,
        "discoveries": 0.0,
    }
