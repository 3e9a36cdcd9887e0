"""The task brief: a pretrained model can play from it, and it can never disagree with the engine."""

from __future__ import annotations

import re

from releaseops_arena import ReleaseOpsToolEnv, catalog, rewards
from releaseops_arena.brief import BOARD_LEAD, BRIEF, MAX_BRIEF_CHARS, PROMPT_VERSION, prompt_messages, with_board
from releaseops_arena.safety_rules import RISK_RULES
from releaseops_arena.scenario_builder import DIFFICULTY, EVIDENCE_PER_ROUND, HOURS_PER_ROUND
from releaseops_arena.splits import task_scenario
from releaseops_arena.tools import TOOL_NAMES


def test_the_brief_fits_its_limit_and_carries_a_version():
    assert len(BRIEF) <= MAX_BRIEF_CHARS == 2500
    assert re.fullmatch(r"brief-\d+", PROMPT_VERSION)


def test_the_brief_names_every_rule_with_its_board_name_and_the_risk_tags_it_covers():
    for rid, rule in catalog.RULES.items():
        line = next(line for line in BRIEF.splitlines() if line.startswith(f"- {rid} "))
        assert rule.name in line  # the board's rules list uses these names
        tags = [tag for tag, rules in RISK_RULES.items() if rid in rules]
        assert line.endswith("Tags: " + ", ".join(tags) + ".")
    for tag, rules in RISK_RULES.items():
        if not rules:
            assert tag in BRIEF


def test_the_brief_names_every_tool_and_reward_constant_and_the_game_numbers():
    for name in TOOL_NAMES:
        assert name in BRIEF
    for outcome, value in rewards.OUTCOME_REWARD.items():
        assert f"{outcome} {value:+.2f}" in BRIEF
    for value in (rewards.BUDGET_UNIT, rewards.INVALID_ACTION, rewards.DISCOVERY, rewards.OPENING_REWARD):
        assert f"{value:+.2f}" in BRIEF
    assert f"the reset pays {rewards.OPENING_REWARD:+.2f}, the end the difference" in BRIEF
    assert "Review budget per release: 4 on easy, 3 on medium and hard;" in BRIEF
    assert "Spare phases: 2 on easy, 1 on medium and hard." in BRIEF
    assert [DIFFICULTY[level]["budget"] for level in catalog.DIFFICULTIES] == [4, 3, 3]
    assert [DIFFICULTY[level]["slack"] for level in catalog.DIFFICULTIES] == [2, 1, 1]
    # "A false block ... two phases, more than medium or hard can spare": true of the table.
    assert "more than medium or hard can spare" in BRIEF
    assert all(DIFFICULTY[level]["slack"] < 2 for level in ("medium", "hard")) and DIFFICULTY["easy"]["slack"] >= 2
    assert f"{HOURS_PER_ROUND} hours" in BRIEF and f"at most {EVIDENCE_PER_ROUND} evidence actions" in BRIEF
    assert (
        f"{rewards.MAX_TOOL_CALLS} calls at most; {rewards.MAX_CONSECUTIVE_INVALID} invalid calls in a row, "
        f"or the same one {rewards.MAX_REPEATED_INVALID} times in a row" in BRIEF
    )
    for phase in catalog.PHASES:
        assert phase in BRIEF
    for worker in catalog.WORKERS:
        assert worker in BRIEF
    assert "deploy_checks_pending" in BRIEF and "worker_stats" in BRIEF


def test_the_brief_says_to_play_until_outcome_and_never_to_stop_before():
    assert '"outcome"' in BRIEF and "keep calling tools" in BRIEF
    for sentence in re.split(r"(?<=[.:;])\s", BRIEF):
        if re.search(r"\bstop", sentence, re.IGNORECASE):
            assert sentence.startswith("Stopping early never scores better"), sentence


def test_a_false_block_of_a_needed_proposal_misses_the_deadline_on_medium_as_the_brief_says():
    from releaseops_arena.episode import Episode

    missed = tried = 0
    for index in range(8):
        ep = Episode(**task_scenario("train", index, "medium"))
        blocked = False
        while not ep.done:
            pending = [p for p in ep.world.active if ep.world.proposals[p].status == "pending"]
            target = next(
                (
                    p
                    for p in pending
                    if not blocked
                    and ep.world.proposals[p].truth.label == "correct"
                    and ep.world.proposals[p].truth.critical
                    and ep.world.proposals[p].card.risk
                    and _allowed(ep, p)
                ),
                None,
            )
            if target is not None:
                ep.step("block_proposal", {"proposal_id": target, "rule_id": _allowed(ep, target)[0]})
                blocked = True
            elif pending:
                ep.step("approve_proposal", {"proposal_id": pending[0]})
            else:
                ep.step("hold_release", {"reason_code": "awaiting_fix"})
        tried += blocked
        missed += blocked and ep.outcome == "missed_deadline"
    assert tried >= 3 and missed == tried  # every release with a needed proposal falsely blocked ran out of time


def _allowed(ep, pid):
    from releaseops_arena.safety_rules import relevant_rules

    return relevant_rules(ep.world.proposals[pid].card)


def test_the_board_starts_on_its_own_line_where_a_trainer_joins_prompt_and_observation():
    observation = ReleaseOpsToolEnv().reset(**task_scenario("train", 0))
    prompt = prompt_messages()
    assert [m["role"] for m in prompt] == ["system", "user"] and prompt[0]["content"] == BRIEF
    joined = prompt[-1]["content"] + observation  # what TRL's GRPOTrainer does with reset()'s return
    assert joined == BOARD_LEAD + observation and joined.splitlines()[-1] == observation
    assert with_board(observation)[-1]["content"] == joined
