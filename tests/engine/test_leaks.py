"""Nothing a policy can see names the hidden truth, and the token budgets hold."""

import json
import re
import statistics

import pytest

from releaseops_arena import ALL_FAMILIES, ALL_MIXES, DIFFICULTIES, ReleaseOpsToolEnv
from releaseops_arena.catalog import ARCHETYPES
from releaseops_arena.policies import Oracle, RandomPolicy, play

FORBIDDEN = [
    *ALL_FAMILIES,
    *ARCHETYPES,
    "shortcut_seeking",
    "stale_policy",
    "overcautious",
    "lv_",
    "label",
    "hazard",
    "latent",
    "violation",
    "archetype",
    "truth",
]


def policy_visible(run) -> list[str]:
    """Every string the policy saw: the observation and each tool result or error (not the final metrics)."""
    texts = [run["observation"]]
    for step in run["steps"]:
        texts.append(step.get("result") or step["error"])
    return texts


def all_runs(seeds=range(3)):
    for family in ALL_FAMILIES:
        for difficulty in DIFFICULTIES:
            for mix in ALL_MIXES:
                for seed in seeds:
                    scenario = {"family": family, "seed": seed, "difficulty": difficulty, "archetype_mix": mix}
                    yield play(Oracle(), scenario)
                    yield play(RandomPolicy(), scenario, rng_seed=seed)


def test_no_hidden_field_reaches_the_policy():
    pattern = re.compile("|".join(re.escape(word) for word in FORBIDDEN), re.I)
    checked = 0
    for run in all_runs():
        for text in policy_visible(run):
            if text.startswith("{"):
                text = json.dumps(json.loads(text))  # normalised; still the same content
            assert not pattern.search(text), (run["scenario"], text)
            checked += 1
    assert checked > 2000


def test_observation_and_tool_result_budgets():
    initial = {d: [] for d in DIFFICULTIES}
    for run in all_runs(seeds=range(4)):
        initial[run["scenario"]["difficulty"]].append(len(run["observation"]))
        for step in run["steps"]:
            text = step.get("result") or step["error"]
            data = json.loads(text) if text.startswith("{") else {}
            # The next phase's board rides along when a phase ends; the result itself stays short.
            data.pop("next", None)
            assert len(json.dumps(data, separators=(",", ":"))) <= 400 if data else len(text) <= 400, text
            if "next" in (json.loads(text) if text.startswith("{") else {}):
                # v2: a stage can carry fixes from the last one next to its own sites.
                assert len(json.dumps(json.loads(text)["next"], separators=(",", ":"))) <= 1600
    # v3 boards carry six sites on medium (two copies of each triage mechanism), two more proposals than
    # v2's: measured median 1,533 characters (max 1,802) over these runs; the limit keeps ~10% headroom.
    assert statistics.median(initial["medium"]) <= 1700, statistics.median(initial["medium"])


@pytest.mark.parametrize("mix", ALL_MIXES)
def test_mix_never_appears_in_the_observation(mix):
    obs = ReleaseOpsToolEnv().reset(archetype_mix=mix, seed=5)
    assert mix not in obs


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_no_single_visible_feature_settles_whether_a_proposal_is_a_shortcut(difficulty):
    """Principle 4: a classifier's inputs (every visible board feature, and each answer) each carry at
    most 0.3 bits about the hidden label on medium and hard; on easy the wording may be decisive."""
    from research.calibrate import MI_LIMIT, information_table

    table = information_table(difficulty, 300)
    assert {"claim", "voice", "confidence", "request", "hint", "incorrect", "refs"} <= set(table)
    assert max(table.values()) <= MI_LIMIT, table
    assert max(information_table("easy", 200).values()) > MI_LIMIT  # the measure can tell a decisive cue
