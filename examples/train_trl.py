# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "openenv-releaseops-arena",
#     "trl>=1.16,<1.17",
#     "transformers>=5.2",
#     "datasets>=3",
#     "accelerate>=1.0",
#     "torch>=2.4",
# ]
# ///

"""GRPO on ReleaseOps Arena with TRL's `environment_factory`: a model learns to supervise a release.

Each episode, the model reads the task brief and a release board, then calls the environment's
seven tools (inspect a PR, a CI run or a ticket, ask a worker, approve, block, hold). TRL makes
one environment per rollout, turns the environment's public methods into tools, and scores the
rollout with the environment's `get_reward()`: the verified episode return. No reward function
is needed.

Usage, from a checkout after `make test` (which installs the training extras):

```sh
# the environment in-process
.venv/bin/python examples/train_trl.py --model Qwen/Qwen3-0.6B --steps 100

# against a running server or Space (`make serve`, or https://<you>-releaseops-arena.hf.space);
# several URLs spread the sessions round-robin
.venv/bin/python examples/train_trl.py --model Qwen/Qwen3-0.6B --env-url http://127.0.0.1:8000
```

The header above lists the dependencies for a PEP 723 runner (`uv run examples/train_trl.py ...`),
which needs `openenv-releaseops-arena` installable from your index. `python -m training.train_grpo`
is the full recipe (LoRA, vLLM, held-out evaluation, Hub push).
"""

import argparse

import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.brief import prompt_messages
from releaseops_arena.client import check_capacity, close_all, make_remote_env_factory
from releaseops_arena.splits import task_scenario


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="GRPO on ReleaseOps Arena with TRL.")
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B", help="hub id or local path (a Qwen3 chat template)")
    parser.add_argument("--env-url", nargs="+", default=None, help="server base URL(s); in-process when absent")
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps")
    parser.add_argument("--rows", type=int, default=512, help="training tasks (rows of the dataset)")
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard"], default=None)
    parser.add_argument("--num-generations", type=int, default=8, help="episodes per task (the GRPO group)")
    parser.add_argument("--batch-size", type=int, default=8, help="episodes per device per step")
    parser.add_argument("--max-completion-length", type=int, default=4096, help="tokens per episode, tools included")
    parser.add_argument("--max-tool-calls", type=int, default=40, help="tool calls per episode")
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--output-dir", default="runs/train_trl")
    return parser.parse_args(argv)


def build_dataset(rows: int, difficulty: str | None) -> Dataset:
    """One row per task of the train split: the brief as the prompt, and the task that `reset(**row)` plays.

    TRL appends the board that `reset` returns to the prompt's last (user) message.
    """
    return Dataset.from_list(
        [
            {
                "prompt": prompt_messages(),
                "split": "train",
                "index": index,
                "difficulty": task_scenario("train", index, difficulty)["difficulty"],
            }
            for index in range(rows)
        ]
    )


def main(argv=None) -> None:
    args = parse_args(argv)
    gpu = torch.cuda.is_available()
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.steps,
        learning_rate=args.learning_rate,
        per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.max_tool_calls,
        chat_template_kwargs={"enable_thinking": False},
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=not gpu,
        bf16=gpu,
    )
    if args.env_url:
        # One WebSocket session per rollout: fail now if the servers cannot hold a generation batch.
        check_capacity(args.env_url, config.per_device_train_batch_size * config.steps_per_generation)
        environment_factory = make_remote_env_factory(args.env_url)
    else:
        environment_factory = ReleaseOpsToolEnv

    trainer = GRPOTrainer(
        model=args.model,
        args=config,
        train_dataset=build_dataset(args.rows, args.difficulty),
        environment_factory=environment_factory,
    )
    try:
        trainer.train()
    finally:
        close_all()  # frees the server sessions of a remote run; nothing to do in-process
    trainer.save_model(args.output_dir)
    trainer.state.save_to_json(f"{args.output_dir}/trainer_state.json")


if __name__ == "__main__":
    main()
