"""CPU smoke tests of the training pipeline: a tiny offline model, SFT warm start, GRPO, evaluation."""

import json

import pytest

from releaseops_arena import ReleaseOpsToolEnv
from tests.live_server import run_live_server
from training import train_grpo
from training.evaluate import evaluate
from training.sft_warmup import warm_start
from training.tiny_model import build

SEVEN = ["approve_proposal", "ask_worker", "block_proposal", "hold_release", "inspect_ci_run", "inspect_pr_diff",
         "inspect_ticket"]


@pytest.fixture(scope="session")
def tiny_sft(tmp_path_factory):
    """A ~360k-parameter Qwen3-style model with an offline BPE tokenizer, warmed up on rule episodes."""
    root = tmp_path_factory.mktemp("tiny")
    base = build(root / "base")
    # 8 epochs: with 5 the tiny model's tool calling depends on chance details of its BPE
    # vocabulary (a change in the tool schemas' key order once left it calling no tool at all).
    warm = warm_start(base, root / "sft", policy="rule", episodes=24, epochs=8, difficulty="easy")
    assert warm["losses"][-1] < warm["losses"][0] / 4  # it learned the format
    return str(root / "sft")


def grpo_args(model, out, *extra):
    return train_grpo.parser().parse_args([
        "--model", model, "--cpu", "--steps", "2", "--num-generations", "4", "--batch-size", "4",
        "--max-completion-length", "1536", "--max-tool-calls", "12", "--rows", "16", "--difficulty", "easy",
        "--lr", "1e-4", "--no-save", "--output-dir", str(out), *extra])


def step_logs(history):
    return [h for h in history if "episode/finished" in h]


def test_grpo_in_process_discovers_the_seven_tools_and_trains_on_the_environment_reward(tiny_sft, tmp_path):
    result = train_grpo.train(grpo_args(tiny_sft, tmp_path))
    assert result["tools"] == SEVEN
    logs = step_logs(result["log_history"])
    assert len(logs) == 2
    for log in logs:
        for key in ("episode/safe_ship", "episode/unsafe_ship", "episode/missed_deadline", "episode/finished",
                    "tools/call_frequency", "tools/failure_frequency"):
            assert key in log, key
        assert -20 < log["reward"] < 2
    # The environment's own reward (get_reward) is the only reward: the logging function adds nothing.
    for log in logs:
        assert log["reward"] == pytest.approx(log["rewards/ReleaseOpsToolEnv/mean"], abs=1e-5)
    assert any(log["tools/call_frequency"] > 0 for log in logs)
    assert json.loads((tmp_path / "log_history.json").read_text()) == result["log_history"]


def test_grpo_against_a_live_server_closes_every_session(tiny_sft, tmp_path):
    from websockets.sync.client import connect

    with run_live_server(env={"MAX_CONCURRENT_ENVS": "4"}) as url:
        result = train_grpo.train(grpo_args(tiny_sft, tmp_path, "--env-url", url, "--steps", "1"))
        assert result["tools"] == SEVEN
        assert len(step_logs(result["log_history"])) == 1
        # Every slot is free again: the run closed its sessions.
        sockets = [connect(url.replace("http", "ws") + "/ws") for _ in range(4)]
        try:
            for ws in sockets:
                ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                assert json.loads(ws.recv())["type"] == "observation"
        finally:
            for ws in sockets:
                ws.close()


def test_training_fails_fast_when_the_server_is_too_small(tiny_sft, tmp_path):
    with run_live_server(env={"MAX_CONCURRENT_ENVS": "2"}) as url:
        with pytest.raises(Exception, match="capacity"):
            train_grpo.train(grpo_args(tiny_sft, tmp_path, "--env-url", url))


def test_a_checkpoint_is_evaluated_by_the_same_harness(tiny_sft):
    result = evaluate(f"hf:{tiny_sft}", "heldout_seeds", 3, "easy", progress=False)
    m = result["metrics"]
    assert m["episodes"] == 3
    # The harness reports what the checkpoint really did: replaying it by hand on the same
    # scenarios gives the same returns, episode by episode.
    from releaseops_arena.baselines import play
    from releaseops_arena.splits import scenarios
    from training.evaluate import make_policy

    by_hand = [play(make_policy(f"hf:{tiny_sft}"), s, i * 7919)["return"]
               for i, s in enumerate(scenarios("heldout_seeds", 3, "easy"))]
    assert [e["episode_return"] for e in result["episodes"]] == pytest.approx(by_hand)


def _trainer_without_reward_funcs(model_path, out, factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    args = grpo_args(model_path, out, "--steps", "1")
    return GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_path), args=train_grpo.build_config(args, str(out)),
                       train_dataset=train_grpo.load_dataset(None, 8, "easy"),
                       processing_class=AutoTokenizer.from_pretrained(model_path), environment_factory=factory)


class _Recorded(ReleaseOpsToolEnv):
    seen: list = []

    def get_reward(self) -> float:
        value = super().get_reward()
        _Recorded.seen.append((value, self._episode.episode_return, self.done, self.terminated or self.truncated))
        return value


def test_grpo_trains_in_process_with_the_environment_owning_the_reward(tiny_sft, tmp_path):
    _Recorded.seen.clear()
    trainer = _trainer_without_reward_funcs(tiny_sft, tmp_path, _Recorded)
    assert sorted(t.__name__ for t in trainer.tools) == SEVEN  # get_reward is not a tool
    trainer.train()
    assert len(_Recorded.seen) == 4  # one call per rollout
    for value, engine_return, done, ended in _Recorded.seen:
        assert value == engine_return and done and ended  # an unfinished rollout was cut by the engine
    logged = [h for h in trainer.state.log_history if "rewards/_Recorded/mean" in h][0]
    assert logged["reward"] == pytest.approx(sum(v for v, *_ in _Recorded.seen) / 4, abs=1e-4)


def test_grpo_trains_remotely_with_the_server_scoring_unfinished_episodes(tiny_sft, tmp_path):
    from client.remote_tool_env import RemoteReleaseOpsToolEnv, close_all

    seen = []

    class Recorded(RemoteReleaseOpsToolEnv):
        def get_reward(self) -> float:
            value = super().get_reward()
            seen.append((value, self.metrics.get("episode_return"), self.done))
            return value

    with run_live_server(env={"MAX_CONCURRENT_ENVS": "4"}) as url:
        trainer = _trainer_without_reward_funcs(tiny_sft, tmp_path, lambda: Recorded(url))
        assert sorted(t.__name__ for t in trainer.tools) == SEVEN
        try:
            trainer.train()
        finally:
            close_all()
    assert len(seen) == 4
    for value, server_return, done in seen:
        assert done and value == pytest.approx(server_return)  # the server ended and scored every episode


def test_an_unfinished_episode_is_scored_once_in_the_engine_the_same_in_process_and_remote(live_server):
    from client.remote_tool_env import make_remote_env_factory

    scenario = {"family": "qa_undercalls_p1_checkout_bug", "seed": 4, "difficulty": "easy"}
    local, remote = ReleaseOpsToolEnv(), make_remote_env_factory(live_server)()
    for env in (local, remote):
        env.reset(**scenario)
        env.hold_release("awaiting_fix")
        assert not env.done
    assert remote.get_reward() == pytest.approx(local.get_reward())
    assert local.truncated and remote.truncated and not local.terminated
    assert local.metrics["terminal_reason"] == remote.metrics["terminal_reason"] == "abandoned"
    assert local.get_reward() == local.reward  # idempotent: scored once


def test_collected_episodes_load_as_a_dataset_resume_and_warm_start_the_tiny_model(tmp_path):
    from datasets import load_dataset

    from training.collect import collect

    out = tmp_path / "rule-easy"
    first = collect("rule", "train", 3, out, "easy", progress=False)
    again = collect("rule", "train", 6, out, "easy", progress=False)  # an interrupted run, resumed
    assert (first["collected"], again["collected"], again["skipped"], again["episodes"]) == (3, 3, 3, 6)
    rows = load_dataset("json", data_files=str(out / "results.jsonl"), split="train")
    assert len(rows) == 6 and {"messages", "reward", "tool_trace", "metrics", "task", "verify_metrics"} <= set(rows.column_names)
    for row in rows:
        assert sum(row["verify_metrics"]["reward_breakdown"].values()) == pytest.approx(row["reward"])
        assert row["messages"][0]["role"] == "user" and row["messages"][1]["role"] == "assistant"
        assert len(row["tool_trace"]) == (len(row["messages"]) - 1) // 2
    assert json.loads((out / "metadata.json").read_text())["episodes"] == 6
    warm = warm_start(build(tmp_path / "base"), tmp_path / "warm", data=out, episodes=6, epochs=3)
    k = warm["samples"]
    assert k >= 1
    assert sum(warm["losses"][-k:]) < sum(warm["losses"][:k]) / 2  # the last epoch's loss is under half the first's
