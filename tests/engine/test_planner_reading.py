"""The planner's two readings beyond a site's own cues: who is careful today, and a second look at the ship.

- Whether each worker is careful today is weighed as a hypothesis (`ReferencePlanner.worker_hypotheses`):
  a worker's sites are suspect together, and what evidence finds at one of them says who is careful.
  Averaging each worker's archetypes first loses both, and predicts the shortcuts worse.
- Budget left at the ship buys a look at the approved site most likely a shortcut; what it shows is
  caught late by blocking the ship on that site's rule (`ReferencePlanner.recheck`).
"""

from __future__ import annotations

import json
import math

import pytest

from releaseops_arena.policies import play
from releaseops_arena.policies.planner import ReferencePlanner
from releaseops_arena.rendering import View
from releaseops_arena.splits import scenarios
from releaseops_arena.tool_env import ReleaseOpsToolEnv


class MeanWeights(ReferencePlanner):
    """The planner that weighs each site by its owner's mean archetype weight."""

    worker_hypotheses = False


class NoSecondLook(ReferencePlanner):
    second_look = False


def _log_loss(difficulty: str, boards: int) -> dict[bool, float]:
    """Each reading's mean log loss on whether a site is a shortcut, over every site of the first `boards`
    train boards: at the reset, and again after the planner's first look at each."""
    loss, sites = {True: 0.0, False: 0.0}, 0
    for scenario in scenarios("train", boards, difficulty):
        env = ReleaseOpsToolEnv()
        obs = env.reset(**scenario)
        truth = env.episode.world.proposals
        view, first = View(json.loads(obs)), ReferencePlanner()
        first.begin(obs)
        views = [View(json.loads(obs))]
        call = first.act(view)
        for _ in range(20):  # up to its first look (a delay declined or a fix approved comes first)
            if call[0].startswith("inspect"):
                break
            view.update(json.loads(getattr(env, call[0])(**call[1])))
            call = first.act(view)
        assert call[0].startswith("inspect"), "the planner looks during triage"
        after = View(json.loads(obs))
        after.__dict__.update(view.__dict__, evidence=dict(view.evidence))
        after.update(json.loads(getattr(env, call[0])(**call[1])))
        views.append(after)
        for seen in views:
            for mixed in (True, False):
                planner = ReferencePlanner() if mixed else MeanWeights()
                planner.begin(obs)
                for pid, q in planner.beliefs(seen).items():
                    if pid == "future":
                        continue
                    q = min(max(q, 1e-6), 1 - 1e-6)
                    loss[mixed] -= math.log(q if truth[pid].truth.label == "shortcut" else 1 - q)
                    sites += not mixed
    return {k: v / sites for k, v in loss.items()}


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_weighing_who_is_careful_today_predicts_the_shortcuts_better(difficulty):
    loss = _log_loss(difficulty, 150)
    assert loss[True] < loss[False], loss  # 0.256 against 0.260 on medium, 0.259 against 0.267 on hard


def test_without_evidence_the_mixture_stays_a_ranking_not_a_verdict():
    for scenario in scenarios("train", 30, "hard"):
        obs = ReleaseOpsToolEnv().reset(**scenario)
        planner = ReferencePlanner()
        planner.begin(obs)
        beliefs = planner.beliefs(View(json.loads(obs)))
        assert len(beliefs) >= 3 and len(beliefs["future"]) >= 1  # the triage sites and the ones still to come
        assert all(0.0 < v < 0.95 for k, v in beliefs.items() if k != "future")
        assert all(0.0 <= v <= 1.0 for v in beliefs["future"])


class Logged(ReferencePlanner):
    """The planner, with what each second look found and the risk it left behind."""

    def begin(self, observation):
        super().begin(observation)
        self.second_looks: list[str] = []
        self.clean: list[tuple[float, float]] = []  # (the risk left, what the other approved sites carry)

    def recheck(self, view):
        waiting = dict(self.rechecked)
        ref = super().recheck(view)
        for pid, rule in waiting.items():
            if pid not in self.rechecked and self.approved_risk[rule] < 1.0:  # read, and it showed nothing
                others = [
                    q
                    for other, q in self.approved_at.items()
                    if other != pid and self.doubt(view, view.proposals[other])[1] == rule
                ]
                self.clean.append((self.approved_risk[rule], 1 - math.prod(1 - q for q in others)))
        if ref:
            self.second_looks.append(ref)
        return ref


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_a_second_look_at_the_ship_turns_an_unsafe_ship_safe(difficulty):
    saved = 0
    for scenario in scenarios("train", 300, difficulty):
        planner = Logged()
        plain, second = play(NoSecondLook(), scenario), play(planner, scenario)
        # It never costs a release: a late catch is only tried when the clock has room for it.
        assert not (plain["metrics"]["safe_ship"] and not second["metrics"]["safe_ship"]), scenario
        if not planner.second_looks:
            assert second["steps"] == plain["steps"]  # no look, no other change
        elif plain["metrics"]["outcome"] == "unsafe_ship" and second["metrics"]["safe_ship"]:
            saved += 1
            calls = [(s["tool"], s["arguments"]) for s in second["steps"]]
            looked = calls.index(next(c for c in calls if planner.second_looks[0] in c[1].values()))
            # The look came after every site was approved, and the catch was the ship blocked after it.
            assert any(t == "block_proposal" for t, _ in calls[looked:]), calls
    assert saved >= 3, saved


def test_a_clean_second_look_takes_away_only_that_sites_share_of_the_risk():
    cleared = []
    for scenario in scenarios("train", 300, "medium"):
        planner = Logged()
        play(planner, scenario)
        cleared += planner.clean
    assert len(cleared) >= 5, cleared
    for left, others in cleared:  # what the other sites approved unread on the same rule still carry
        assert left == pytest.approx(others, abs=1e-9)
