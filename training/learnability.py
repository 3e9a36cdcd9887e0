"""Learnability evidence: train on `train`, evaluate on held-out seeds and the unseen family.

    python -m training.learnability --minutes 15 --lm-minutes 10 -n 500 --lm-n 60

1. A structured policy (training/structured_policy.py): behaviour-cloned from
   the rule baseline, then trained with group-relative policy gradients.
2. A tiny language model (training/tiny_model.py) with TRL: supervised warm
   start on rule episodes, then GRPO with `environment_factory`.
Writes results/learnability.json, docs/learnability.md and charts under docs/.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from releaseops_arena.baselines import POLICIES, play  # noqa: E402
from releaseops_arena.splits import scenarios  # noqa: E402

from .evaluate import add_rule_win, evaluate, markdown  # noqa: E402
from .make_demo import build as build_demo  # noqa: E402
from .plot_metrics import plot  # noqa: E402

SLICES = [("heldout_seeds", "medium"), ("unseen_family", "medium")]
PARTING = "the first scenario where the outcomes differ"  # heading of a behaviour example, after the slice


def evaluate_slices(policies: dict[str, str], n: int, workers: int) -> dict:
    """{slice: {label: result}} with the paired rule win rate."""
    out = {}
    for split, difficulty in SLICES:
        rule = evaluate("rule", split, n, difficulty, workers=workers, progress=False)
        add_rule_win(rule, rule)
        results = {"rule": rule}
        for label, name in policies.items():
            res = evaluate(name, split, n, difficulty, workers=workers, baseline=rule, progress=False)
            res["policy"] = label
            results[label] = res
        out[f"{split}/{difficulty}"] = results
    return out


def separated(a: dict, b: dict, key: str) -> bool:
    """True when a's 95% interval lies wholly above b's."""
    ci = "ci95"
    return a["metrics"][key][ci][0] > b["metrics"][key][ci][1]


def behaviour(policy_name: str, make_policy, search: int = 50) -> dict:
    """Transcripts (calls only) of the rule and the trained policy on Seed A, Seed B and,
    per evaluation slice, the first of `search` scenarios where their outcomes differ
    (in either direction: the first found, not the best)."""
    def transcripts(scenario: dict) -> dict:
        calls = {}
        for label, policy in (("rule", POLICIES["rule"]()), (policy_name, make_policy())):
            run = play(policy, scenario)
            calls[label] = {"outcome": run["metrics"]["outcome"], "return": run["return"],
                            "calls": [f"{s['tool']}({', '.join(map(str, s['arguments'].values()))})"
                                      for s in run["steps"]]}
        return {"scenario": scenario, **calls}

    out = {content["title"]: transcripts(content["scenario"]) for content in build_demo().values()}
    for split, difficulty in SLICES:
        for scenario in scenarios(split, search, difficulty):
            t = transcripts(scenario)
            if t["rule"]["outcome"] != t[policy_name]["outcome"]:
                out[f"{split}: {PARTING}"] = t
                break
    return out


def curve_png(points: list[tuple[float, float]], path: Path, title: str, xlabel: str,
              validation: list[tuple[float, float]] | None = None, kept: float | None = None) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    xs, ys = zip(*points) if points else ([], [])
    ax.plot(xs, ys, label="sampled batch", alpha=0.6)
    if len(ys) >= 10:  # a moving average over the noisy batches
        k = max(5, len(ys) // 20)
        smooth = [sum(ys[max(0, i - k):i + 1]) / len(ys[max(0, i - k):i + 1]) for i in range(len(ys))]
        ax.plot(xs, smooth, linewidth=2, label="moving average")
    if validation:
        ax.plot(*zip(*validation), marker=".", linewidth=1.5, label="greedy, validation seeds")
    if kept is not None:
        ax.axvline(kept, color="black", linestyle=":", linewidth=1, label=f"kept checkpoint (update {kept})")
    if validation or kept is not None:
        ax.legend(fontsize=7)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("mean episode return")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def structured_part(minutes: float, n: int, workers: int, runs: Path, docs: Path, reuse: bool = False) -> dict:
    from .structured_policy import StructuredPolicy, train

    weights = runs / "structured.pt"
    if reuse and weights.with_suffix(".json").exists():  # evaluate an earlier run again
        result = json.loads(weights.with_suffix(".json").read_text())
    else:
        result = train(minutes=minutes, out=weights)
    seconds = round(result["seconds"] + result.get("warm_start_seconds", 0.0), 1)
    curve_png([(c["step"], c["mean_return"]) for c in result["curve"]], docs / "learnability_structured_curve.png",
              "Structured policy: GRPO on the train split", "update step",
              [(v["step"], v["mean_return"]) for v in result.get("validation", [])], result.get("best_step"))
    policies = {"warm start (cloned rule)": f"structured:{weights.with_suffix('.warm.pt')}"}
    if weights.with_suffix(".last.pt").exists():  # runs from before checkpoint selection have no separate last
        policies["last update"] = f"structured:{weights.with_suffix('.last.pt')}"
    policies["trained"] = f"structured:{weights}"
    slices = evaluate_slices(policies, n, workers)
    main = slices["heldout_seeds/medium"]
    plot([main["rule"], main["trained"]], docs / "learnability_rule_vs_trained.png",
         f"Rule baseline vs trained structured policy (held-out seeds, medium, {n} each)")
    checks = {name: {key: separated(res["trained"], res["rule"], key) for key in ("mean_return", "safe_ship")}
              for name, res in slices.items()}
    recipe = {k: result.get(k) for k in ("group", "scenarios_per_step", "lr", "validate_every", "validation_episodes")}
    return {"train_seconds": seconds, "update_steps": result["steps"], "kl_coef": result["kl_coef"], **recipe,
            "best_step": result.get("best_step", result["steps"]), "curve": result["curve"],
            "validation": result.get("validation", []),
            "slices": slices, "beats_rule_with_separated_ci": checks,
            "behaviour": behaviour("trained", lambda: StructuredPolicy(str(weights)))}


def lm_part(minutes: float, n: int, runs: Path, docs: Path) -> dict:
    from . import train_grpo
    from .sft_warmup import warm_start
    from .tiny_model import build

    t0 = time.monotonic()
    base = build(runs / "tiny-base")
    warm = warm_start(base, runs / "tiny-sft", policy="rule", episodes=48, epochs=6, difficulty="easy")
    sft_seconds = round(time.monotonic() - t0, 1)
    args = train_grpo.parser().parse_args([
        "--model", str(runs / "tiny-sft"), "--cpu", "--steps", "100000", "--max-minutes", str(minutes),
        "--num-generations", "8", "--batch-size", "8", "--max-completion-length", "1536", "--max-tool-calls", "16",
        "--rows", "4096", "--difficulty", "easy", "--lr", "5e-5", "--output-dir", str(runs / "tiny-grpo")])
    t1 = time.monotonic()
    result = train_grpo.train(args)
    grpo_seconds = round(time.monotonic() - t1, 1)
    logs = [h for h in result["log_history"] if "reward" in h]
    curve_png([(h["step"], h["reward"]) for h in logs], docs / "learnability_lm_curve.png",
              "Tiny LM: GRPO reward on the train split (easy)", "GRPO step")
    scored = {}
    for label, name in (("warm start (SFT)", f"hf:{runs / 'tiny-sft'}"), ("SFT + GRPO", f"hf:{runs / 'tiny-grpo'}")):
        res = evaluate(name, "heldout_seeds", n, "easy", progress=False)
        res["policy"] = label
        scored[label] = res
    rule = evaluate("rule", "heldout_seeds", n, "easy", progress=False)
    scored["rule"] = rule
    return {"sft_seconds": sft_seconds, "sft_loss": [warm["losses"][0], warm["losses"][-1]],
            "grpo_seconds": grpo_seconds, "grpo_steps": len(logs), "eval_episodes": n, "results": scored,
            "grpo_improves_mean_return": scored["SFT + GRPO"]["metrics"]["mean_return"]["mean"]
            > scored["warm start (SFT)"]["metrics"]["mean_return"]["mean"]}


def report(data: dict, docs: Path) -> None:
    from .structured_policy import VALIDATION_START

    lines = ["# Learnability", "", f"Generated by `{data['command']}` on {data['machine']}.", ""]
    s = data.get("structured")
    if s:
        recipe = (f"{s['scenarios_per_step']} scenarios x {s['group']} episodes each, learning rate {s['lr']}, "
                  if s.get("lr") else "")  # runs from before the recipe was recorded leave it out
        selection = (f" Every {s['validate_every']} updates the greedy policy played {s['validation_episodes']} "
                     f"validation scenarios (`train`-split seeds from {VALIDATION_START:,}, never trained on); "
                     f"\"trained\" is the best of those checkpoints (update {s['best_step']}), \"last update\" the "
                     f"final weights." if s.get("validation") else "")
        lines += ["## Structured policy (RL over the public observation)", "",
                  f"Behaviour-cloned from the rule baseline, then {s['update_steps']} GRPO-style updates ({recipe}KL "
                  f"{s['kl_coef']} towards the cloned start) in {s['train_seconds']} s, warm start included, on the "
                  f"`train` split, medium.{selection}", ""]
        for name, results in s["slices"].items():
            lines += [f"### {name}", "", markdown(list(results.values())), ""]
        lines += ["Trained policy above the rule with non-overlapping 95% intervals:", ""]
        lines += [f"- {name}: mean return {'yes' if c['mean_return'] else 'no'}, safe ship "
                  f"{'yes' if c['safe_ship'] else 'no'}" for name, c in s["beats_rule_with_separated_ci"].items()]
        lines += ["", "![learning curve](learnability_structured_curve.png)",
                  "![rule vs trained](learnability_rule_vs_trained.png)", "", "### Behaviour: the demo seeds, and where the two policies part", ""]
        for title, b in s["behaviour"].items():
            lines += [f"**{title}** `{json.dumps(b['scenario'])}`", ""]
            for label in ("rule", "trained"):
                lines += [f"- {label} ({b[label]['outcome']}, return {b[label]['return']:.2f}): "
                          + " → ".join(b[label]["calls"])]
            lines += [""]
    lm = data.get("lm")
    if lm:
        grpo_calls = lm["results"]["SFT + GRPO"]["metrics"]["invalid_action"]["n"]  # calls made, valid or not
        lines += ["## Tiny language model with TRL", "",
                  f"SFT warm start on 48 rule episodes in {lm['sft_seconds']} s (loss {lm['sft_loss'][0]:.2f} → "
                  f"{lm['sft_loss'][1]:.2f}), then {lm['grpo_steps']} GRPO steps in {lm['grpo_seconds']} s; "
                  f"{lm['eval_episodes']} held-out episodes each, easy.", "",
                  markdown(list(lm["results"].values())), "",
                  f"GRPO improves mean return over the warm start: {'yes' if lm['grpo_improves_mean_return'] else 'no'}"
                  + (" (degenerate: after GRPO the model makes no tool calls, which avoids the invalid-call "
                     "penalty and misses every deadline)." if grpo_calls == 0 else "."),
                  "", "![GRPO reward](learnability_lm_curve.png)", ""]
    (docs / "learnability.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    import multiprocessing as mp
    import platform
    import sys

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="structured policy RL time")
    parser.add_argument("--lm-minutes", type=float, default=15.0, help="tiny LM GRPO time (0 to skip)")
    parser.add_argument("-n", type=int, default=500, help="evaluation episodes per slice (structured)")
    parser.add_argument("--lm-n", type=int, default=100, help="evaluation episodes (tiny LM)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--docs", type=Path, default=Path("docs"))
    parser.add_argument("--out", type=Path, default=Path("results/learnability.json"))
    parser.add_argument("--reuse-structured", action="store_true", help="evaluate runs/structured.pt again")
    args = parser.parse_args(argv)
    data = {"command": "python -m training.learnability " + " ".join(sys.argv[1:] if argv is None else argv),
            "machine": f"{platform.machine()}, {mp.cpu_count()} cores, Python {platform.python_version()}"}
    if args.minutes > 0:
        data["structured"] = structured_part(args.minutes, args.n, args.workers, args.runs, args.docs,
                                             args.reuse_structured)
    if args.lm_minutes > 0:
        data["lm"] = lm_part(args.lm_minutes, args.lm_n, args.runs, args.docs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for part in ("structured",):
        for results in data.get(part, {}).get("slices", {}).values():
            for r in results.values():
                r.pop("episodes", None)
    for r in data.get("lm", {}).get("results", {}).values():
        r.pop("episodes", None)
    args.out.write_text(json.dumps(data, indent=1))
    report(data, args.docs)
    print((args.docs / "learnability.md").read_text())


if __name__ == "__main__":
    main()
