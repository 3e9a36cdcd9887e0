"""The GPU trainer's options (LoRA, vLLM, held-out evaluation, completions, Hub) reach TRL, a LoRA run
on the tiny model trains and saves an adapter on CPU, and the remote env factory survives pickling
(TRL's async GRPO trainer sends it to a spawned rollout process)."""

import json
import multiprocessing
import pickle
import random
import re

import pytest

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.brief import PROMPT_VERSION
from releaseops_arena.catalog import BENCHMARK_VERSION
from training import train_grpo


def args_of(*extra):
    return train_grpo.parser().parse_args(
        [
            "--model",
            "unused",
            "--cpu",
            "--num-generations",
            "4",
            "--batch-size",
            "4",
            "--rows",
            "8",
            "--output-dir",
            "unused",
            *extra,
        ]
    )


def test_every_training_option_reaches_the_grpo_config_and_the_trainer_kwargs(tmp_path):
    from peft import LoraConfig

    from training.make_dataset import build

    args = args_of(
        "--lora",
        "--lora-r",
        "8",
        "--lora-alpha",
        "24",
        "--lora-dropout",
        "0.1",
        "--lora-target-modules",
        "q_proj, v_proj",
        "--vllm-mode",
        "server",
        "--vllm-server-url",
        "http://gpu-box:8011",
        "--vllm-gpu-memory-utilization",
        "0.5",
        "--vllm-max-model-length",
        "8192",
        "--eval-split",
        "unseen_family",
        "--eval-rows",
        "6",
        "--eval-steps",
        "3",
        "--eval-batch-size",
        "6",
        "--eval-generations",
        "2",
        "--difficulty",
        "easy",
        "--log-completions",
        "--num-completions-to-print",
        "3",
        "--push-to-hub",
        "--hub-model-id",
        "me/releaseops-lora",
        "--hub-private",
    )
    config = train_grpo.build_config(args, "out")
    assert (config.use_vllm, config.vllm_mode, config.vllm_server_base_url) == (True, "server", "http://gpu-box:8011")
    assert config.vllm_server_port == 8011  # ignored by TRL next to the base URL, but never says 8000
    assert (config.vllm_gpu_memory_utilization, config.vllm_max_model_length) == (0.5, 8192)
    assert config.eval_strategy == "steps" and config.eval_steps == 3 and config.do_eval
    assert (config.per_device_eval_batch_size, config.num_generations_eval) == (6, 2)
    assert config.log_completions and config.num_completions_to_print == 3
    assert config.push_to_hub and config.hub_model_id == "me/releaseops-lora" and config.hub_private_repo

    kwargs = train_grpo.trainer_kwargs(args, config)
    assert kwargs["args"] is config and kwargs["reward_funcs"] == [train_grpo.episode_metrics]
    lora = kwargs["peft_config"]
    assert isinstance(lora, LoraConfig) and lora.task_type == "CAUSAL_LM"
    assert (lora.r, lora.lora_alpha, lora.lora_dropout, set(lora.target_modules)) == (8, 24, 0.1, {"q_proj", "v_proj"})
    evals = kwargs["eval_dataset"]
    assert len(evals) == 6 and set(evals["split"]) == {"unseen_family"} and set(evals["difficulty"]) == {"easy"}
    assert set(evals["prompt_version"]) == {PROMPT_VERSION}
    assert evals.column_names == kwargs["train_dataset"].column_names
    assert kwargs["environment_factory"] is ReleaseOpsToolEnv
    assert train_grpo.sessions_needed(config) == 6  # the eval batch is larger than a generation batch of 4

    plain = train_grpo.build_config(args_of("--use-vllm"), "out")
    assert plain.use_vllm and plain.vllm_mode == "colocate" and plain.vllm_server_base_url is None
    kwargs = train_grpo.trainer_kwargs(args_of("--lora"), plain)
    assert kwargs["peft_config"].target_modules == "all-linear" and kwargs["eval_dataset"] is None
    # A make_dataset directory: the eval rows come from its <split>.parquet
    for split, n in (("train", 4), ("heldout_seeds", 5)):
        build(split, n, "medium").to_parquet(str(tmp_path / f"{split}.parquet"))
    args = args_of("--dataset", str(tmp_path), "--eval-split", "heldout_seeds", "--eval-rows", "3")
    kwargs = train_grpo.trainer_kwargs(args, train_grpo.build_config(args, "out"))
    assert len(kwargs["train_dataset"]) == 4 and kwargs["eval_dataset"]["index"] == [0, 1, 2]
    assert set(kwargs["eval_dataset"]["difficulty"]) == {"medium"}
    # Rows made with another brief (or before briefs were versioned) are refused, not mislabelled in run.json.
    stale = build("train", 4, "medium").remove_columns("prompt_version").add_column("prompt_version", ["brief-0"] * 4)
    stale.to_parquet(str(tmp_path / "train.parquet"))
    with pytest.raises(SystemExit, match="prompt_version brief-0, not brief-"):
        train_grpo.trainer_kwargs(args, train_grpo.build_config(args, "out"))
    build("train", 4, "medium").remove_columns("prompt_version").to_parquet(str(tmp_path / "train.parquet"))
    with pytest.raises(SystemExit, match="prompt_version none"):
        train_grpo.trainer_kwargs(args, train_grpo.build_config(args, "out"))
    with pytest.raises(ValueError, match="--no-save"):
        train_grpo.build_config(args_of("--push-to-hub", "--no-save"), "out")


def test_vllm_is_off_by_default_and_its_server_port_is_not_the_environment_servers():
    from urllib.parse import urlsplit

    config = train_grpo.build_config(args_of(), "out")
    assert not config.use_vllm and config.eval_strategy == "no" and not config.log_completions
    assert not config.push_to_hub and train_grpo.trainer_kwargs(args_of(), config)["peft_config"] is None
    server = train_grpo.build_config(args_of("--vllm-mode", "server"), "out")
    assert server.use_vllm and urlsplit(server.vllm_server_base_url).port == server.vllm_server_port == 8001 != 8000
    help_text = " ".join(train_grpo.parser().format_help().split())  # argparse wraps lines
    assert "trl vllm-serve --model <same --model> --port 8001" in help_text


def test_num_iterations_reuses_each_generated_batch_for_that_many_optimizer_steps():
    assert train_grpo.build_config(args_of(), "out").num_iterations == 1  # TRL's default: one step per batch
    assert train_grpo.build_config(args_of("--num-iterations", "4"), "out").num_iterations == 4


class _NoisyReward(ReleaseOpsToolEnv):
    """The episode return plus noise: a group's rewards differ even when the untrained tiny model
    never calls a tool, so that the advantages, hence the adapter's gradients, are not zero."""

    _rng = random.Random(0)

    def get_reward(self) -> float:
        return super().get_reward() + self._rng.gauss(0.0, 1.0)


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    from training.tiny_model import build

    return str(build(tmp_path_factory.mktemp("tiny") / "base"))


def test_a_lora_run_on_the_tiny_model_trains_evaluates_on_a_held_out_split_and_saves_an_adapter(
    tiny_base, tmp_path, monkeypatch
):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    monkeypatch.setattr(train_grpo, "environment_factory", lambda args: _NoisyReward)
    args = train_grpo.parser().parse_args(
        [
            "--model",
            tiny_base,
            "--cpu",
            "--steps",
            "2",
            "--num-generations",
            "2",
            "--batch-size",
            "2",
            "--max-completion-length",
            "96",
            "--max-tool-calls",
            "4",
            "--rows",
            "4",
            "--difficulty",
            "easy",
            "--lr",
            "1e-2",
            "--lora",
            "--lora-r",
            "4",
            "--eval-split",
            "heldout_seeds",
            "--eval-rows",
            "2",
            "--eval-steps",
            "2",
            "--log-completions",
            "--num-completions-to-print",
            "1",
            "--save-steps",
            "1",
            "--output-dir",
            str(tmp_path),
        ]
    )
    result = train_grpo.train(args)
    history = result["log_history"]
    assert [h["step"] for h in history if "reward" in h] == [1, 2]
    evaluation = [h for h in history if "eval_reward" in h]
    assert len(evaluation) == 1 and evaluation[0]["step"] == 2  # the held-out split, played at step 2
    for key in (
        "eval_episode/finished",
        "eval_episode/safe_ship",
        "eval_episode/missed_deadline",
        "eval_tools/call_frequency",
    ):
        assert key in evaluation[0], key

    # Only the adapter is saved, and it was trained: LoRA's B matrices start at zero.
    assert (tmp_path / "adapter_config.json").exists() and not (tmp_path / "model.safetensors").exists()
    weights = load_file(str(tmp_path / "adapter_model.safetensors"))
    lora_b = [w for name, w in weights.items() if "lora_B" in name]
    assert lora_b and all(w.abs().sum() > 0 for w in lora_b)
    assert json.loads((tmp_path / "adapter_config.json").read_text())["r"] == 4
    # transformers loads the adapter over its base (what `training.evaluate --policy hf:<dir>` does)
    assert hasattr(AutoModelForCausalLM.from_pretrained(str(tmp_path)), "peft_config")
    # --save-steps 1: a checkpoint after each step as well, each an adapter to choose from
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert all((tmp_path / c / "adapter_model.safetensors").exists() for c in ("checkpoint-1", "checkpoint-2"))

    run = json.loads((tmp_path / "run.json").read_text())
    assert (run["benchmark_version"], run["prompt_version"]) == (BENCHMARK_VERSION, PROMPT_VERSION)
    assert run["lora"] and run["eval_split"] == "heldout_seeds" and run["global_step"] == 2
    assert run["args"]["lora_r"] == 4
    assert sorted(p.name for p in (tmp_path / "completions").iterdir())[:2] == [
        "completions_00001.parquet",
        "completions_00002.parquet",
    ]


def _play_in_child(pickled: bytes, out) -> None:
    """What TRL's async rollout process does with `environment_factory`: unpickle it, call it."""
    factory = pickle.loads(pickled)
    env = factory()
    board = env.reset(split="train", index=0, difficulty="easy")
    out.put(
        (
            factory.base_urls,
            factory.reconnect_timeout_s,
            factory.client_options,
            env.base_url,
            isinstance(board, str) and len(board) > 0,
            factory.close(),
        )
    )


def test_the_remote_env_factory_pickles_and_an_unpickled_copy_plays_in_a_spawned_process(live_server):
    from client import RemoteEnvFactory, make_remote_env_factory

    factory = make_remote_env_factory([live_server, live_server + "/"], reconnect_timeout_s=7.0, message_timeout_s=30.0)
    env = factory()  # a live session in the parent does not travel
    env.reset(split="train", index=1, difficulty="easy")
    copy = pickle.loads(pickle.dumps(factory))
    assert isinstance(copy, RemoteEnvFactory) and copy is not factory
    assert (copy.base_urls, copy.reconnect_timeout_s, copy.client_options) == (
        (live_server, live_server),
        7.0,
        {"message_timeout_s": 30.0},
    )
    assert copy.close() == 0  # the copy owns none of the original's sessions
    # As TRL 1.16's AsyncRolloutWorker does: pickle the loop's kwargs, unpickle them in a "spawn" child.
    kwargs = {"environment_factory": factory, "reward_funcs": [train_grpo.episode_metrics]}
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    child = context.Process(target=_play_in_child, args=(pickle.dumps(kwargs["environment_factory"]), out))
    child.start()
    try:
        urls, reconnect, options, url, played, closed = out.get(timeout=120)
    finally:
        child.join(timeout=30)
    assert child.exitcode == 0
    assert (urls, reconnect, options, url) == (
        (live_server, live_server),
        7.0,
        {"message_timeout_s": 30.0},
        live_server,
    )
    assert played and closed == 1
    assert factory.close() == 1  # the parent's session is still the parent's to close
    pickle.dumps(kwargs)  # reward function and factory together, as TRL checks before spawning


def test_truncated_sampling_options_reach_trls_generation_and_default_to_the_whole_vocabulary():
    import dataclasses

    from trl import GRPOConfig

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    plain = train_grpo.build_config(args_of(), "out")
    assert (plain.top_k, plain.min_p) == (defaults["top_k"], defaults["min_p"])  # TRL's own sampling, unchanged
    cut = train_grpo.build_config(args_of("--top-k", "3", "--min-p", "0.1"), "out")
    assert (cut.top_k, cut.min_p) == (3, 0.1)
    for bad, valid in ((("--top-k", "-1"), "0 (every token) or more"), (("--min-p", "1.5"), "in (0, 1]")):
        with pytest.raises(ValueError, match=re.escape(valid)):  # refused before any model is loaded
            train_grpo.build_config(args_of(*bad), "out")


def test_advantage_scaling_and_loss_normalisation_reach_trl_and_default_to_trls_own(capsys):
    import dataclasses

    from trl import GRPOConfig

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    plain = train_grpo.build_config(args_of(), "out")
    assert (plain.scale_rewards, plain.loss_type) == (defaults["scale_rewards"], defaults["loss_type"])
    dr = train_grpo.build_config(args_of("--scale-rewards", "none", "--loss-type", "dr_grpo"), "out")
    assert (dr.scale_rewards, dr.loss_type) == ("none", "dr_grpo")
    with pytest.raises(SystemExit):  # refused before any model is loaded, naming the valid choices
        args_of("--loss-type", "ppo")
    err = capsys.readouterr().err
    assert "--loss-type" in err and all(name in err for name in ("dapo", "dr_grpo", "grpo", "bnpo"))


def test_save_steps_is_refused_below_1_and_with_no_save():
    assert train_grpo.build_config(args_of("--steps", "40"), "out").save_steps == 40  # no checkpoint before the end
    for bad, valid in (
        (("--save-steps", "0"), "at least 1, not 0"),
        (("--save-steps", "5", "--no-save"), "drop --no-save"),
    ):
        with pytest.raises(ValueError, match=re.escape(valid)):
            train_grpo.build_config(args_of(*bad), "out")
