"""The trained structured policy as the engine ships it: exported weights, played without torch."""

import json
import subprocess
import sys

import pytest

from releaseops_arena.catalog import OUTCOMES
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
    mechanisms only: on the unseen family they carry no hand-coded knowledge of the held-out ones."""
    data = json.loads(trained_policy.WEIGHTS.read_text())
    assert data["reader"] == "train" and data["known_families"] == list(SPLITS["train"]["families"])
    assert POLICIES["trained"]().reader == "train"
    assert trained_policy.TrainedPolicy(reader="all").reader == "all"
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({**data, "reader": "heldout"}))
    with pytest.raises(ValueError, match="unknown reader 'heldout'; valid: train, all"):
        trained_policy.TrainedPolicy(odd)
