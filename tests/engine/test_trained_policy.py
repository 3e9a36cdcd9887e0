"""The trained structured policy as the engine ships it: exported weights, played without torch."""

import json
import subprocess
import sys

import pytest

from releaseops_arena.catalog import FAMILIES, HELDOUT_FAMILIES, OUTCOMES
from releaseops_arena.mechanisms import REGISTRY, family_mechanisms
from releaseops_arena.policies import POLICIES, play
from releaseops_arena.policies import trained as trained_policy
from releaseops_arena.splits import SPLITS, scenarios
from tests.engine.test_structure import PROBE as PURITY_PROBE
from tests.engine.test_structure import REPO_ROOT

# The purity test's import blocker (torch, numpy, ... raise ImportError), then one episode of `trained`.
PROBE = (
    PURITY_PROBE.split("for module")[0]
    + """
from releaseops_arena.policies import POLICIES, play
run = play(POLICIES['trained'](), dict(family='green_ci_disabled_payment_test', seed=1, difficulty='medium',
                                       archetype_mix='shortcut_ci__careful_qa'))
print(run['metrics']['outcome'], len(run['steps']), sum('error' in s for s in run['steps']))
"""
)


def test_the_shipped_weights_play_an_episode_without_torch():
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    outcome, steps, errors = result.stdout.split()
    assert outcome in OUTCOMES and int(steps) > 0
    assert errors == "0"


def test_the_shipped_weights_match_the_features():
    data = json.loads(trained_policy.WEIGHTS.read_text())
    assert data["format"] == trained_policy.FORMAT and data["dim"] == trained_policy.feature_dim()
    assert [len(layer["bias"]) for layer in data["layers"]] == [data["hidden"], data["hidden"], 1]


def test_trained_is_a_board_only_policy_that_never_makes_an_invalid_call():
    assert not POLICIES["trained"].privileged
    outcomes = set()
    for i, scenario in enumerate(scenarios("heldout_seeds", 30)):
        run = play(POLICIES["trained"](), scenario, rng_seed=i)
        assert run["steps"] and not any("error" in s for s in run["steps"])
        outcomes.add(run["metrics"]["outcome"])
    assert "safe_ship" in outcomes  # the shipped checkpoint is a trained one, not a policy that always holds


def test_a_stale_or_foreign_weights_file_is_refused_with_the_command_that_rebuilds_it(tmp_path):
    data = json.loads(trained_policy.WEIGHTS.read_text())
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({**data, "dim": data["dim"] + 1}))
    with pytest.raises(ValueError, match="features now have .*--export"):
        trained_policy.load_weights(stale)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"weights": []}))
    with pytest.raises(ValueError, match="not a trained-policy weights file.*--export"):
        trained_policy.load_weights(foreign)


def test_the_shipped_policy_reads_with_the_train_families_only(tmp_path):
    """The shipped weights were trained, and are played, with a reading that knows the train families'
    mechanisms only (placing a mechanism it has not met by its request and risk): on the unseen family
    they carry no hand-coded knowledge of the held-out ones."""
    data = json.loads(trained_policy.WEIGHTS.read_text())
    assert data["reader"] == "agnostic" and data["known_families"] == list(SPLITS["train"]["families"])
    assert POLICIES["trained"]().reader == "agnostic"
    assert trained_policy.TrainedPolicy(reader="all").reader == "all"
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({**data, "reader": "heldout"}))
    with pytest.raises(ValueError, match="unknown reader 'heldout'; valid: agnostic, train, all"):
        trained_policy.TrainedPolicy(odd)


def _held_out_strings() -> set[str]:
    """Every name and template only the held-out families have: family names, mechanism keys, their
    requests and fix kinds, and their claim, phrase and admission texts (less any a seen mechanism shares)."""
    seen = {m for f in FAMILIES for m in family_mechanisms(f)}
    held = {m for f in HELDOUT_FAMILIES for m in family_mechanisms(f)} - seen

    def texts(keys):
        out = set()
        for k in keys:
            m = REGISTRY[k]
            out |= {k, m.request, m.explicit, m.plain, m.admission, *m.phrases} | ({m.fix} if m.fix else set())
        return out

    return set(HELDOUT_FAMILIES) | (texts(held) - texts(seen))


def test_the_shipped_weights_and_feature_maps_never_name_the_held_out_families():
    """The learned parts never saw the held-out family: the exported file (weights and the feature maps
    its inputs are built from) names no held-out family, mechanism, request, fix or template, and the
    maps it records are the ones the features use now."""
    text = trained_policy.WEIGHTS.read_text()
    data = json.loads(text)
    assert data["feature_maps"] == json.loads(json.dumps(trained_policy.feature_maps(data["reader"])))
    assert set(data["feature_maps"]["families"]) == set(FAMILIES)
    held_out = _held_out_strings()
    assert {"waiver", "reopen", "snapshot", "close_ticket", "update_snapshots"} <= held_out  # the check has teeth
    named = sorted(s for s in held_out if json.dumps(s)[1:-1] in text)
    assert not named, f"the shipped weights file names held-out material: {named}"


def test_the_feature_maps_check_catches_a_reader_that_knows_the_held_out_families():
    text = json.dumps(trained_policy.feature_maps("all"))
    assert any(json.dumps(s)[1:-1] in text for s in _held_out_strings())


def test_a_second_look_is_a_candidate_and_what_it_shows_reaches_the_ships_reading():
    """The planner the policy is cloned from spends budget left at the ship on an approved site's decisive
    artifact (`ReferencePlanner.recheck`). That call is among the policy's candidates, marked as a look at an
    approved site with its margin over the ship's deploy-check risk, and a violation it shows makes the ship's
    reading carry that rule at certainty, which a block of the ship reads."""
    from releaseops_arena.policies.planner import ReferencePlanner
    from releaseops_arena.rendering import View
    from releaseops_arena.tool_env import ReleaseOpsToolEnv

    looks = shown = 0
    for scenario in scenarios("train", 300, "hard"):
        env, planner = ReleaseOpsToolEnv(), trained_policy.teach(ReferencePlanner(), "agnostic")
        obs = env.reset(**scenario)
        view, shadow = View(json.loads(obs)), View(json.loads(obs))
        planner.begin(obs)
        while not env.done:
            before = set(planner.rechecked)
            tool, args = planner.act(shadow)
            site = next((view.proposals[pid] for pid in set(planner.rechecked) - before), None)
            if site is not None:  # a second look (another card may cite the same artifact: its candidate too)
                looks += 1
                # The reading ends with: approved, margin over the ship, margin > 0, then the three budget-cut
                # indicators (`reading_features`).
                xs = [x for t, a, x in trained_policy.candidates(view) if (t, a) == (tool, args) and x[-6] == 1.0]
                assert len(xs) == 1 and xs[0][-5] > 0 and xs[0][-4] == 1.0, (scenario, [x[-6:-3] for x in xs])
            view.note_call(tool, args)
            result = json.loads(getattr(env, tool)(**args))
            view.update(result)
            shadow.update(result)
            planner.observe(json.dumps(result))
            if site is not None:
                rule = trained_policy.seen_violation(view, site)[0]
                ship = next((p for p in view.pending() if p["request"] == "ship_release_candidate"), None)
                if rule and ship:
                    shown += 1
                    assert trained_policy.read(view, ship)["risk"][rule] == 1.0
    assert looks >= 10 and shown >= 2, (looks, shown)
