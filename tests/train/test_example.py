"""examples/train_trl.py, the one-file TRL example, runs as written: a CPU smoke run with a tiny offline model."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys

from releaseops_arena import rewards
from tests.live_server import REPO_ROOT
from training.make_dataset import rows as recipe_rows
from training.tiny_model import build

EXAMPLE = REPO_ROOT / "examples" / "train_trl.py"


def load_example():
    spec = importlib.util.spec_from_file_location("train_trl_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_header_names_what_it_imports():
    """PEP 723: a runner such as `uv run` installs what the `# /// script` block lists."""
    text = EXAMPLE.read_text()
    (block,) = re.findall(r"(?m)^# /// script\n((?:^#(?: .*)?\n)+)^# ///$", text)
    (listing,) = re.findall(r"dependencies = \[(.*?)\]", block.replace("\n#", ""), flags=re.S)
    names = {re.split(r"[<>=!~ \[@]", d, maxsplit=1)[0] for d in re.findall(r'"([^"]+)"', listing)}
    provider = importlib.metadata.packages_distributions()["releaseops_arena"]
    assert {"openenv-releaseops-arena", "trl", "transformers", "datasets", "torch"} <= names
    assert "openenv-releaseops-arena" in provider  # the distribution that installs `releaseops_arena`


def test_the_example_plays_the_tasks_and_prompt_of_the_training_recipe():
    """Its inline dataset is what `training.make_dataset` builds: the same brief, tasks and levels."""
    example = load_example().build_dataset(6, "easy")
    recipe = recipe_rows("train", 6, "easy")
    assert example.column_names == ["prompt", "split", "index", "difficulty"]
    assert example.to_list() == [{key: row[key] for key in example.column_names} for row in recipe]


def test_the_example_trains_a_step_in_process_and_saves_the_model(tmp_path):
    model = build(tmp_path / "tiny")  # offline: no hub download
    out = tmp_path / "out"
    command = [
        sys.executable,
        str(EXAMPLE),
        "--model",
        str(model),
        "--steps",
        "1",
        "--rows",
        "4",
        "--difficulty",
        "easy",
        "--num-generations",
        "4",
        "--batch-size",
        "4",
        "--max-completion-length",
        "128",
        "--max-tool-calls",
        "4",
        "--output-dir",
        str(out),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    # From outside the checkout: the example needs only the installed packages.
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]

    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 1
    step = next(h for h in state["log_history"] if "reward" in h)
    # The environment owns the reward: TRL logged its get_reward() under the class name, and the
    # seven tools were offered (TRL's tool metrics exist).
    assert step["reward"] == step["rewards/ReleaseOpsToolEnv/mean"]
    assert rewards.RETURN_MIN <= step["reward"] <= rewards.RETURN_MAX
    assert "tools/call_frequency" in step
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
