r"""GRPO on ReleaseOps Arena with TRL's `environment_factory`, in-process or against remote servers.
Over 400 lines: the trainer's command line is most of it, and each flag is documented where it is parsed.

    # in-process environment
    python -m training.train_grpo --model Qwen/Qwen3-0.6B --env local --steps 200 --output-dir runs/qwen3
    # against one or more duplicated Spaces (sessions are spread across them)
    python -m training.train_grpo --model Qwen/Qwen3-0.6B --env-url https://you-releaseops.hf.space --steps 200
    # data-parallel on CPU cores (gloo): each rank plays its own prompt group, every rank stops at the same step
    OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 -m training.train_grpo --cpu --model <dir> ...

On GPUs: LoRA, generation by a vLLM server, a held-out evaluation every 50 steps, pushed to the Hub.
The environment server keeps port 8000, so vLLM gets 8001 (TRL's `trl vllm-serve` defaults to 8000 too):

    releaseops-serve --port 8000                                  # terminal 1: the environment (or a Space)
    CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen3-1.7B --port 8001      # terminal 2: generation
    CUDA_VISIBLE_DEVICES=1 python -m training.train_grpo --model Qwen/Qwen3-1.7B \
        --env-url http://127.0.0.1:8000 --lora --lr 1e-5 --vllm-mode server --vllm-server-url http://127.0.0.1:8001 \
        --eval-split heldout_seeds --eval-steps 50 --log-completions --no-think --steps 200 \
        --output-dir runs/qwen3-1.7b --push-to-hub --hub-model-id you/releaseops-qwen3-1.7b-lora  # terminal 3: training

On one GPU, `--vllm-mode colocate` runs vLLM inside the trainer instead (no server to start;
`--vllm-gpu-memory-utilization` is its share of the GPU). `--use-vllm` alone means colocate;
without either, generation is `model.generate`. With `--lora` only the adapter is trained and
saved (`adapter_model.safetensors`, loadable by `AutoModelForCausalLM.from_pretrained`, so
`python -m training.evaluate --policy hf:<output-dir>` evaluates it); in vLLM's server mode TRL
merges it into the weights it sends to the server at each step.

The environment owns the reward: TRL calls `get_reward()` on each instance,
which returns the verified episode return; an episode the model left unfinished is cut there and
scored by the engine as a missed deadline (in process, or on the server for a remote env). No
reward function is needed; `episode_metrics` only logs the seed's episode metrics every step next
to TRL's `tools/*` metrics (it returns None, so it adds nothing to the reward). With `--eval-split`,
TRL's own evaluation plays that split's episodes in the same environments every `--eval-steps`
steps and logs the same metrics prefixed `eval_` (`eval_reward`, `eval_episode/safe_ship`, ...).
The output directory gets `log_history.json` and `run.json` (the options, `benchmark_version`
and `prompt_version`, so runs on different worlds or briefs are never compared by mistake).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from statistics import fmean

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.brief import PROMPT_VERSION
from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.splits import EVALUATION_SPLITS

from .make_dataset import build as build_rows

# The environment server listens on 8000 (releaseops-serve, the Space, the Dockerfile), and so does
# `trl vllm-serve` by default: vLLM gets the next port.
DEFAULT_VLLM_SERVER_URL = "http://127.0.0.1:8001"
VLLM_SERVE_COMMAND = "trl vllm-serve --model <same --model> --port 8001"


def episode_metrics(completions, environments, log_metric=None, **kwargs) -> list[None]:
    """Log episode metrics; contributes nothing to the reward (TRL treats None as no score).
    Runs in TRL's evaluation too, whose metrics TRL logs with an `eval_` prefix."""
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
    return check_versions(Dataset.from_parquet(str(p / "train.parquet" if p.is_dir() else p)), str(p))


def check_versions(rows, where: str):
    """Refuse rows made for another world or brief: their prompt is not the one this code's run.json
    names, and results of different versions never mix (rebuild them with training.make_dataset)."""
    for column, current in (("benchmark_version", BENCHMARK_VERSION), ("prompt_version", PROMPT_VERSION)):
        found = sorted(set(rows[column])) if column in rows.column_names else ["none"]
        if found != [current]:
            raise SystemExit(
                f"{where}: rows of {column} {', '.join(map(str, found))}, not {current}; rebuild them "
                "with `python -m training.make_dataset`"
            )
    return rows


def load_eval_dataset(args):
    """The held-out rows TRL evaluates on (`--eval-split`), or None: the first `--eval-rows` of
    `<split>.parquet` when `--dataset` is a directory of training.make_dataset that has it, else built."""
    if not args.eval_split:
        return None
    if args.dataset and (Path(args.dataset) / f"{args.eval_split}.parquet").is_file():
        from datasets import Dataset

        path = Path(args.dataset) / f"{args.eval_split}.parquet"
        rows = check_versions(Dataset.from_parquet(str(path)), str(path))
        return rows.select(range(min(args.eval_rows, len(rows))))
    return build_rows(args.eval_split, args.eval_rows, args.difficulty)


def use_vllm(args) -> bool:
    """`--vllm-mode` implies vLLM; `--use-vllm` alone means colocate."""
    return bool(args.use_vllm or args.vllm_mode)


def build_config(args, output_dir: str):
    from trl import GRPOConfig

    cpu = args.cpu
    vllm = use_vllm(args)
    mode = args.vllm_mode or "colocate"
    server = vllm and mode == "server"
    if args.push_to_hub and args.no_save:
        raise ValueError("--push-to-hub pushes what is saved: drop --no-save")
    if args.eval_split and args.eval_steps < 1:
        raise ValueError("--eval-steps must be at least 1")
    if args.top_k < 0:
        raise ValueError(f"--top-k must be 0 (every token) or more, not {args.top_k}")
    if args.min_p is not None and not 0 < args.min_p <= 1:
        raise ValueError(f"--min-p must be in (0, 1], not {args.min_p}")
    if args.save_steps is not None and args.save_steps < 1:
        raise ValueError(f"--save-steps must be at least 1, not {args.save_steps}")
    if args.save_steps is not None and args.no_save:
        raise ValueError("--save-steps saves checkpoints: drop --no-save")
    from urllib.parse import urlsplit

    vllm_port = urlsplit(args.vllm_server_url).port
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
        # Truncated sampling: a rollout leaves the argmax only where the model weighs another token (TRL's
        # defaults, 0 and None, sample from the whole vocabulary).
        top_k=args.top_k,
        min_p=args.min_p,
        beta=args.beta,
        # How a group's rewards become advantages: TRL's default "group" scales each group to unit spread, so
        # a group whose returns differ by an inspection's cost weighs as much as one where some rollouts ship
        # and others miss the deadline; "none" keeps the returns' own scale (Dr. GRPO). And how token losses
        # are summed: TRL's default "dapo" divides by the batch's active tokens, "dr_grpo" by a constant.
        scale_rewards=args.scale_rewards,
        loss_type=args.loss_type,
        # PPO-style reuse (GRPO's mu): each generated batch trains this many optimizer steps, clipped by
        # TRL's epsilon; where generation is most of a step's cost (CPU), more learning per rollout.
        num_iterations=args.num_iterations,
        # generation by vLLM (GRPOConfig's "Parameters that control generation acceleration powered by vLLM")
        use_vllm=vllm,
        vllm_mode=mode,
        vllm_server_base_url=args.vllm_server_url if server else None,  # TRL then ignores host and port
        vllm_server_port=vllm_port
        if server and vllm_port
        else urlsplit(DEFAULT_VLLM_SERVER_URL).port,  # never TRL's 8000
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,  # colocate only
        vllm_max_model_length=args.vllm_max_model_length,
        # held-out evaluation: TRL's own evaluation loop plays the eval rows in the environments
        eval_strategy="steps" if args.eval_split else "no",
        eval_steps=args.eval_steps if args.eval_split else None,
        per_device_eval_batch_size=args.eval_batch_size or args.batch_size,
        num_generations_eval=args.eval_generations,
        # completions
        log_completions=args.log_completions,
        num_completions_to_print=args.num_completions_to_print,
        logging_steps=1,
        save_strategy="no" if args.no_save else "steps",
        # Without --save-steps: the final model (into output_dir), plus the Trainer's checkpoint-<steps>/
        # when a run reaches --steps (none when --max-minutes stops it first). With it, also a
        # checkpoint-<step>/ every that many steps, to pick from on validation after the run.
        save_steps=args.save_steps or max(1, args.steps),
        push_to_hub=args.push_to_hub,
        hub_model_id=args.hub_model_id,
        hub_private_repo=args.hub_private or None,
        report_to=args.report_to,
        seed=args.seed,
        use_cpu=cpu,
        bf16=not cpu,
        chat_template_kwargs={"enable_thinking": False} if args.no_think else None,
    )


def lora_config(args):
    """`peft.LoraConfig` for `--lora` (None without it): TRL wraps the model with it (`peft_config`)."""
    if not args.lora:
        return None
    from peft import LoraConfig

    targets = args.lora_target_modules
    if targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    return LoraConfig(
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )


def environment_factory(args):
    """`ReleaseOpsToolEnv` in process, or a picklable `RemoteEnvFactory` over `--env-url` (opens nothing yet)."""
    if args.env_url:
        return _client_module().make_remote_env_factory(args.env_url)
    return ReleaseOpsToolEnv


def trainer_kwargs(args, config, clock=None) -> dict:
    """Everything `GRPOTrainer` gets but the model and the tokenizer (`train` adds those)."""
    callbacks = [TimeLimit(args.max_minutes, clock)] if args.max_minutes else None
    return {
        "reward_funcs": [episode_metrics],
        "args": config,
        "train_dataset": load_dataset(args.dataset, args.rows, args.difficulty),
        "eval_dataset": load_eval_dataset(args),
        "environment_factory": environment_factory(args),
        "peft_config": lora_config(args),
        "callbacks": callbacks,
    }


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


def sessions_needed(config) -> int:
    """Environments held at once: TRL keeps one pool per process for training and evaluation alike,
    as large as the larger of a generation batch and an evaluation batch."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if config.eval_strategy == "no":
        return generation_batch_size(config)
    return max(generation_batch_size(config), config.per_device_eval_batch_size * world)


def run_record(args, trainer=None) -> dict:
    """What `run.json` says: the versions next to the options (and TRL's, PEFT's), the steps done."""
    import importlib.metadata as md

    def version(name):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    return {
        "benchmark_version": BENCHMARK_VERSION,
        "prompt_version": PROMPT_VERSION,
        "model": args.model,
        "env": list(args.env_url) if args.env_url else "local",
        "lora": bool(args.lora),
        "vllm_mode": (args.vllm_mode or "colocate") if use_vllm(args) else None,
        "eval_split": args.eval_split,
        "global_step": trainer.state.global_step if trainer is not None else 0,
        "versions": {name: version(name) for name in ("trl", "transformers", "torch", "peft")},
        "args": vars(args),
    }


def train(args, clock=None) -> dict:
    """Run GRPO; returns {'log_history', 'tools', 'output_dir'}. Closes every remote session it opened.
    `clock` measures `--max-minutes` (wall time by default, see `TimeLimit`)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    config = build_config(args, args.output_dir)
    kwargs = trainer_kwargs(args, config, clock)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model)
    client = _client_module() if args.env_url else None
    if client:
        # Fail fast: every environment in TRL's pool holds one WebSocket session.
        client.check_capacity(args.env_url, sessions_needed(config))
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, **kwargs)
    for m in (trainer.model, getattr(trainer, "ref_model", None)):  # the reference model too, when beta > 0
        if hasattr(m, "restore_forward"):  # TRL's fused LM head would bypass a pointer-generator's copy head
            m.restore_forward(args.temperature)
    tools = sorted(t.__name__ for t in trainer.tools)
    try:
        trainer.train()
    finally:
        if client:
            client.close_all()
    history = trainer.state.log_history
    if trainer.accelerator.is_main_process:
        # Written before save_model, so that --push-to-hub pushes them with the model.
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(args.output_dir) / "log_history.json").write_text(json.dumps(history, indent=1))
        (Path(args.output_dir) / "run.json").write_text(json.dumps(run_record(args, trainer), indent=1))
    if not args.no_save:
        trainer.save_model(args.output_dir)  # the main process writes (an adapter with --lora)
        # save_model has no barrier at its end: without one, a rank that returns and exits (and perhaps
        # fails at teardown) first can have torchrun stop the main process while it still writes.
        trainer.accelerator.wait_for_everyone()
    return {"log_history": history, "tools": tools, "output_dir": args.output_dir}


GPU_EPILOG = __doc__[__doc__.index("On GPUs:") : __doc__.index("The environment owns the reward")].rstrip()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog=GPU_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
    p.add_argument(
        "--max-completion-length",
        type=int,
        default=4096,
        help="tokens for the whole episode: model turns plus tool results",
    )
    p.add_argument("--max-tool-calls", type=int, default=40, help="max_tool_calling_iterations")
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--beta", type=float, default=0.0)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest tokens (0: all)")
    p.add_argument(
        "--min-p",
        type=float,
        default=None,
        help="sample among tokens at least this share of the likeliest's probability",
    )
    p.add_argument(
        "--scale-rewards",
        choices=["group", "batch", "none"],
        default="group",
        help="divide advantages by the reward spread of each group, of the batch, or not at all (Dr. GRPO)",
    )
    p.add_argument(
        "--loss-type",
        choices=["dapo", "dr_grpo", "grpo", "bnpo"],
        default="dapo",
        help="how token losses are normalised (TRL's loss_type; dapo: by the batch's active tokens)",
    )
    p.add_argument(
        "--num-iterations",
        type=int,
        default=1,
        help="optimizer steps per generated batch (GRPO's mu; TRL's num_iterations, clipped by its epsilon)",
    )
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--max-minutes", type=float, default=None, help="stop after this much wall time")
    lora = p.add_argument_group("LoRA (PEFT): only an adapter is trained and saved")
    lora.add_argument("--lora", action="store_true", help="train a LoRA adapter (TRL's peft_config)")
    lora.add_argument("--lora-r", type=int, default=16, help="adapter rank")
    lora.add_argument("--lora-alpha", type=int, default=32, help="scale: alpha / r")
    lora.add_argument("--lora-dropout", type=float, default=0.05)
    lora.add_argument(
        "--lora-target-modules",
        default="all-linear",
        help="'all-linear' (every linear layer but the LM head), or comma-separated module names "
        "such as q_proj,k_proj,v_proj,o_proj",
    )
    vllm = p.add_argument_group("vLLM generation (a GPU and `pip install vllm`)")
    vllm.add_argument("--use-vllm", action="store_true", help="generate with vLLM (colocate unless --vllm-mode)")
    vllm.add_argument(
        "--vllm-mode",
        default=None,
        choices=["colocate", "server"],
        help="implies --use-vllm. colocate: vLLM inside the trainer, sharing its GPU; server: "
        "a separate `trl vllm-serve` (see --vllm-server-url)",
    )
    vllm.add_argument(
        "--vllm-server-url",
        default=DEFAULT_VLLM_SERVER_URL,
        help=f"the vLLM server of --vllm-mode server (default {DEFAULT_VLLM_SERVER_URL}, not 8000, "
        f"which is the environment server's); start it with `{VLLM_SERVE_COMMAND}`",
    )
    vllm.add_argument(
        "--vllm-gpu-memory-utilization",
        type=float,
        default=0.3,
        help="GPU share of a colocated vLLM (a server takes its own flag)",
    )
    vllm.add_argument(
        "--vllm-max-model-length", type=int, default=None, help="vLLM context window (default: the model config's)"
    )
    ev = p.add_argument_group("held-out evaluation during training (TRL's evaluation loop plays the episodes)")
    ev.add_argument(
        "--eval-split",
        choices=list(EVALUATION_SPLITS),
        default=None,
        help="evaluate on this split: <split>.parquet of a --dataset directory, else rows built "
        "like training.make_dataset's (--difficulty applies)",
    )
    ev.add_argument("--eval-rows", type=int, default=16, help="tasks of the split played at each evaluation")
    ev.add_argument("--eval-steps", type=int, default=50, help="evaluate every this many steps")
    ev.add_argument("--eval-generations", type=int, default=1, help="episodes per task (num_generations_eval)")
    ev.add_argument("--eval-batch-size", type=int, default=None, help="per device (default: --batch-size)")
    p.add_argument(
        "--log-completions",
        action="store_true",
        help="print a sample of episodes every step and keep them in <output-dir>/completions/",
    )
    p.add_argument("--num-completions-to-print", type=int, default=2)
    hub = p.add_argument_group("Hugging Face Hub")
    hub.add_argument("--push-to-hub", action="store_true", help="push each save and the final model (or adapter)")
    hub.add_argument("--hub-model-id", default=None, help="user/name (default: the output directory's name)")
    hub.add_argument("--hub-private", action="store_true", help="create the repository private")
    p.add_argument("--cpu", action="store_true", help="train on CPU (fp32)")
    p.add_argument("--no-think", action="store_true", help="render prompts with enable_thinking=False")
    p.add_argument("--no-save", action="store_true")
    p.add_argument(
        "--save-steps",
        type=int,
        default=None,
        help="also save a checkpoint-<step>/ (model, optimizer and trainer state) every this many steps",
    )
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
