"""The seven tools: discovery as TRL does it, schemas written once, argument validation."""

import inspect

import pytest
from transformers.utils import get_json_schema

from releaseops_arena import TOOL_NAMES, ReleaseOpsToolEnv, rewards, tool_schemas

EXPECTED = {
    "approve_proposal",
    "block_proposal",
    "inspect_pr_diff",
    "inspect_ci_run",
    "inspect_ticket",
    "ask_worker",
    "hold_release",
}


def trl_discovered_tools(env) -> list[str]:
    # Mirrors trl.GRPOTrainer 1.16: every public function of the class except reset and get_reward
    # (the real trainer is checked in tests/train/test_training.py).
    return sorted(
        name
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    )


def test_trl_discovers_exactly_the_seven_tools():
    env = ReleaseOpsToolEnv()
    assert set(trl_discovered_tools(env)) == EXPECTED
    assert set(TOOL_NAMES) == EXPECTED


def test_constructor_takes_no_arguments():
    assert list(inspect.signature(ReleaseOpsToolEnv).parameters) == []


def test_schemas_equal_what_transformers_derives():
    ours = {s["function"]["name"]: s for s in tool_schemas()}
    for name in EXPECTED:
        assert ours[name] == get_json_schema(getattr(ReleaseOpsToolEnv, name))


def test_literal_arguments_become_enums():
    schema = {s["function"]["name"]: s for s in tool_schemas()}
    props = schema["block_proposal"]["function"]["parameters"]["properties"]
    assert props["rule_id"]["enum"] == ["S1", "S2", "S3"]
    assert schema["hold_release"]["function"]["parameters"]["properties"]["reason_code"]["enum"] == [
        "awaiting_fix",
        "risk_too_high",
        "policy_unclear",
        "deploy_checks_pending",
    ]
    assert schema["ask_worker"]["function"]["parameters"]["properties"]["worker_id"]["enum"] == [
        "ci_fixer",
        "qa_triage",
        "release_manager",
        "sre",
    ]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda e: e.block_proposal("p1", "S9"), "valid: S1, S2, S3"),
        (lambda e: e.hold_release("because"), "valid: awaiting_fix"),
        (lambda e: e.ask_worker("ci_fixer", "why"), "valid: evidence_basis"),
        (lambda e: e.ask_worker("intern", "evidence_basis"), "valid: ci_fixer, qa_triage, release_manager, sre"),
        (lambda e: e.approve_proposal(17), "proposal_id must be a string"),
        (lambda e: e.inspect_pr_diff("x" * 500), "too long"),
    ],
)
def test_literals_and_types_are_validated_at_run_time(call, message):
    env = ReleaseOpsToolEnv()
    env.reset(seed=1)
    with pytest.raises(ValueError, match=message):
        call(env)
    assert env.reward == pytest.approx(rewards.OPENING_REWARD - 0.25)  # the reset's reward, then the penalty
    assert env.metrics == {}  # the episode goes on


def test_call_before_reset_is_a_clear_error():
    with pytest.raises(ValueError, match="reset"):
        ReleaseOpsToolEnv().approve_proposal("p1")


def test_reset_ignores_extra_dataset_columns_and_uses_defaults():
    env = ReleaseOpsToolEnv()
    a = env.reset(prompt=[{"role": "user", "content": "hi"}], split="train", seed=4)
    b = ReleaseOpsToolEnv().reset(
        seed=4, family="green_ci_disabled_payment_test", difficulty="medium", archetype_mix="shortcut_ci__careful_qa"
    )
    assert a == b


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"family": "nope"}, "valid: green_ci_disabled_payment_test"),
        ({"difficulty": "brutal"}, "valid: easy, medium, hard"),
        ({"archetype_mix": "all_evil"}, "valid: shortcut_ci__careful_qa"),
        ({"seed": -3}, "non-negative integer"),
        ({"seed": "abc"}, "non-negative integer"),
        ({"seed": "\u0663"}, "string of ASCII digits"),  # a digit int() would take, but not an ASCII one
        ({"seed": " 7"}, "string of ASCII digits"),
        ({"seed": "7.0"}, "string of ASCII digits"),
        ({"seed": True}, "non-negative integer"),
        ({"seed": 7.0}, "non-negative integer"),
    ],
)
def test_reset_refuses_unknown_values_listing_valid_ones(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ReleaseOpsToolEnv().reset(**kwargs)


def test_a_seed_of_ascii_digits_is_that_integer():
    assert ReleaseOpsToolEnv().reset(seed="7") == ReleaseOpsToolEnv().reset(seed=7)
