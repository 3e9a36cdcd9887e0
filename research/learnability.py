"""Learnability: one command trains, evaluates and writes the report.
Over 400 lines: the one command that trains, evaluates and renders the learnability report.

    python -m research.learnability                       # trains both (about 60 minutes on 2 cores)
    python -m research.learnability --structured-checkpoint runs/structured.pt \\
        --lm-results research/results/lm_learnability.json           # re-render from runs already made
    python -m research.learnability --minutes 0.3 --warm-episodes 30 --validation-episodes 20 \
        --lm-minutes 0 -n 10 --calibration <an n=10 calibration> ...   # the whole path at smoke scale
    python -m research.learnability --rerender --replay planner -n 2000 \\
        --lm-results research/results/lm_learnability.json   # after a change to the planner: play it again
    python -m research.learnability --reader-ablation --structured-checkpoint runs/structured.pt -n 1000
                                    # the same weights on the unseen family with each reader

1. The structured policy (`research/structured_policy.py`, train split only):
   trained here with the published recipe (`structured_policy.PRESETS`), or an earlier checkpoint read with
   `--structured-checkpoint` (its `.json` summary has the learning curve, its
   `.warm.pt` the cloned start). It plays the first `n` tasks of every
   evaluation slice, medium and hard, beside the rule and the reference
   planner (played here on the same tasks) and the exploit suite (read from
   research/results/calibration.json, `python -m research.calibrate`, the same tasks).
2. The language model (`research/lm_learnability.py`): run in a second process
   while the structured policy trains (each takes one core), or read from
   `--lm-results`.

Writes docs/learnability.md, research/results/learnability.json, docs/learnability_*.png
(the learning curves and the design's four bars: rule, trained, planner) and
the behaviour examples (Seed A, Seed B before and after training, and the first
task per slice where the trained policy and the rule end differently). This
module measures; `research/learnability_report.py` renders the text.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from releaseops_arena.policies import POLICIES, play  # noqa: E402
from releaseops_arena.policies.trained import READERS  # noqa: E402
from releaseops_arena.splits import EVALUATION_SPLITS, task_scenario  # noqa: E402
from training.evaluate import add_rule_win, evaluate  # noqa: E402

from .evidence_ablation import ablation_row, evidence_ablation  # noqa: E402
from .learnability_report import BARS_SLICES, COMPARED, ablation_lines, above, report, value  # noqa: E402
from .make_demo import build as build_demo  # noqa: E402
from .plot_metrics import plot  # noqa: E402

SLICES = [(split, d) for d in ("medium", "hard") for split in EVALUATION_SPLITS]
# Every policy that tries to win without supervising (calibration.json names them so).
EXPLOITS = (
    "blind_bayes",
    "blind",
    "blind_probe",
    "cue_only",
    "fixed_order",
    "naive",
    "always_hold",
    "always_approve",
    "inspect_everything",
    "block_everything",
    "random",
)
# The structured policy's training when this command trains it: the published recipe
# (structured_policy.PRESETS), scaled down only by a smoke run.
TRAIN_COMMAND = (
    "python -m research.structured_policy --preset published --minutes {minutes} --warm-episodes {warm_episodes} "
    "--validation-episodes {validation_episodes} --out {out}"
)
PARTING = "first task where trained and rule end differently"
# Reference policies `--rerender --replay` may play again (the structured policies are trained, not replayed).
REPLAYABLE = ("planner", "evidence_first", "rule")


def slice_checks(results: dict, references: dict) -> dict:
    """Per compared metric: above the rule, the exploits not beaten, the share of the rule-planner gap closed."""
    trained, rule, planner = results["trained"], results["rule"], results["planner"]
    out = {}
    for key in COMPARED:
        gap = value(planner["metrics"][key]) - value(rule["metrics"][key])
        closed = (value(trained["metrics"][key]) - value(rule["metrics"][key])) / gap if gap > 0 else None
        out[key] = {
            "above_rule": above(trained, rule, key),
            "exploits_not_beaten": [e for e in EXPLOITS if e in references and not above(trained, references[e], key)],
            "best_exploit": max(references, key=lambda e: value(references[e]["metrics"][key]), default=None),
            "gap_closed": None if closed is None else round(closed, 3),
        }
    return out


# The cue-blind policies: none reads a claim, a voice, a confidence, a hint, a record or an answer.
CUE_BLIND = ("fixed_order", "blind_bayes")


def attention_shares(results: dict, calibrated: dict) -> dict:
    """The share of the attention gap, (policy - best cue-blind) / (attention_oracle - best cue-blind) in
    safe ship, that the trained policy and the planner recover; the best cue-blind policy of the slice
    (CUE_BLIND, from the calibration of the same tasks) and the oracle are named with it."""
    safe = {
        k: v["metrics"]["safe_ship"]["rate"] for k, v in calibrated.items() if k in (*CUE_BLIND, "attention_oracle")
    }
    blind = max((k for k in CUE_BLIND if k in safe), key=safe.get, default=None)
    if blind is None or "attention_oracle" not in safe or safe["attention_oracle"] <= safe[blind]:
        return {}
    gap = safe["attention_oracle"] - safe[blind]
    share = {
        k: round((results[k]["metrics"]["safe_ship"]["rate"] - safe[blind]) / gap, 3) for k in ("trained", "planner")
    }
    return {"attention_share": share["trained"], "planner_attention_share": share["planner"], "best_cue_blind": blind}


def evaluate_slices(checkpoint: Path, n: int, workers: int, calibration: dict) -> dict:
    """{slice: {label: result}}: rule, planner, warm start, trained and evidence_first played here; exploits
    from calibration."""
    from .structured_policy import register

    register()
    out = {}
    for split, difficulty in SLICES:
        name = f"{split}/{difficulty}"
        rule = evaluate("rule", split, n, difficulty, workers=workers, progress=False)
        add_rule_win(rule, rule)
        results = {"rule": rule}
        kept_clone = json.loads(checkpoint.with_suffix(".json").read_text()).get("best_step") == 0
        for label, policy in (
            ("planner", "planner"),
            ("trained", f"structured:{checkpoint}"),
            ("warm start", f"structured:{checkpoint.with_suffix('.warm.pt')}"),
            ("evidence_first", "evidence_first"),
        ):
            if label == "warm start" and kept_clone:  # no update beat the clone: the same weights, not replayed
                results[label] = {**results["trained"]}
            else:
                results[label] = evaluate(policy, split, n, difficulty, workers=workers, baseline=rule, progress=False)
            results[label]["policy"] = label
        out[name] = {"results": results, **checked(results, calibration["slices"][name])}
    return out


def checked(results: dict, calibrated: dict) -> dict:
    """The exploit suite's results on the slice (from the calibration of the same tasks) and the checks
    against them; `--rerender` recomputes both from the calibration as it is then."""
    references = {e: {**calibrated[e], "policy": e} for e in EXPLOITS if e in calibrated}
    checks = slice_checks(results, references)
    checks.update(attention_shares(results, calibrated))
    return {"exploits": references, "checks": checks}


def replay(structured: dict, policies: list[str], workers: int, docs: Path) -> None:
    """Play reference `policies` again on every slice's tasks and in the evidence ablation, in place of their
    results in `structured` (after a change to a reference policy; the trained policy's results stay as
    measured). The rule is played again as their paired baseline, and must end every task as it did: that
    proves the same tasks."""
    n = structured["n"]
    for name, part in structured["slices"].items():
        split, difficulty = name.split("/")
        results = part["results"]
        rule = evaluate("rule", split, n, difficulty, workers=workers, progress=False)
        add_rule_win(rule, rule)
        if rule["metrics"] != results["rule"]["metrics"]:
            raise SystemExit(f"{name}: the rule no longer plays as measured; replay everything (drop --rerender)")
        for label in policies:
            if label == "rule":
                continue
            results[label] = evaluate(label, split, n, difficulty, workers=workers, baseline=rule, progress=False)
            results[label]["policy"] = label
            results[label].pop("episodes", None)
    ablation = structured.get("evidence_ablation")
    for name, rows in (ablation or {}).get("slices", {}).items():  # the evidence reader's worth, per policy
        for label in policies:
            if label != "rule" and label in rows:
                rows[label] = ablation_row(label, name.split("/")[1], ablation["n"])
    for name in BARS_SLICES:
        r = structured["slices"][name]["results"]
        bars = [{**r["rule"], "policy": "rule"}, {**r["trained"], "policy": "trained"}]
        plot(
            [*bars, {**r["planner"], "policy": "reference planner"}],
            docs / f"learnability_bars_{name.split('/')[0]}.png",
            f"{name}, {n} tasks each",
        )


def checkpoint_reader(checkpoint: Path) -> str:
    """The reader a checkpoint was trained with ("all" for one that predates the choice)."""
    import torch

    return torch.load(checkpoint, map_location="cpu", weights_only=True).get("reader", "all")


def reader_ablation(checkpoint: Path, n: int, workers: int) -> dict:
    """The checkpoint on the unseen-family slices played with every reader (trained_policy.READERS),
    beside the rule: what the reading's knowledge of the held-out families is worth to the same weights."""
    from .structured_policy import register

    register()
    out = {}
    for difficulty in ("medium", "hard"):
        row = {"rule": evaluate("rule", "unseen_family", n, difficulty, workers=workers, progress=False)["metrics"]}
        for reader in READERS:
            row[reader] = evaluate(
                f"structured:{checkpoint}?reader={reader}",
                "unseen_family",
                n,
                difficulty,
                workers=workers,
                progress=False,
            )["metrics"]
        out[f"unseen_family/{difficulty}"] = {k: {m: v[m] for m in COMPARED} for k, v in row.items()}
    return out


def transcript(policy, scenario: dict) -> dict:
    run = play(policy, scenario)
    return {
        "outcome": run["metrics"]["outcome"],
        "return": round(run["return"], 3),
        "budget_used": run["metrics"]["budget_used"],
        "calls": [f"{s['tool']}({', '.join(map(str, s['arguments'].values()))})" for s in run["steps"]],
    }


def behaviour(make_trained, make_before, search: int) -> dict:
    """Seed A and Seed B (rule, before training, after), then per slice the first of `search`
    evaluation tasks where the trained policy and the rule end differently (the first found, not the best)."""
    out = {}
    for content in build_demo().values():
        s = content["scenario"]
        out[content["title"]] = {
            "scenario": s,
            "rule": transcript(POLICIES["rule"](), s),
            "before training": transcript(make_before(), s),
            "after training": transcript(make_trained(), s),
        }
    for split, difficulty in SLICES:
        for i in range(search):
            s = task_scenario(split, i, difficulty)
            rule, trained = transcript(POLICIES["rule"](), s), transcript(make_trained(), s)
            if rule["outcome"] != trained["outcome"]:
                out[f"{split}/{difficulty}: {PARTING} (task {i})"] = {
                    "scenario": s,
                    "rule": rule,
                    "after training": trained,
                }
                break
    return out


def curve_png(
    points: list[tuple[float, float]],
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    validation: list[tuple[float, float]] | None = None,
    kept: float | None = None,
) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    xs, ys = zip(*points) if points else ([], [])
    ax.plot(xs, ys, label="sampled batch", alpha=0.6)
    if len(ys) >= 10:  # a moving average over the noisy batches
        k = max(5, len(ys) // 20)
        smooth = [sum(ys[max(0, i - k) : i + 1]) / len(ys[max(0, i - k) : i + 1]) for i in range(len(ys))]
        ax.plot(xs, smooth, linewidth=2, label="moving average")
    if validation:
        ax.plot(*zip(*validation), marker=".", linewidth=1.5, label="greedy, validation seeds")
    if kept is not None:
        ax.axvline(kept, color="black", linestyle=":", linewidth=1, label=f"kept checkpoint (update {kept})")
    ax.legend(fontsize=7)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def train_structured(checkpoint: Path, minutes: float | None, seed: int, **scale) -> dict:
    """`scale` (warm_episodes, validation_episodes) shrinks a smoke run; the report's run uses the defaults."""
    from .structured_policy import recipe as published
    from .structured_policy import train

    recipe = {**published("published"), **({"minutes": minutes} if minutes is not None else {}), **scale, "seed": seed}
    summary = train(
        **recipe, out=checkpoint, command=TRAIN_COMMAND.format(**recipe, out=checkpoint) + f" --seed {seed}"
    )
    summary.pop("model")
    return summary


def structured_part(checkpoint: Path, n: int, search: int, workers: int, docs: Path, calibration: dict) -> dict:
    from .structured_policy import StructuredPolicy

    summary = json.loads(checkpoint.with_suffix(".json").read_text())
    curve_png(
        [(c["step"], c["mean_return"]) for c in summary["curve"]],
        docs / "learnability_structured_curve.png",
        "Structured policy: GRPO on the train split",
        "update step",
        "mean episode return",
        [(v["step"], v["mean_return"]) for v in summary.get("validation", [])],
        summary.get("best_step"),
    )
    slices = evaluate_slices(checkpoint, n, workers, calibration)
    ablation = reader_ablation(checkpoint, n, workers)
    evidence = {"n": n, "checkpoint": str(checkpoint), "slices": evidence_ablation(checkpoint, n, workers)}
    for name in BARS_SLICES:
        r = slices[name]["results"]
        bars = [
            {**r["rule"], "policy": "rule"},
            {**r["trained"], "policy": "trained"},
            {**r["planner"], "policy": "reference planner"},
        ]
        plot(bars, docs / f"learnability_bars_{name.split('/')[0]}.png", f"{name}, {n} tasks each")
    before, after = str(checkpoint.with_suffix(".warm.pt")), str(checkpoint)
    examples = behaviour(lambda: StructuredPolicy(after), lambda: StructuredPolicy(before), search)
    for part in slices.values():
        for r in part["results"].values():
            r.pop("episodes", None)
    return {
        "checkpoint": str(checkpoint),
        "reader": checkpoint_reader(checkpoint),
        "training": summary,
        "n": n,
        "slices": slices,
        "reader_ablation": ablation,
        "evidence_ablation": evidence,
        "behaviour": examples,
    }


def start_lm(minutes: float, out_dir: Path, seed: int, n_eval: int, results: Path) -> subprocess.Popen:
    """The LM experiment in its own process (it writes `results`); its log goes beside its checkpoints."""
    out_dir.mkdir(parents=True, exist_ok=True)
    log = open(out_dir / "lm_learnability.log", "w")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "research.lm_learnability",
            "--minutes",
            str(minutes),
            "--out",
            str(out_dir),
            "--seed",
            str(seed),
            "-n",
            str(n_eval),
            "--results",
            str(results),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def lm_curve(lm: dict, docs: Path) -> bool:
    """The GRPO reward curve (lm_learnability records the mean reward of every step), if the run got that far."""
    points = list(enumerate((lm.get("grpo") or {}).get("rewards") or [], start=1))
    if points:
        curve_png(
            points,
            docs / "learnability_lm_curve.png",
            "Language model: GRPO reward on the train split (easy)",
            "GRPO step",
            "mean reward",
        )
    return bool(points)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--minutes", type=float, default=None, help="structured policy training time (default: the published recipe's)"
    )
    parser.add_argument(
        "--structured-checkpoint",
        type=Path,
        default=None,
        help="evaluate this earlier checkpoint instead of training (needs its .json and .warm.pt)",
    )
    parser.add_argument(
        "--warm-episodes",
        type=int,
        default=None,
        help="planner episodes the structured policy clones (default 12,000; fewer for a smoke run)",
    )
    parser.add_argument(
        "--validation-episodes",
        type=int,
        default=None,
        help="train-split validation seeds per checkpoint (default 2,000; fewer for a smoke run)",
    )
    parser.add_argument("--lm-minutes", type=float, default=60.0, help="LM experiment time (0: no LM section)")
    parser.add_argument("--lm-results", type=Path, default=None, help="render these LM results instead of running it")
    parser.add_argument(
        "--lm-more-results",
        type=Path,
        nargs="*",
        default=[],
        help="further LM results (another difficulty, say), each rendered as its own subsection",
    )
    parser.add_argument("--lm-n", type=int, default=120, help="held-out easy episodes per LM evaluation")
    parser.add_argument("-n", type=int, default=500, help="tasks per slice (structured); must match calibration.json")
    parser.add_argument("--search", type=int, default=100, help="tasks searched per slice for a parting example")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="the language model's seed")
    parser.add_argument(
        "--structured-seed",
        type=int,
        default=1,
        help="the structured policy's training seed (the published recipe's: 1)",
    )
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--docs", type=Path, default=Path("docs"))
    parser.add_argument("--calibration", type=Path, default=Path("research/results/calibration.json"))
    parser.add_argument("--out", type=Path, default=Path("research/results/learnability.json"))
    parser.add_argument(
        "--partial-calibration",
        action="store_true",
        help="play even though --calibration lacks some exploits; a later --rerender against the complete "
        "calibration checks the trained policy against all of them",
    )
    parser.add_argument(
        "--rerender",
        action="store_true",
        help="keep the structured policies' results in --out as measured; read the LM results and the "
        "calibration's exploit suite again",
    )
    parser.add_argument(
        "--replay",
        nargs="+",
        choices=REPLAYABLE,
        default=[],
        metavar="POLICY",
        help="with --rerender: play these reference policies again on the same tasks, after a change to them "
        f"(any of {', '.join(REPLAYABLE)}); the structured policies' results stay as measured",
    )
    parser.add_argument(
        "--reader-ablation",
        action="store_true",
        help="only play --structured-checkpoint on the unseen-family slices with every reader "
        "(and the rule), print the table and exit",
    )
    args = parser.parse_args(argv)
    if args.reader_ablation:
        if args.structured_checkpoint is None or not args.structured_checkpoint.exists():
            parser.error("--reader-ablation plays a checkpoint: name an existing one with --structured-checkpoint")
        ablation = reader_ablation(args.structured_checkpoint, args.n, args.workers)
        print(json.dumps(ablation, indent=1))
        print("\n".join(ablation_lines(ablation, checkpoint_reader(args.structured_checkpoint))))
        return
    if not args.calibration.exists():
        parser.error(
            f"{args.calibration} does not exist: the exploit suite's intervals come from it; "
            f"write it with `python -m research.calibrate -n {args.n}`"
        )
    calibration = json.loads(args.calibration.read_text())
    if calibration["n"] != args.n:
        parser.error(
            f"-n {args.n} differs from {args.calibration}'s n={calibration['n']}: the exploit intervals "
            f"must come from the same tasks (rerun `python -m research.calibrate -n {args.n}`)"
        )
    missing = [
        f"{s}/{d}: {e}" for s, d in SLICES for e in EXPLOITS if e not in calibration["slices"].get(f"{s}/{d}", {})
    ]
    if missing and not args.partial_calibration:
        parser.error(f"{args.calibration} lacks {', '.join(missing)}; rerun `python -m research.calibrate`")
    # An earlier checkpoint is read with its summary and its cloned start: all three, checked before minutes of play.
    ckpt = args.structured_checkpoint
    beside = [ckpt.with_suffix(".json"), ckpt.with_suffix(".warm.pt")] if ckpt and not args.rerender else []
    for path in filter(None, (ckpt, *beside, args.lm_results)):
        if not path.exists():
            parser.error(
                f"{path} does not exist"
                + (" (research.structured_policy writes it beside the checkpoint)" if path in beside else "")
            )
    data = {
        "command": "python -m research.learnability " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": f"{platform.machine()}, {mp.cpu_count()} cores, Python {platform.python_version()}",
    }
    if args.replay and not args.rerender:
        parser.error("--replay plays reference policies again into an earlier run's results: add --rerender")
    if args.rerender:
        if args.lm_results is None:
            parser.error("--rerender reads the LM results again: name them with --lm-results")
        if not args.out.exists() or "slices" not in json.loads(args.out.read_text()).get("structured", {}):
            parser.error(f"--rerender needs a complete {args.out}; run without it first")
        old = json.loads(args.out.read_text())
        data = {**data, "command": old["command"], "structured": old["structured"], "rerendered": data["command"]}
        if args.replay:
            replay(data["structured"], args.replay, args.workers, args.docs)
            data["replayed"], data["replayed_by"] = args.replay, data["rerendered"]
        elif old.get("replayed"):  # the reference policies played again since the run, and the command that did
            data["replayed"], data["replayed_by"] = old["replayed"], old["replayed_by"]
        # The exploit suite and the checks are read again from the calibration (the same tasks, same n).
        for name, part in data["structured"]["slices"].items():
            part.update(checked(part["results"], calibration["slices"][name]))
    lm_results, lm_process = args.lm_results, None
    if lm_results is None and args.lm_minutes > 0:
        lm_results = Path("research/results/lm_learnability.json")
        lm_process = start_lm(args.lm_minutes, args.runs / "lm", args.seed, args.lm_n, lm_results)
    checkpoint = args.structured_checkpoint
    if checkpoint is None and not args.rerender:
        import torch

        torch.set_num_threads(1)  # the other core is the LM's
        checkpoint = args.runs / "structured.pt"
        t0 = time.monotonic()
        scale = {
            k: v
            for k, v in (("warm_episodes", args.warm_episodes), ("validation_episodes", args.validation_episodes))
            if v is not None
        }
        train_structured(checkpoint, args.minutes, args.structured_seed, **scale)
        provenance = f"Trained by this command ({round(time.monotonic() - t0)} s wall, warm start included)."
    elif not args.rerender:
        summary = json.loads(checkpoint.with_suffix(".json").read_text())
        provenance = (
            "Trained earlier by `"
            + (summary.get("command") or "python -m research.structured_policy")
            + "`; evaluated by this command."
        )
    if not args.rerender:
        data["structured"] = {
            **structured_part(checkpoint, args.n, args.search, args.workers, args.docs, calibration),
            "provenance": provenance,
            "calibration": str(args.calibration),
        }
    if lm_process is not None and lm_process.wait() != 0:
        raise SystemExit(
            f"the LM experiment failed (exit {lm_process.returncode}); see {args.runs / 'lm'}/lm_learnability.log"
        )
    if lm_results is not None:
        data["lm"] = json.loads(lm_results.read_text())
        data["lm_provenance"] = (
            "Run by this command (`python -m research.lm_learnability`, in parallel)."
            if lm_process
            else f"Read from `{lm_results}`, written earlier by "
            f"`{data['lm'].get('command', 'python -m research.lm_learnability')}`"
            + (
                f" ({data['lm']['config']['minutes']} minutes budget, seed {data['lm']['config']['seed']})."
                if "config" in data["lm"]
                else "."
            )
        )
        data["lm_curve"] = lm_curve(data["lm"], args.docs)
        data["lm_more"] = [
            {
                "path": str(path),
                "command": (r := json.loads(path.read_text())).get("command", "python -m research.lm_learnability"),
                "results": r,
            }
            for path in args.lm_more_results
        ]
    if args.out.exists() and not args.rerender:  # the variants table is curated by hand between runs, as the LM's is
        data["structured"]["variants"] = json.loads(args.out.read_text()).get("structured", {}).get("variants", [])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(report(data, args.docs))


if __name__ == "__main__":
    main()
