"""Regenerate the calibration report: every reference policy and the exploit suite on every slice.

    python -m research.calibrate -n 500

The exploits are fitted on the train split first (per difficulty): the best
blind script of the grammar (a), the best blind script with one inspection
(b), the cue-only classifier (c), and the best fixed inspection order (a script
that reads no cue; `blind_bayes`, the planner's posterior without any cue, needs no
fitting). So is the best cue reader we fit (a logistic regression over every visible
feature, used to choose where to inspect). Then every policy plays
the same `n` scenarios per slice. Writes research/results/calibration.json,
docs/calibration.md and the board's chart and numbers (server/assets/metrics.png and
results.json), and prints each target with its measured value.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import platform
from collections import Counter, defaultdict
from pathlib import Path

from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.policies import FixedOrder
from releaseops_arena.scenario_builder import build_scenario
from releaseops_arena.splits import scenarios
from releaseops_arena.workers import ANSWERS, answer_weights
from research import exploits
from research.plot_metrics import headline
from training.evaluate import add_rule_win, evaluate, markdown, register_policy

REFERENCE = [
    "oracle",
    "attention_oracle",
    "planner",
    "cue_reader",
    "evidence_first",
    "rule",
    "naive",
    "random",
    "always_hold",
    "always_approve",
    "inspect_everything",
    "block_everything",
]
EXPLOITS = ["blind", "blind_probe", "cue_only", "fixed_order", "blind_bayes"]
# Fitted on the train split per difficulty, registered as `<name>@<difficulty>` (blind_bayes needs no fitting).
FITTED = ["blind", "blind_probe", "cue_only", "fixed_order", "cue_reader"]
SLICES = [(split, d) for d in ("medium", "hard") for split in ("heldout_seeds", "unseen_family", "unseen_mix")]
INFO_SLICES = [("heldout_seeds", "easy")]
MI_LIMIT = 0.3
# The web board's Results page (package data: a pip-installed server shows it too).
ASSETS = Path(__file__).resolve().parents[1] / "server" / "assets"
BOARD_POLICIES = ["naive", "fixed_order", "rule", "planner", "trained", "attention_oracle", "oracle"]
LEARNABILITY = Path("research/results/learnability.json")  # the trained policy's numbers on the same tasks


CUE_FIT_N = 4000  # train scenarios the cue reader is fitted on; the next 1,000 measure its information


def fit_exploits(difficulty: str, n: int) -> tuple[dict[str, dict], dict]:
    """Fit the exploit suite and the cue reader on the train split and register them (as
    `<name>@<difficulty>`). Returns their parameters and the cue reader's information measure."""
    blind = exploits.search_blind(difficulty, n=n)
    probe = exploits.search_blind(difficulty, n=n, allow_inspect=True)
    cue = exploits.fit_cue_only(difficulty)
    fixed = exploits.search_fixed_order(difficulty, n=2 * n)
    model = exploits.fit_cue_model(difficulty, CUE_FIT_N)
    for name, script in (("blind", blind), ("blind_probe", probe)):
        params = script.params()
        register_policy(
            f"{name}@{difficulty}",
            lambda p=params: exploits.BlindScript(**{**p, "ship_probes": tuple(p["ship_probes"])}),
        )
    register_policy(f"cue_only@{difficulty}", lambda c=cue: c)
    register_policy(f"fixed_order@{difficulty}", lambda p=dict(fixed.params): FixedOrder(**p))
    register_policy(f"cue_reader@{difficulty}", lambda m=model: exploits.CueReader(m))
    combined = model.bits(exploits.collect_rich_rows("train", 1000, difficulty, start=CUE_FIT_N))
    return (
        {
            "blind": blind.params(),
            "blind_probe": probe.params(),
            "cue_only": {"block_at": cue.block_at, "ship_block_at": cue.ship_block_at},
            "fixed_order": {k: list(v) if isinstance(v, tuple) else v for k, v in fixed.params.items()},
        },
        combined,
    )


def mutual_information(pairs: list[tuple[str, bool]]) -> float:
    """I(feature; label) in bits, from (value, label) samples."""
    n = len(pairs)
    joint = Counter(pairs)
    values = Counter(v for v, _ in pairs)
    labels = Counter(lab for _, lab in pairs)
    return sum(c / n * math.log2(c * n / (values[v] * labels[lab])) for (v, lab), c in joint.items())


def information_table(difficulty: str, n: int) -> dict[str, float]:
    """MI between each visible board feature of a proposal and whether it is a shortcut (train split),
    plus each question's answer (from the published answer tables at the measured shortcut rate)."""
    rows = exploits.collect_rows("train", n, difficulty)
    by_feature: dict[str, list[tuple[str, bool]]] = defaultdict(list)
    for tokens, label in rows:
        for token in tokens:
            name, _, value = token.partition("=")
            by_feature[name].append((value, label))
    table = {name: round(mutual_information(pairs), 4) for name, pairs in by_feature.items()}
    rate = sum(lab for _, lab in rows) / len(rows)
    for question in ANSWERS:
        bad, ok = answer_weights(question, True, difficulty), answer_weights(question, False, difficulty)
        mi = 0.0
        for wb, wo in zip(bad, ok):
            pv = rate * wb + (1 - rate) * wo
            mi += rate * wb * math.log2(wb / pv) + (1 - rate) * wo * math.log2(wo / pv)
        table[f"answer:{question}"] = round(mi, 4)
    return table


def clean_share(split: str, n: int, difficulty: str) -> float:
    return sum(not build_scenario(**s).hazards for s in scenarios(split, n, difficulty)) / n


def _pts(x: float) -> str:
    return f"{100 * x:.1f}"


def best_cue_blind(safe: dict[str, float]) -> str:
    """The cue-blind policy of the suite (exploits.CUE_BLIND) that ships safely most often on a slice."""
    return max((name for name in exploits.CUE_BLIND if name in safe), key=safe.get)


def targets(results: dict[str, dict], clean: float) -> list[tuple[str, str, bool]]:
    """The targets on one slice, as (target, measured, met)."""
    m = {name: r["metrics"] for name, r in results.items()}
    safe = {name: v["safe_ship"]["rate"] for name, v in m.items()}
    oracle_min = min(s["safe_ship"]["rate"] for s in results["oracle"]["by_family"].values())
    planner, fixed, attention = safe["planner"], safe["fixed_order"], safe["attention_oracle"]
    blind = best_cue_blind(safe)
    share = (planner - safe[blind]) / (attention - safe[blind]) if attention > safe[blind] else float("nan")
    share_target = 0.5  # on every slice: attention must pay where the workers or the family are new too
    best_exploit = max(safe[e] for e in EXPLOITS)
    worst_unsafe = min(m["naive"]["unsafe_ship"]["rate"], m["always_approve"]["unsafe_ship"]["rate"])
    ret = {name: v["mean_return"]["mean"] for name, v in m.items()}
    out = [
        ("oracle safe ship >= 95% on every family", f"min {_pts(oracle_min)}%", oracle_min >= 0.95),
        ("attention_oracle safe ship >= 90%", f"{_pts(attention)}%", attention >= 0.90),
        (
            "planner - fixed_order >= 15 points",
            f"{_pts(planner - fixed)} ({_pts(planner)}% vs {_pts(fixed)}%)",
            planner - fixed >= 0.15,
        ),
        (
            f"planner's share of the attention gap (from the best cue-blind policy) >= {share_target}",
            f"{share:.2f} (from {blind}, {_pts(safe[blind])}%)",
            share >= share_target,
        ),
        (
            "planner safe ship >= 60% and within 35 points of the oracle",
            f"{_pts(planner)}% ({_pts(safe['oracle'] - planner)} below)",
            planner >= 0.60 and safe["oracle"] - planner <= 0.35,
        ),
        (
            "cue_reader (fitted) <= planner + 5 points",
            f"{_pts(safe['cue_reader'])}% vs {_pts(planner)}%",
            safe["cue_reader"] <= planner + 0.05,
        ),
        (
            "cue_only safe ship >= 20 points below the planner",
            f"{_pts(safe['cue_only'])}% ({_pts(planner - safe['cue_only'])} below)",
            planner - safe["cue_only"] >= 0.20,
        ),
    ]
    for e in ("blind", "blind_probe"):
        out.append(
            (
                f"{e} safe ship <= 40% and >= 35 points below the planner",
                f"{_pts(safe[e])}% ({_pts(planner - safe[e])} below)",
                safe[e] <= 0.40 and planner - safe[e] >= 0.35,
            )
        )
    out += [
        (
            "inspect_everything mean return below the planner's",
            f"{ret['inspect_everything']:.3f} vs {ret['planner']:.3f}",
            ret["inspect_everything"] < ret["planner"],
        ),
        (
            "rule safe ship above every exploit (fixed_order and blind_bayes included), below the planner",
            f"{_pts(safe['rule'])}% (best exploit {_pts(best_exploit)}%, planner {_pts(planner)}%)",
            best_exploit < safe["rule"] < planner,
        ),
        ("naive and always_approve unsafe ship >= 50%", f"{_pts(worst_unsafe)}%", worst_unsafe >= 0.50),
        ("releases with no shortcut: 15-30%", f"{_pts(clean)}%", 0.15 <= clean <= 0.30),
    ]
    return out


def run(n: int, workers: int, fit_n: int, out_dir: Path, docs_dir: Path, assets: Path = ASSETS) -> dict:
    report: dict = {
        "n": n,
        "benchmark_version": BENCHMARK_VERSION,
        "machine": f"{platform.machine()}, {mp.cpu_count()} cores, Python {platform.python_version()}",
        "exploits": {},
        "information": {},
        "combined_information": {},
        "slices": {},
        "targets": {},
        "attention_share": {},
    }
    for difficulty in ("medium", "hard"):
        report["exploits"][difficulty], report["combined_information"][difficulty] = fit_exploits(difficulty, fit_n)
        report["information"][difficulty] = information_table(difficulty, 1000)
    for split, difficulty in SLICES + INFO_SLICES:
        rule = evaluate("rule", split, n, difficulty, workers=workers, progress=False)
        add_rule_win(rule, rule)
        names = [x for x in REFERENCE if difficulty != "easy" or x not in FITTED] + (
            EXPLOITS if difficulty != "easy" else []
        )
        results = {}
        for name in names:
            key = f"{name}@{difficulty}" if name in FITTED else name
            r = (
                rule
                if name == "rule"
                else evaluate(key, split, n, difficulty, k=4, workers=workers, baseline=rule, progress=False)
            )
            r["policy"] = name
            results[name] = r
        for r in results.values():
            r.pop("episodes", None)
        slice_name = f"{split}/{difficulty}"
        report["slices"][slice_name] = results
        if difficulty != "easy":
            rows = targets(results, clean_share(split, n, difficulty))
            safe = {name: results[name]["metrics"]["safe_ship"]["rate"] for name in results}
            blind = best_cue_blind(safe)
            gap = safe["attention_oracle"] - safe[blind]
            report["attention_share"][slice_name] = {
                "attention_oracle": safe["attention_oracle"],
                "planner": safe["planner"],
                "fixed_order": safe["fixed_order"],
                "blind_bayes": safe["blind_bayes"],
                "best_cue_blind": blind,
                "cue_reader": safe["cue_reader"],
                "planner_share": round((safe["planner"] - safe[blind]) / gap, 3) if gap > 0 else None,
                "cue_reader_share": round((safe["cue_reader"] - safe[blind]) / gap, 3) if gap > 0 else None,
            }
            worst_mi = max(report["information"][difficulty].values())
            rows.append(
                (
                    f"max MI of one visible feature vs the label <= {MI_LIMIT} bits",
                    f"{worst_mi:.3f} bits",
                    worst_mi <= MI_LIMIT,
                )
            )
            report["targets"][slice_name] = [{"target": t, "measured": v, "met": ok} for t, v, ok in rows]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "calibration.json").write_text(json.dumps(report, indent=1))
    assets.mkdir(parents=True, exist_ok=True)
    # The board's chart: the policies and names of the bars beside it (the trained one from learnability).
    headline(assets / "metrics.png", calibration=out_dir / "calibration.json")
    learned = json.loads(LEARNABILITY.read_text()) if LEARNABILITY.exists() else None
    (assets / "results.json").write_text(json.dumps(board_results(report, learned), indent=1) + "\n")
    docs_dir.mkdir(parents=True, exist_ok=True)
    (docs_dir / "calibration.md").write_text(render(report, n))
    return report


def board_results(report: dict, learnability: dict | None = None) -> dict:
    """The web board's Results page: per slice, the headline policies' safe-ship rate and mean return;
    with the learnability results, the trained policy's beside them (played on the same tasks there)."""
    learned = (learnability or {}).get("structured", {}).get("slices", {})
    slices = {}
    for name, rows in report["slices"].items():
        rows = {**rows, **{k: v for k, v in learned.get(name, {}).get("results", {}).items() if k == "trained"}}
        slices[name] = {
            p: {
                "safe_ship": rows[p]["metrics"]["safe_ship"]["rate"],
                "mean_return": rows[p]["metrics"]["mean_return"]["mean"],
            }
            for p in BOARD_POLICIES
            if p in rows
        }
    return {
        "benchmark_version": report["benchmark_version"],
        "n": report["n"],
        "report": "docs/calibration.md",
        "slices": slices,
    }


def render(report: dict, n: int) -> str:
    lines = [
        "# Calibration",
        "",
        f"Benchmark {report['benchmark_version']}. Generated by `python -m research.calibrate -n {n}` "
        f"on {report['machine']}.",
        "Rates in percent with 95% Wilson intervals; mean return with a 95% normal interval; "
        "rule win = paired, strictly higher return than `rule` on the same scenario.",
        "The exploits are fitted on the train split per difficulty (see *Exploit suite*).",
        "",
        "## Targets",
        "",
        "| slice | target | measured | met |",
        "|---|---|---|---|",
    ]
    for slice_name, rows in report["targets"].items():
        lines += [
            f"| {slice_name} | {t['target']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |" for t in rows
        ]
    lines += [
        "",
        "## Attention",
        "",
        "Safe ship %. The attention gap is `attention_oracle` minus the best cue-blind policy of the slice "
        f"({', '.join(f'`{e}`' for e in exploits.CUE_BLIND)}): what knowing where to look is worth over the best "
        "play that reads no cue. A share is how much of it a policy recovers.",
        "",
        "| slice | attention_oracle | planner | cue_reader (fitted) | fixed_order | blind_bayes | best cue-blind | "
        "planner's share | cue reader's share |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for slice_name, a in report["attention_share"].items():
        lines.append(
            f"| {slice_name} | {_pts(a['attention_oracle'])} | {_pts(a['planner'])} | {_pts(a['cue_reader'])} | "
            f"{_pts(a['fixed_order'])} | {_pts(a['blind_bayes'])} | {a['best_cue_blind']} | {a['planner_share']} | "
            f"{a['cue_reader_share']} |"
        )
    lines += [
        "",
        "## Information in every visible feature together (fitted cue reader, bits per proposal)",
        "",
        "Label entropy minus the logistic regression's cross-entropy on 1,000 train scenarios it was not fitted on.",
        "",
        "| difficulty | label entropy | cross-entropy | bits | proposals | shortcut rate |",
        "|---|---|---|---|---|---|",
    ]
    for difficulty, c in report["combined_information"].items():
        lines.append(
            f"| {difficulty} | {c['label_entropy']:.3f} | {c['cross_entropy']:.3f} | {c['bits']:.3f} | "
            f"{c['proposals']} | {c['shortcut_rate']:.3f} |"
        )
    lines += ["", "## Exploit suite (fitted on the train split)", ""]
    for difficulty, fitted in report["exploits"].items():
        lines.append(
            f"- **{difficulty}**: `blind` {json.dumps(fitted['blind'])}; `blind_probe` "
            f"{json.dumps(fitted['blind_probe'])}; `cue_only` thresholds {json.dumps(fitted['cue_only'])}; "
            f"`fixed_order` {json.dumps(fitted['fixed_order'])}"
        )
    lines += [
        "",
        "## Information in single visible features (bits, vs whether the proposal is a shortcut)",
        "",
        "| feature | medium | hard |",
        "|---|---|---|",
    ]
    info = report["information"]
    for feature in info["medium"]:
        lines.append(f"| {feature} | {info['medium'][feature]:.3f} | {info['hard'].get(feature, 0):.3f} |")
    for slice_name, results in report["slices"].items():
        lines += ["", f"## {slice_name}", "", markdown(list(results.values()))]
    lines += [
        "",
        "## Oracle and planner by family (held-out seeds and unseen family, medium)",
        "",
        "| family | oracle safe % | planner safe % | rule safe % |",
        "|---|---|---|---|",
    ]
    for slice_name in ("heldout_seeds/medium", "unseen_family/medium"):
        res = report["slices"][slice_name]
        for fam, m in res["planner"]["by_family"].items():
            lines.append(
                f"| {fam} | {_pts(res['oracle']['by_family'][fam]['safe_ship']['rate'])} | "
                f"{_pts(m['safe_ship']['rate'])} | {_pts(res['rule']['by_family'][fam]['safe_ship']['rate'])} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=500, help="scenarios per policy and slice")
    parser.add_argument("--fit-n", type=int, default=300, help="train scenarios per blind-script evaluation")
    parser.add_argument("--workers", type=int, default=max(1, mp.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=Path("research/results"), help="where calibration.json goes")
    parser.add_argument("--docs", type=Path, default=Path("docs"), help="where calibration.md goes")
    parser.add_argument(
        "--assets", type=Path, default=ASSETS, help="where the web board's chart and numbers go (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    report = run(args.n, args.workers, args.fit_n, args.out, args.docs, args.assets)
    for slice_name, rows in report["targets"].items():
        for t in rows:
            print(f"[{'x' if t['met'] else ' '}] {slice_name}: {t['target']}: {t['measured']}")


if __name__ == "__main__":
    main()
