"""GRPO on ReleaseOps Arena with TRL's `environment_factory`, in-process or against remote servers.

    # in-process environment
    python -m training.train_grpo --model Qwen/Qwen3-0.6B --env local --steps 200 --output-dir runs/qwen3
    # against one or more duplicated Spaces (sessions are spread across them)
    python -m training.train_grpo --model Qwen/Qwen3-0.6B --env-url https://you-releaseops.hf.space --steps 200
    # data-parallel on CPU cores (gloo): each rank plays its own prompt group, every rank stops at the same step
    OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 -m training.train_grpo --cpu --model <dir> ...

The environment owns the reward: TRL calls `get_reward()` on each instance,
which returns the verified episode return; an episode the model left
unfinished is cut there and scored by the engine as a missed deadline (in
process, or on the server for a remote env). No reward function is needed;
`episode_metrics` only logs the seed's episode metrics every step next to
TRL's `tools/*` metrics (it returns None, so it adds nothing to the reward).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from statistics import fmean

from releaseops_arena import ReleaseOpsToolEnv

from .make_dataset import build as build_rows


def episode_metrics(completions, environments, log_metric=None, **kwargs) -> list[None]:
    """Log episode metrics; contributes nothing to the reward (TRL treats None as no score)."""
    if log_metric is not None:
        for env in environments:
            env.get_reward()  # idempotent: ends an unfinished episode so that its metrics exist
        log_metric("episode/finished", fmean(env.terminated for env in environments))
        log_metric("episode/truncated", fmean(env.truncated for env in environments))
        for name in ("safe_ship", "unsafe_ship", "missed_deadline"):
            log_metric(f"episode/{name}", fmean(env.metrics.get("outcome") == name for env in environments))
        for key in ("budget_used", "invalid_actions", "false_blocks"):
            log_metric(f"episode/{key}", fmean(env.metrics.get(key, 0) for env in environments))
    return [None] * len(environments)


def _client_module():
    try:
        import releaseops_arena.client as client
    except ImportError:  # running from a source checkout without installing
        import client  # type: ignore[no-redef]
    return client


def load_dataset(path: str | None, rows: int, difficulty: str | None):
    from datasets import Dataset

    if path is None:
        return build_rows("train", rows, difficulty)
    p = Path(path)
    return Dataset.from_parquet(str(p / "train.parquet" if p.is_dir() else p))


def build_config(args, output_dir: str):
    from trl import GRPOConfig

    cpu = args.cpu
    return GRPOConfig(
        output_dir=output_dir,
        max_steps=args.steps,
        learning_rate=args.lr,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.max_tool_calls,
        temperature=args.temperature,
        beta=args.beta,
        use_vllm=args.use_vllm,
        vllm_mode=args.vllm_mode,
        logging_steps=1,
        save_strategy="no" if args.no_save else "steps",
        save_steps=max(1, args.steps),
        report_to=args.report_to,
        seed=args.seed,
        use_cpu=cpu,
        bf16=not cpu,
        chat_template_kwargs={"enable_thinking": False} if args.no_think else None,
    )


def TimeLimit(minutes: float, clock=None):
    """Stop training after `minutes` (checked after each step) of `clock`: wall time by default;
    `time.process_time` gives a budget that a run paused with SIGSTOP does not spend."""
    import time

    import torch
    from transformers import TrainerCallback

    clock = clock or time.monotonic

    class _TimeLimit(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.deadline = clock() + 60 * minutes

        def on_step_end(self, args, state, control, **kwargs):
            late = clock() > self.deadline
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                # Every rank must stop at the same step: one rank leaving alone would leave the
                # others waiting forever in the next gradient all-reduce.
                flag = torch.tensor([int(late)])
                torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
                late = bool(flag.item())
            if late:
                control.should_training_stop = True

    return _TimeLimit()


def generation_batch_size(config) -> int:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return config.per_device_train_batch_size * config.steps_per_generation * world


def train(args, clock=None) -> dict:
    """Run GRPO; returns {'log_history', 'tools', 'output_dir'}. Closes every remote session it opened.
    `clock` measures `--max-minutes` (wall time by default, see `TimeLimit`)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from . import copy_model  # noqa: F401  (registers the pointer-generator with AutoModelForCausalLM)

    config = build_config(args, args.output_dir)
    dataset = load_dataset(args.dataset, args.rows, args.difficulty)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model)
    client = _client_module() if args.env_url else None
    if client:
        # Fail fast: every generation in a batch holds one WebSocket session.
        client.check_capacity(args.env_url, generation_batch_size(config))
        factory = client.make_remote_env_factory(args.env_url)
    else:
        factory = ReleaseOpsToolEnv
    trainer = GRPOTrainer(model=model, reward_funcs=[episode_metrics], args=config, train_dataset=dataset,
                          processing_class=tokenizer, environment_factory=factory,
                          callbacks=[TimeLimit(args.max_minutes, clock)] if args.max_minutes else None)
    for m in (model, getattr(trainer, "ref_model", None)):  # the reference model too, when beta > 0
        if hasattr(m, "restore_forward"):  # TRL's fused LM head would bypass a pointer-generator's copy head
            m.restore_forward(args.temperature)
    tools = sorted(t.__name__ for t in trainer.tools)
    try:
        trainer.train()
    finally:
        if client:
            client.close_all()
    if not args.no_save:
        trainer.save_model(args.output_dir)  # the main process writes; the others wait for it
    history = trainer.state.log_history
    if trainer.accelerator.is_main_process:
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(args.output_dir) / "log_history.json").write_text(json.dumps(history, indent=1))
    return {"log_history": history, "tools": tools, "output_dir": args.output_dir}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="hub id or local path (its chat template must be one TRL knows)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--env", choices=["local"], default="local", help="in-process ReleaseOpsToolEnv")
    where.add_argument("--env-url", nargs="+", default=None, help="base URL(s) of running servers / Spaces")
    p.add_argument("--dataset", default=None, help="parquet file or directory from training.make_dataset")
    p.add_argument("--rows", type=int, default=512, help="train rows built on the fly when --dataset is absent")
    p.add_argument("--difficulty", choices=["easy", "medium", "hard"], default=None)
    p.add_argument("--num-generations", type=int, default=8, help="group size for GRPO advantages")
    p.add_argument("--batch-size", type=int, default=8, help="per-device train batch size (completions)")
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--max-completion-length", type=int, default=4096,
                   help="tokens for the whole episode: model turns plus tool results")
    p.add_argument("--max-tool-calls", type=int, default=40, help="max_tool_calling_iterations")
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--beta", type=float, default=0.0)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--max-minutes", type=float, default=None, help="stop after this much wall time")
    p.add_argument("--use-vllm", action="store_true")
    p.add_argument("--vllm-mode", default="colocate", choices=["colocate", "server"])
    p.add_argument("--cpu", action="store_true", help="train on CPU (fp32)")
    p.add_argument("--no-think", action="store_true", help="render prompts with enable_thinking=False")
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--report-to", default="none")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", default="runs/grpo")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    result = train(args)
    last = [h for h in result["log_history"] if "reward" in h]
    if last:
        print(json.dumps({k: v for k, v in last[-1].items() if k.startswith(("reward", "episode/", "tools/"))}))


if __name__ == "__main__":
    main()
