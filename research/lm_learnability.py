"""Does a small language model learn to supervise? The end-to-end TRL experiment, on CPU, offline.
Over 400 lines: the experiment's stages run in order and share one budget.

    # the published recipe (lm_settings.PRESETS), on both cores within a 50 wall-minute budget:
    python -m research.lm_learnability --preset published --minutes 50 -n 1000 --out runs/lm
    python -m research.lm_learnability --minutes 60 --out runs/lm   # the defaults, one core

Stages, each timed: build an offline tokenizer (one token per board id) and a
Qwen3-style model with a pointer-generator head that copies ids off the board
(`research/copy_model.py`); collect warm-start episodes of the reference
planner (visible information only, so its choices can be learned from the
board) on the train split (easy) in OpenEnv's collect format, which is TRL's
tool-loop conversation
(`training/collect.py`); supervised warm start on their assistant tokens (with `sft_seeds`,
several side by side, the best on train-split validation tasks kept); evaluate on held-out
seeds (easy); optionally mine hard prompts (`hard_tasks`: train
tasks the warm start does not already solve); GRPO with TRL's `environment_factory`
(`training/train_grpo.py`, the environment owns the reward); evaluate again on
the same held-out episodes. The evaluation plays the checkpoint through the
harness's own LLM policy (greedy decoding), as `python -m training.evaluate --policy hf:<dir>`
does, under the name `copy:<dir>`, whose loader registers the copy head in every worker first.

`research/results/lm_learnability.json` (what `run` returns; `markdown(results)` renders it):

    {"config": {minutes, seed, n_eval, split, difficulty, settings: SETTINGS as run, vocab, parameters,
                warm_start_episodes, grpo_minutes},
     "stages": {"build" | "collect" | "sft" | "select" | "eval_sft" | "mine" | "grpo" | "select_grpo" | "eval_grpo"
                | "total": {"wall_s", "cpu_s"}},
     "sft": {"steps", "loss_first", "loss_last", "seed"},    # the warm start kept
     "warm_starts": [{"seed", "steps", "loss_last", "validation": SUMMARY}],  # with sft_seeds > 1
     "grpo": {"steps", "rewards": [mean reward per step], "zero_std_steps": steps whose rollouts all scored the same,
              "global_step": the Trainer's steps, "selection": [{"step", "validation": SUMMARY}], "kept_step"},
              # selection and kept_step with grpo_save_steps
     "mining": {"pool": [first, end), "kept": count, "kept_tasks", "policy_mean", "reference_mean",
                "replayed": count, "replayed_tasks"},  # with mine_tasks; replayed: solved tasks beside them
     "eval": {"warm start (SFT)": SUMMARY, "SFT + GRPO": SUMMARY},
     "grpo_beats_warm_start": bool,        # return intervals do not overlap, warm start's below
     "calls_collapse": bool,               # GRPO's calls/episode under half the warm start's
     "targets": {"sft_valid_calls_90": bool, "sft_finished_50": bool, "grpo_gain": bool},
     "variants": [{"name", "note", "valid_calls", "finished", "calls_per_episode", "mean_return",
                   "measured_with"}]}       # every variant tried, strings as measured

SUMMARY: {"episodes", "calls_per_episode": {"mean", "ci95"}, "invalid_rate": {"rate", "ci95", "n"},
"finished": {"rate", "ci95", "n"}, "safe_ship": {...}, "unsafe_ship": {...}, "missed_deadline": {...},
"mean_return": {"mean", "ci95"}}; rates are fractions with Wilson intervals, means with normal
intervals (training.evaluate). "Finished" is an episode the release ended (shipped or its deadline
passed), not one cut because the model stopped calling tools.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest.mock import patch

from releaseops_arena.brief import PROMPT_VERSION
from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.splits import task_scenario
from research import copy_model
from training.collect import collect, load_conversations
from training.evaluate import mean_ci, rate, run_episodes, summarize

from .lm_report import markdown, valid_calls_90, variant_row
from .lm_settings import PRESETS, SETTINGS

SPLIT = "heldout_seeds"
# Every stage plays this level; `--difficulty` sets it for a run (easy is the published one).
DIFFICULTIES = ("easy", "medium", "hard")
DIFFICULTY = "easy"
RESULTS = Path("research/results/lm_learnability.json")


def warm_conversations(
    policy: str,
    n: int,
    seed: int = 0,
    recovery: float = 0.0,
    difficulty: str = DIFFICULTY,
    recovery_calls: float = 0.0,
) -> list[list[dict]]:
    """The safe-ship episodes among `n` train episodes of `policy` (easy), collected in OpenEnv's format,
    loaded back, each closed by the turn that ends TRL's tool loop (`sft_warmup.closed`). With
    `recovery`, that share of the blocks is first tried with a wrong rule, refused by the engine
    (`research/recovery.py`; the same conversation format, the refused turns not learned from), and with
    `recovery_calls` that share of the approvals and inspections with a wrong tool or argument."""
    from training.sft_warmup import closed

    if recovery or recovery_calls:
        from .recovery import stumbling_conversations

        return [closed(m) for m in stumbling_conversations(policy, "train", n, difficulty, recovery, recovery_calls)]
    with tempfile.TemporaryDirectory() as tmp:
        collect(policy, "train", n, Path(tmp), difficulty, progress=False)
        return [closed(m) for m in load_conversations(Path(tmp))]


def evaluation(
    checkpoint: str | Path, n: int, workers: int = 1, start: int = 0, split: str = SPLIT, difficulty: str = DIFFICULTY
) -> dict:
    """SUMMARY of a checkpoint on easy tasks `start`..`start + n - 1` of `split` (held-out by default; see
    the module docstring), played by `workers` processes of one torch thread each (greedy decoding: the
    same episodes however split)."""
    from training.evaluate import _LOADED

    name = checkpoint_policy(checkpoint)
    scenario_list = [task_scenario(split, i, difficulty) for i in range(start, start + n)]
    with one_thread_children():
        episodes = [runs[0] for runs in run_episodes(name, scenario_list, workers=workers, progress=False)]
    _LOADED.pop(name, None)  # a checkpoint directory is rewritten between stages
    return summary(episodes)


def checkpoint_policy(checkpoint: str | Path) -> str:
    """The evaluation's policy name for a saved copy model, `copy:<checkpoint>`, its loader registered.
    Not `hf:`: evaluation workers are spawned bare once torch is loaded, and each must register the
    copy head before it loads the checkpoint (the loader does; a worker gets its parent's loaders)."""
    from training.evaluate import register_loader

    register_loader(copy_model.POLICY_PREFIX, copy_model.load_policy)
    return f"{copy_model.POLICY_PREFIX}{checkpoint}"


def one_thread_children():
    """Worker processes started inside this block run torch on one thread each: `workers` processes
    share the machine's cores instead of each claiming all of them."""
    return patch.dict(os.environ, {"OMP_NUM_THREADS": "1"})


def summary(episodes: list[dict]) -> dict:
    m = summarize(episodes)
    calls = [e["tool_calls"] for e in episodes]
    return {
        "episodes": m["episodes"],
        "calls_per_episode": {"mean": round(sum(calls) / len(calls), 3), "ci95": mean_ci(calls)},
        "invalid_rate": m["invalid_action"],
        "finished": rate(sum(bool(e["terminated"]) for e in episodes), len(episodes)),
        **{k: m[k] for k in ("safe_ship", "unsafe_ship", "missed_deadline", "mean_return")},
    }


# What hard-prompt mining keeps (`mine_keep`): tasks the policy does not solve (below the reference), or only
# those whose greedy episode it does not finish (cut before the release ends: a missed deadline).
MINE_KEEP = ("below_reference", "unfinished")


def hard_tasks(
    policy: str,
    start: int,
    n: int,
    reference: str = "planner",
    workers: int = 1,
    difficulty: str = DIFFICULTY,
    keep: str = "below_reference",
) -> dict:
    """Hard-prompt mining on the train split: train tasks `start`..`start + n - 1` (easy), each played once
    greedily by `policy` and by `reference`. "kept" are the tasks `policy` does not already solve: its
    return is below both a clean safe ship's (SAFE_SHIP, nothing spent) and `reference`'s, whichever is
    higher; with `keep="unfinished"`, only those whose episode it does not finish. A solved task mostly
    gives a GRPO group of equal returns (in the run without mining, 31 of
    63 steps had all 8 rollouts at one return: zero advantage, nothing learned).
    Returns {"pool": [start, start + n], "kept": [task index], "policy_mean", "reference_mean"}."""
    from releaseops_arena.rewards import SAFE_SHIP
    from training.evaluate import _LOADED

    if keep not in MINE_KEEP:
        raise ValueError(f"mine_keep={keep!r}: expected one of {', '.join(MINE_KEEP)}")
    scenarios = [task_scenario("train", i, difficulty) for i in range(start, start + n)]
    with one_thread_children():
        episodes, ref = (
            [runs[0] for runs in run_episodes(name, scenarios, workers=w, progress=False)]
            for name, w in ((policy, workers), (reference, 1))
        )
    _LOADED.pop(policy, None)  # a checkpoint directory is rewritten between stages
    own, ref = [e["episode_return"] for e in episodes], [e["episode_return"] for e in ref]
    kept = [
        start + k
        for k, (e, a, b) in enumerate(zip(episodes, own, ref))
        if a < max(b, SAFE_SHIP) - 1e-9 and (keep == "below_reference" or not e["terminated"])
    ]
    return {
        "pool": [start, start + n],
        "kept": kept,
        "policy_mean": round(sum(own) / n, 4),
        "reference_mean": round(sum(ref) / n, 4),
    }


def replayed(mined: dict, replay: float) -> list[int]:
    """The tasks of the mining pool GRPO replays beside the kept ones: `replay` times as many as there are
    kept ones (rounded, at most every other task), the first in pool order. With mine_keep "below_reference"
    these are the solved tasks; with "unfinished", every finished one, below the planner or not."""
    hard = set(mined["kept"])
    solved = [t for t in range(*mined["pool"]) if t not in hard]
    return solved[: round(replay * len(mined["kept"]))]


def task_rows(tasks: list[int], path: Path, difficulty: str = DIFFICULTY) -> Path:
    """GRPO's dataset of these train tasks (easy), as `training.make_dataset` writes it, saved at `path`."""
    from training.make_dataset import build as build_rows

    build_rows("train", max(tasks) + 1, difficulty).select(tasks).to_parquet(str(path))
    return path


def parameters(path: Path) -> int:
    from transformers import AutoModelForCausalLM

    return sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(path).parameters())


def run(
    minutes: float,
    out_dir: Path,
    seed: int = 0,
    n_eval: int = 100,
    settings: dict | None = None,
    difficulty: str = DIFFICULTY,
) -> dict:
    """The whole experiment within about `minutes`; returns the results dict (module docstring).
    With `processes` 1 the budget is this process's CPU time on one core (a run paused with SIGSTOP
    keeps it); with more it is wall time on that many cores: the warm start uses them as torch
    threads, the evaluations and the mining as worker processes, GRPO as data-parallel ranks
    (`torchrun`, one prompt group each per step). `stages` reports wall and CPU seconds (CPU of this
    process only, so under `processes` > 1 the workers' and ranks' CPU is not in it)."""
    import torch

    copy_model.register()
    from transformers import AutoTokenizer

    from training import train_grpo

    cfg = {**SETTINGS, **(settings or {})}
    procs = int(cfg["processes"])
    budget = time.process_time if procs == 1 else time.monotonic
    torch.set_num_threads(int(cfg["sft_threads"]) or procs)
    out_dir = Path(out_dir)
    stages: dict[str, dict] = {}
    wall0, cpu0, budget0 = time.monotonic(), time.process_time(), budget()
    clock = [wall0, cpu0]

    def lap(name: str) -> None:
        wall, cpu = time.monotonic(), time.process_time()
        stages[name] = {"wall_s": round(wall - clock[0], 1), "cpu_s": round(cpu - clock[1], 1)}
        clock[:] = [wall, cpu]

    base, episodes, warms, warm = warm_stage(out_dir, cfg, seed, minutes, difficulty, lap)
    tokenizer = AutoTokenizer.from_pretrained(base)
    sft_dir = Path(warm["dir"])
    before = evaluation(sft_dir, n_eval, workers=procs, start=cfg["eval_start"], difficulty=difficulty)
    lap("eval_sft")
    mined = None
    if cfg["mine_tasks"]:
        mined = hard_tasks(
            checkpoint_policy(sft_dir),
            cfg["mine_start"],
            cfg["mine_tasks"],
            workers=procs,
            difficulty=difficulty,
            keep=cfg["mine_keep"],
        )
        if not mined["kept"]:
            raise SystemExit(
                f"the warm start matches the planner on all {cfg['mine_tasks']} mined train tasks: "
                f"nothing for GRPO to learn from; raise mine_tasks"
            )
        lap("mine")
    grpo_dir = out_dir / "grpo"
    used = (budget() - budget0) / 60
    # The second evaluation costs what the first did; `grpo_margin` minutes cover starting the ranks.
    grpo_minutes = max(
        1.0,
        min(
            cfg["grpo_share"] * minutes,
            minutes - used - stages["eval_sft"]["wall_s" if procs > 1 else "cpu_s"] / 60 - cfg["grpo_margin"],
        ),
    )
    argv = [
        "--model",
        str(sft_dir),
        "--cpu",
        "--steps",
        "100000",
        "--max-minutes",
        str(grpo_minutes),
        "--num-generations",
        str(cfg["num_generations"]),
        "--batch-size",
        str(cfg["batch_size"]),
        "--max-completion-length",
        str(cfg["max_completion_length"]),
        "--max-tool-calls",
        str(cfg["max_tool_calls"]),
        "--rows",
        str(cfg["rows"]),
        "--difficulty",
        difficulty,
        "--lr",
        str(cfg["grpo_lr"]),
        "--beta",
        str(cfg["beta"]),
        "--temperature",
        str(cfg["temperature"]),
        "--seed",
        str(seed),
        "--output-dir",
        str(grpo_dir),
    ]
    if mined:
        mined["replayed"] = replayed(mined, cfg["replay"])
        argv += [
            "--dataset",
            str(task_rows(sorted(mined["kept"] + mined["replayed"]), out_dir / "grpo_tasks.parquet", difficulty)),
        ]
    if cfg["grpo_save_steps"]:
        argv += ["--save-steps", str(cfg["grpo_save_steps"])]
    if procs == 1:
        trained = train_grpo.train(train_grpo.parser().parse_args(argv), clock=time.process_time)
    else:
        trained = {"log_history": data_parallel_grpo(argv, procs)}
    lap("grpo")
    # The Trainer's own count (run.json): with num_iterations > 1 not every step logs a reward.
    steps = json.loads((grpo_dir / "run.json").read_text())["global_step"]
    kept, selection, kept_step = grpo_dir, None, None
    if cfg["grpo_save_steps"]:
        saved = grpo_checkpoints(grpo_dir, steps)
        selection = [
            {
                "step": step,
                "validation": evaluation(
                    path,
                    cfg["select_episodes"],
                    workers=procs,
                    start=cfg["select_start"],
                    split="train",
                    difficulty=difficulty,
                ),
            }
            for step, path in saved
        ]
        kept_step = pick_grpo_step(selection)
        kept = dict(saved)[kept_step]
        lap("select_grpo")
    after = evaluation(kept, n_eval, workers=procs, start=cfg["eval_start"], difficulty=difficulty)
    lap("eval_grpo")
    stages["total"] = {"wall_s": round(time.monotonic() - wall0, 1), "cpu_s": round(time.process_time() - cpu0, 1)}
    rewards = [h["reward"] for h in trained["log_history"] if "reward" in h]
    losses = warm["losses"]
    return {
        # The world and the brief these numbers hold for (the report names both).
        "benchmark_version": BENCHMARK_VERSION,
        "prompt_version": PROMPT_VERSION,
        "config": {
            "minutes": minutes,
            "budget": "CPU time, one core" if procs == 1 else f"wall time, {procs} cores",
            "seed": seed,
            "n_eval": n_eval,
            "split": SPLIT,
            "difficulty": difficulty,
            "settings": cfg,
            "vocab": len(tokenizer),
            "parameters": parameters(base),
            "warm_start_episodes": episodes,
            "grpo_minutes": round(grpo_minutes, 2),
        },
        "stages": stages,
        "sft": {
            "steps": warm["steps"],
            "loss_first": round(losses[0], 4),
            "loss_last": tail_loss(losses),
            "seed": warm["seed"],
        },
        **({"warm_starts": [warm_start_summary(w) for w in warms]} if len(warms) > 1 else {}),
        "grpo": {
            "steps": len(rewards),
            "rewards": rewards,
            **({"selection": selection, "kept_step": kept_step} if selection else {}),
            "global_step": steps,
            # steps whose group of rollouts all scored the same: zero advantage, nothing learned
            "zero_std_steps": sum(
                h.get("frac_reward_zero_std") == 1.0 for h in trained["log_history"] if "reward" in h
            ),
        },
        **(
            {
                "mining": {
                    **mined,
                    "kept": len(mined["kept"]),
                    "kept_tasks": mined["kept"],
                    "replayed": len(mined["replayed"]),
                    "replayed_tasks": mined["replayed"],
                }
            }
            if mined
            else {}
        ),
        "eval": {"warm start (SFT)": before, "SFT + GRPO": after},
        **verdict(before, after),
        "variants": [],
    }


def warm_stage(
    out_dir: Path, cfg: dict, seed: int, minutes: float, difficulty: str = DIFFICULTY, lap=lambda name: None
) -> tuple[Path, int, list[dict], dict]:
    """The experiment's first stages (`run`'s, and `research.lm_warm`'s alone): build the untrained model,
    collect the warm-start conversations, train `sft_seeds` warm starts side by side for `sft_share` of
    `minutes`, and keep the best on the train-split validation tasks. Returns (base folder, conversations
    collected, every warm start, the kept one); `lap(stage)` times each stage for `run`."""
    procs = int(cfg["processes"])
    seeds = [seed + k for k in range(int(cfg["sft_seeds"]))]
    if not 1 <= len(seeds) <= procs:
        raise SystemExit(f"sft_seeds={cfg['sft_seeds']}: expected 1..processes ({procs}), one warm start per process")
    base = build_base(out_dir / "base", cfg, seed)
    lap("build")
    conversations = warm_conversations(
        cfg["warm_policy"], cfg["warm_episodes"], seed, cfg["recovery"], difficulty, cfg["recovery_calls"]
    )
    lap("collect")
    jobs = [(s, out_dir, cfg, conversations, cfg["sft_share"] * minutes, procs > 1) for s in seeds]
    if len(jobs) == 1:
        warms = [warm_one(jobs[0])]
    else:
        import multiprocessing as mp

        with one_thread_children(), mp.get_context("spawn").Pool(len(jobs)) as pool:
            warms = pool.map(warm_one, jobs)
    lap("sft")
    if len(warms) > 1:
        for w in warms:
            w["validation"] = evaluation(
                w["dir"],
                cfg["select_episodes"],
                workers=procs,
                start=cfg["select_start"],
                split="train",
                difficulty=difficulty,
            )
        lap("select")
    return base, len(conversations), warms, pick_warm_start(warms)


def build_base(out: Path, cfg: dict, seed: int) -> Path:
    """The untrained model of these settings (initialised from `seed`) and its tokenizer, saved at `out`."""
    from training.tiny_model import build_model, build_tokenizer, save

    tokenizer = build_tokenizer(cfg["vocab_size"])
    shape = dict(
        hidden=cfg["hidden"], layers=cfg["layers"], seed=seed, qk_gain=cfg["qk_gain"], copy_head=cfg["copy_head"]
    )
    if not cfg["pointer"]:
        return save(out, tokenizer, build_model(tokenizer, **shape))
    base = save(out, tokenizer, copy_model.build_pointer_model(tokenizer, read_span=cfg["read_span"], **shape))
    if cfg["coverage_results"]:
        copy_model.count_results(base)
    return base


def warm_one(job: tuple) -> dict:
    """One warm start: (seed, out_dir, settings, conversations, minutes, wall) -> its folder, steps and
    losses. A model initialised from `seed`, trained on the conversations in a `seed` order for `minutes`
    of this process's CPU time (`wall`: of wall time, as when several run side by side)."""
    from transformers import AutoTokenizer

    from training.sft_warmup import warm_start
    from training.tiny_model import id_token_ids

    copy_model.register()
    seed, out_dir, cfg, conversations, minutes, wall = job
    single = int(cfg["sft_seeds"]) == 1
    base = Path(out_dir) / "base" if single else build_base(Path(out_dir) / f"base_seed{seed}", cfg, seed)
    out = Path(out_dir) / ("sft" if single else f"sft_seed{seed}")
    copy_tokens = id_token_ids(AutoTokenizer.from_pretrained(base)) if cfg["copy_loss"] else None
    warm = warm_start(
        base,
        out,
        conversations=conversations,
        epochs=100,
        lr=cfg["sft_lr"],
        seed=seed,
        max_minutes=minutes,
        clock=time.monotonic if wall else time.process_time,
        copy_tokens=copy_tokens,
    )
    return {"seed": seed, "dir": str(out), "steps": warm["steps"], "losses": warm["losses"]}


def pick_warm_start(warms: list[dict]) -> dict:
    """The warm start with the best mean validation return (the lower seed on a tie); the only one if alone."""
    if len(warms) == 1:
        return warms[0]
    return max(warms, key=lambda w: (w["validation"]["mean_return"]["mean"], -w["seed"]))


def grpo_checkpoints(grpo_dir: Path, steps: int) -> list[tuple[int, Path]]:
    """(step, folder) of every model this GRPO run saved, in step order: each `checkpoint-<step>/` up to `steps`
    and the final model (`grpo_dir` itself, after `steps` steps; a checkpoint of that same step is the same
    model, listed once). Checkpoints past `steps` are an earlier, longer run's, left in the folder: not listed."""
    saved = {}
    for p in Path(grpo_dir).glob("checkpoint-*"):
        step = p.name.removeprefix("checkpoint-")
        if p.is_dir() and step.isdigit() and int(step) <= steps:
            saved[int(step)] = p
    saved.setdefault(steps, Path(grpo_dir))
    return sorted(saved.items())


def pick_grpo_step(selection: list[dict]) -> int:
    """The GRPO step whose model has the best mean validation return (the earliest on a tie)."""
    return max(selection, key=lambda s: (s["validation"]["mean_return"]["mean"], -s["step"]))["step"]


def warm_start_summary(warm: dict) -> dict:
    """What the results keep of one warm start: its seed, steps, final loss and (when chosen among several)
    its validation summary."""
    row = {"seed": warm["seed"], "steps": warm["steps"], "loss_last": tail_loss(warm["losses"])}
    return row | ({"validation": warm["validation"]} if "validation" in warm else {})


def tail_loss(losses: list[float]) -> float:
    """A warm start's final loss: the mean over its last 50 steps (one step's loss is noisy)."""
    return round(sum(losses[-50:]) / len(losses[-50:]), 4)


def data_parallel_grpo(argv: list[str], processes: int) -> list[dict]:
    """`training.train_grpo` under `torchrun` on `processes` CPU ranks (gloo), one torch thread each;
    returns the log history the main rank wrote. Each rank plays its own prompt group every step and
    the gradients are averaged, so a step costs about what a one-process step does."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={processes}",
        "-m",
        "research.pointer_grpo",
        *argv,
    ]
    subprocess.run(cmd, check=True, env=env)  # from this cwd, as `python -m training...` was started
    return json.loads((Path(argv[argv.index("--output-dir") + 1]) / "log_history.json").read_text())


def verdict(before: dict, after: dict) -> dict:
    gain = after["mean_return"]["ci95"][0] > before["mean_return"]["ci95"][1]
    collapse = after["calls_per_episode"]["mean"] < 0.5 * before["calls_per_episode"]["mean"]
    return {
        "grpo_beats_warm_start": gain,
        "calls_collapse": collapse,
        "targets": {
            "sft_valid_calls_90": valid_calls_90(before),
            "sft_finished_50": before["finished"]["rate"] >= 0.5,
            "grpo_gain": gain and not collapse,
        },
    }


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """--preset and --set, shared by this experiment and its warm-start stage alone (`research.lm_warm`)."""
    parser.add_argument("--preset", choices=list(PRESETS), default="defaults", help="a named, complete set of settings")
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a setting of the preset ({', '.join(SETTINGS)}); values are JSON",
    )


def parsed_settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """The preset's settings with each --set applied; a bad key or rule is a parser error before any training."""
    settings = dict(PRESETS[args.preset])
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in SETTINGS or not value:
            parser.error(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(SETTINGS)}")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:  # a bare word: mine_keep=unfinished
            settings[key] = value
    if settings["mine_keep"] not in MINE_KEEP:  # before minutes of warm start, not at the mining
        parser.error(f"--set mine_keep={settings['mine_keep']!r}: expected one of {', '.join(MINE_KEEP)}")
    return settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--minutes",
        type=float,
        default=60.0,
        help="budget for the whole run: CPU minutes on one core with processes=1 (a SIGSTOP pause does not spend it), "
        "wall minutes with more (the published preset: 2)",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/lm"), help="checkpoints go here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--difficulty",
        choices=DIFFICULTIES,
        default=DIFFICULTY,
        help="the level every stage plays (warm start, GRPO, evaluation)",
    )
    parser.add_argument("-n", "--n-eval", type=int, default=100, help="held-out episodes per evaluation")
    parser.add_argument("--results", type=Path, default=RESULTS)
    add_settings_arguments(parser)
    parser.add_argument("--variant", default=None, help="name this run in the variants table")
    args = parser.parse_args(argv)
    settings = parsed_settings(parser, args)
    results = run(args.minutes, args.out, args.seed, args.n_eval, settings, args.difficulty)
    results["command"] = "python -m research.lm_learnability " + " ".join(sys.argv[1:] if argv is None else argv)
    # Earlier runs' rows are kept: the table lists every variant tried, this run's rows last.
    previous = json.loads(args.results.read_text()).get("variants", []) if args.results.exists() else []
    name = args.variant or f"run {len(previous) // 2 + 1}"
    changed = {k: v for k, v in settings.items() if PRESETS[args.preset][k] != v}
    note = ", ".join([f"preset {args.preset}"] + [f"{k}={v}" for k, v in changed.items()])
    steps = f"{results['sft']['steps']} SFT steps"
    results["variants"] = previous + [
        variant_row(
            f"{name} warm start", note, results["eval"]["warm start (SFT)"], f"{args.n_eval} episodes, {steps}"
        ),
        variant_row(
            f"{name} + GRPO",
            note,
            results["eval"]["SFT + GRPO"],
            f"{args.n_eval} episodes, "
            + (
                f"step {results['grpo']['kept_step']} of {results['grpo']['global_step']} GRPO steps, "
                "kept on validation"
                if "kept_step" in results["grpo"]
                else f"{results['grpo']['steps']} GRPO steps"
            ),
        ),
    ]
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=1))
    print(markdown(results))


if __name__ == "__main__":
    main()
