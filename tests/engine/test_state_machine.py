"""A stateful model test: arbitrary calls on `ReleaseOpsToolEnv`, invariants after every step."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from releaseops_arena import ALL_FAMILIES, ALL_MIXES, DIFFICULTIES, TOOL_NAMES, ReleaseOpsToolEnv, rewards
from releaseops_arena.catalog import HOLD_REASONS, QUESTION_TYPES, RULE_IDS, WORKERS
from tests.scenarios import call_args, visible_ids

CHOICES = RULE_IDS + QUESTION_TYPES + HOLD_REASONS + tuple(WORKERS) + ("S4",)


class ReleaseMachine(RuleBasedStateMachine):
    @initialize(
        family=st.sampled_from(ALL_FAMILIES),
        seed=st.integers(0, 10_000),
        difficulty=st.sampled_from(DIFFICULTIES),
        mix=st.sampled_from(ALL_MIXES),
    )
    def start(self, family, seed, difficulty, mix):
        self.env = ReleaseOpsToolEnv()
        self.env.reset(family=family, seed=seed, difficulty=difficulty, archetype_mix=mix)
        self.rewards: list[float] = []
        self.calls = 0
        self.clock = (0, 0)  # (stage, round): only ever moves forward
        self.finished = False

    @rule(
        tool=st.sampled_from(TOOL_NAMES + ("rollback",)),
        index=st.integers(0, 60),
        choice=st.sampled_from(CHOICES),
        junk=st.one_of(st.none(), st.text(max_size=70), st.integers()),
    )
    def call(self, tool, index, choice, junk):
        ids = visible_ids(self.env)
        args = call_args(tool, ids[index % len(ids)] if junk is None else junk, choice)
        audited = len(self.env._episode.audit)
        was_done = self.env.done
        before = self.env.reward
        try:
            self.env._call_tool(tool, **args)
        except ValueError as exc:
            if was_done:  # done is terminal: the call raises and changes nothing
                assert "episode is over" in str(exc) and self.env.reward == before
                assert len(self.env._episode.audit) == audited
                return
        assert not was_done, "a call after the end must raise"
        self.calls += 1
        assert len(self.env._episode.audit) == audited + 1  # every call is audited
        self.rewards.append(self.env._episode.audit[-1]["reward"])
        self.finished = self.env.done

    @invariant()
    def budget_never_negative(self):
        w = self.env._episode.world
        assert w.budget_left >= 0 and w.evidence_left >= 0

    @invariant()
    def the_clock_only_moves_forward(self):
        w = self.env._episode.world
        now = (w.stage, w.round)
        assert w.round >= self.clock[1] and (w.stage >= self.clock[0])
        self.clock = now

    @invariant()
    def the_return_is_the_sum_of_step_rewards_and_within_bounds(self):
        # The reset's reward (the opening reward) and every step's add up to the return.
        assert self.env.reward == pytest.approx(rewards.OPENING_REWARD + sum(self.rewards), abs=1e-6)
        assert rewards.RETURN_MIN <= self.env.reward <= rewards.RETURN_MAX

    @invariant()
    def done_is_terminal(self):
        if self.finished:
            assert self.env.done and self.env.metrics["outcome"] in ("safe_ship", "unsafe_ship", "missed_deadline")


ReleaseMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=70, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_release_state_machine = ReleaseMachine.TestCase
