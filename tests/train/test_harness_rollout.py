"""TRL's GRPO with OpenEnv's harness rollout function (`build_harness_rollout_func`) on `client.harness` sessions:
one CPU step with the tiny model against a live server, each rollout scored with the verified return."""

from __future__ import annotations

import json

import pytest

from client.harness import ReleaseOpsSessionFactory
from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.brief import prompt_messages
from training.sft_warmup import warm_start
from training.tiny_model import build


@pytest.fixture(scope="module")
def tiny_sft(tmp_path_factory):
    """The tiny model warmed up on rule episodes, as tests/train/test_training.py builds it, so that it calls tools."""
    root = tmp_path_factory.mktemp("tiny_harness")
    warm_start(build(root / "base"), root / "sft", policy="rule", episodes=24, epochs=8, difficulty="easy")
    return str(root / "sft")


def tiny_model_step(trainer, session):
    """A `ModelStep` sampling the trainer's model on CPU. Its ids tile the conversation: the first turn's prompt,
    then each turn's new tokens (the tool results since, then the reply), so prompt + completion is the episode."""
    import torch
    from openenv.core.harness import ModelStepResult
    from openenv.core.llm_client import LLMResponse, ToolCall
    from trl.chat_template_utils import parse_response

    tokenizer, model, seen = trainer.processing_class, trainer.model, []

    def step(messages, tools, sampling):
        schemas = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                     "parameters": t.input_schema}} for t in tools]  # fmt: skip
        ids = tokenizer.apply_chat_template(
            messages, tools=schemas, add_generation_prompt=True, tokenize=True, return_dict=False, enable_thinking=False
        )
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=96, do_sample=True, temperature=1.0)
        reply = out[0, len(ids) :].tolist()
        new = ids[len(seen) :] if seen else []
        prompt_ids = [] if seen else list(ids)
        seen[:] = ids + reply
        message = parse_response(tokenizer, reply, prefix=ids, tools=schemas)
        calls = []
        for i, call in enumerate(message.get("tool_calls") or []):
            fn = call.get("function", call)
            args = fn.get("arguments") or {}
            args = json.loads(args) if isinstance(args, str) else args
            calls.append(ToolCall(id=f"call_{i}", name=fn["name"], args=dict(args)))
        return ModelStepResult(
            response=LLMResponse(content=message.get("content") or "", tool_calls=calls),
            prompt_ids=prompt_ids,
            completion_ids=new + reply,
            logprobs=[0.0] * (len(new) + len(reply)),
        )

    return step


class Recording(ReleaseOpsSessionFactory):
    """Keeps each session's calls, to replay them in process."""

    sessions: list = []

    def create(self, task=None, seed=None, episode_id=None):
        session = super().create(task, seed, episode_id)
        calls, call_tool, verify = [], session.call_tool, session.verify

        def recorded(name, arguments):
            calls.append((name, dict(arguments)))
            return call_tool(name, arguments)

        def verified(transcript, final_state=None):
            session.final_state, session.verified = final_state, verify(transcript, final_state)
            return session.verified

        session.call_tool, session.calls, session.verify = recorded, calls, verified
        Recording.sessions.append(session)
        return session


def test_grpo_takes_a_cpu_step_on_harness_rollouts_scored_with_the_in_process_return(tiny_sft, tmp_path):
    from datasets import Dataset
    from openenv.core.harness import HarnessRunLimits, MCPHarnessAdapter
    from openenv.core.harness.rollout import build_harness_rollout_func
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import add_response_schema

    from tests.live_server import run_live_server

    tasks = [{"split": "train", "index": i, "difficulty": "easy"} for i in range(2)]
    rewards: list[float] = []

    def env_reward(completions, env_reward, **kwargs):  # the harness's reward column, forwarded as is
        rewards.extend(env_reward)
        return list(env_reward)

    Recording.sessions.clear()
    # The trainer fills every slot from one address: the operator lifts the per-address share.
    with run_live_server(env={"MAX_CONCURRENT_ENVS": "4", "MAX_SESSIONS_PER_CLIENT": "0"}) as url:
        # A GRPO group of 2 shares its task; 4 turns keep the CPU step short, so a cut episode is scored (abandoned).
        factory = Recording(url, tasks=tasks, group_size=2, score_cut=True)
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(tiny_sft),
            processing_class=add_response_schema(AutoTokenizer.from_pretrained(tiny_sft)),  # TRL's tool-call parser
            reward_funcs=[env_reward],
            train_dataset=Dataset.from_list([{"prompt": prompt_messages()}] * 4),
            rollout_func=build_harness_rollout_func(
                session_factory=factory,
                harness_adapter=MCPHarnessAdapter(),
                model_step_builder=tiny_model_step,
                limits=HarnessRunLimits(max_turns=4),
            ),
            args=GRPOConfig(
                output_dir=str(tmp_path),
                max_steps=1,
                per_device_train_batch_size=4,
                num_generations=2,
                max_completion_length=2048,
                learning_rate=1e-4,
                logging_steps=1,
                save_strategy="no",
                report_to=[],
                use_cpu=True,
                bf16=False,
            ),
        )
        try:
            trainer.train()
        finally:
            factory.close()
    assert trainer.state.global_step == 1
    assert len(rewards) == len(Recording.sessions) == 4
    assert [s.task for s in Recording.sessions] == [tasks[0], tasks[0], tasks[1], tasks[1]]
    assert any(s.calls for s in Recording.sessions), "the warmed-up model called no tool"
    for reward, session in zip(rewards, Recording.sessions):
        assert session.env.done  # every rollout ended on the server, scored there
        cut = not session.final_state["done"]  # the harness's 4 turns ran out with the episode still on
        assert session.verified.metrics.get("cut_by_harness", False) is cut  # a cut episode says so
        env = ReleaseOpsToolEnv()
        env.reset(**session.task)
        for name, arguments in session.calls:
            try:
                getattr(env, name)(**arguments)
            except (ValueError, TypeError, AttributeError):
                pass
        assert reward == pytest.approx(env.get_reward(), abs=1e-9)
    logged = [h for h in trainer.state.log_history if "reward" in h][0]
    assert logged["reward"] == pytest.approx(sum(rewards) / 4, abs=1e-4)
    print("calls per rollout:", [len(s.calls) for s in Recording.sessions], "rewards:", rewards)
