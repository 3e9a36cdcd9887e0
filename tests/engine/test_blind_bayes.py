"""`blind_bayes`, the strongest cue-blind reference: it never reads a cue, and it plays valid episodes.

Cue-blind means: the same calls whatever every proposal's claim (wording and voice), stated confidence,
the workers' hints and records, and the answers say. The same harness catches the planner, which reads
them all, so a policy that read any of them would fail here.
"""

from __future__ import annotations

import copy
import json
import random

from releaseops_arena import rewards
from releaseops_arena import workers as cues
from releaseops_arena.catalog import OUTCOMES
from releaseops_arena.mechanisms import REGISTRY
from releaseops_arena.policies import POLICIES, BlindBayes, ReferencePlanner, play
from releaseops_arena.policies.base import FIX_CLAIMS
from releaseops_arena.rendering import View
from releaseops_arena.splits import scenarios
from releaseops_arena.tool_env import ReleaseOpsToolEnv

# Every text a claim can be: each mechanism's wordings in every voice, the fixes' openings, other text.
_TEXTS = (
    [
        text.format(ticket="ticket_1234", test="test_card_capture")
        for m in REGISTRY.values()
        for text in (m.explicit, m.plain, *m.phrases)
    ]
    + [f"{c}; all green." for c in FIX_CLAIMS]
    + ["Looks fine.", ""]
)
CLAIMS = [cues.voiced(voice, text) if text else text for text in _TEXTS for voice in cues.VOICES]
ANSWERS = [text for answers in cues.ANSWERS.values() for text, _, _ in answers]


def with_other_cues(view: View, rng: random.Random) -> View:
    """The view with every cue of every proposal redrawn: claim, voice, confidence, hints, records, answers."""
    other = copy.deepcopy(view)
    for p in [*other.proposals.values(), *other.board["proposals"]]:
        p["claim"], p["confidence"] = rng.choice(CLAIMS), rng.choice(cues.CONFIDENCES)
    for w in other.board.get("worker_stats", []):
        k = rng.randint(0, cues.HISTORY)
        w["hint"], w["recent"] = rng.choice(cues.HINTS), {"correct": cues.HISTORY - k, "incorrect": k}
    other.answers = {pid: rng.choice(ANSWERS) for pid in other.proposals}
    return other


def calls_that_differ(make, scenario: dict, seed: int) -> int:
    """Plays `scenario` with one policy reading the board and a twin reading it with every cue redrawn
    at every step; returns how many steps the twin's call differs (the real policy's call is played)."""
    rng = random.Random(seed)
    env = ReleaseOpsToolEnv()
    obs = env.reset(**scenario)
    view = View(json.loads(obs))
    policy, twin = make(), make()
    policy.begin(obs)
    twin.begin(json.dumps(with_other_cues(view, rng).board))
    differ = 0
    while not env.done:
        call = policy.act(view)
        differ += twin.act(with_other_cues(view, rng)) != call
        view.update(json.loads(env._call_tool(call[0], **call[1])))
    return differ


def _sample(n: int) -> list[dict]:
    return [
        s
        for split in ("heldout_seeds", "unseen_family", "unseen_mix")
        for difficulty in ("medium", "hard", "easy")
        for s in scenarios(split, n, difficulty, start=500)
    ]


def test_blind_bayes_makes_the_same_calls_whatever_the_cues_say():
    sample = _sample(8)
    for i, scenario in enumerate(sample):
        assert calls_that_differ(BlindBayes, scenario, i) == 0, scenario
        if i % 3 == 0:  # the variant that also reads how many refs a card cites reads no other cue either
            assert calls_that_differ(lambda: BlindBayes(read_refs=True), scenario, i) == 0, scenario
    # The harness catches a policy that reads cues: the planner's calls move with them.
    assert sum(calls_that_differ(ReferencePlanner, s, i) for i, s in enumerate(sample)) > len(sample) // 4


def test_blind_bayes_plays_valid_episodes_end_to_end():
    assert POLICIES["blind_bayes"] is BlindBayes and not BlindBayes.privileged
    from training.evaluate import make_policy

    assert isinstance(make_policy("blind_bayes"), BlindBayes)
    safe = 0
    sample = _sample(10)
    for scenario in sample:
        run = play(BlindBayes(), scenario)
        m = run["metrics"]
        assert m["outcome"] in OUTCOMES and m["terminated"] and not m["truncated"], (scenario, m)
        assert m["invalid_actions"] == 0, (scenario, run["steps"])
        assert m["budget_used"] <= m["budget_total"]
        assert rewards.RETURN_MIN <= run["return"] <= rewards.RETURN_MAX
        safe += m["safe_ship"]
    # It supervises: it ships safely far more often than approving everything (a quarter of releases).
    assert safe / len(sample) >= 0.45, safe / len(sample)
