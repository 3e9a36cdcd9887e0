"""The learnability report's text: the verdicts' arithmetic, the tables and docs/learnability.md.

`research/learnability.py` measures; this module only renders what it measured
(research/results/learnability.json), so `--rerender` and the tests can rebuild the file
from kept results without playing an episode.
"""

from __future__ import annotations

import json
from pathlib import Path

from releaseops_arena.brief import PROMPT_VERSION
from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.policies.trained import READERS, SLOT_READERS
from training.evaluate import markdown

COMPARED = ("safe_ship", "mean_return")
BARS_SLICES = ("heldout_seeds/medium", "unseen_family/medium")


def value(metric: dict) -> float:
    return metric["rate"] if "rate" in metric else metric["mean"]


def above(a: dict, b: dict, key: str) -> bool:
    """True when a's 95% interval lies wholly above b's."""
    return a["metrics"][key]["ci95"][0] > b["metrics"][key]["ci95"][1]


def reader_sentence(reader: str, dropout: float, whole: bool = False) -> str:
    """What the trained policy's reading knew, in words."""
    if reader == "all":
        return (
            "But the reading among its features (reader `all`) knows every family's mechanisms, the held-out "
            "ones included, so on the unseen family this policy carries hand-coded knowledge of the slice."
        )
    if reader in SLOT_READERS:
        return (
            f"The reading among its features (reader `{reader}`) knows only the {len(READERS[reader])} train "
            "families' mechanisms and wordings; a site whose request no train mechanism makes is placed by its "
            "request and risk tags (the slot it holds: the rule it can break, its decisive artifact) and read as "
            "the release's own mechanism, and a deploy gate may be decided by whoever puts it up. No wording, "
            "table or name of a held-out family is in it (a test reads the exported file)."
        )
    return (
        f"The reading among its features (reader `{reader}`) knows only the {len(READERS[reader])} train "
        "families' mechanisms; a held-out family's own site reads as unknown"
        + (
            f", and in cloning, GRPO and validation the reading of {dropout:.0%} of proposals was withheld "
            "(reading dropout)"
            + (
                ", with whether the proposal is a fix and what kind of request it is, as a "
                "held-out mechanism's proposal reads"
                if whole
                else ""
            )
            + ", so the policy was trained to act on proposals it cannot place."
            if dropout
            else "."
        )
    )


def ablation_lines(ablation: dict, trained_with: str) -> list[str]:
    label = {"rule": "the rule, for reference", trained_with: f"{trained_with} (trained with)"}
    rows = [
        f"| {name} | {label.get(reader, reader)} | {_pct(m['safe_ship'])} | {_ret(m['mean_return'])} |"
        for name, row in ablation.items()
        for reader, m in row.items()
    ]
    return [
        "**What the reading knows.** The features include a reference planner's reading of each proposal "
        "(trained_policy.read), and that reading is hand-written knowledge of the generator. Reader `agnostic` "
        "knows what `train` knows and places a site of a mechanism it has not met by its request and risk "
        "(planner.slot_of); its posterior comes from the board's cues, not its wording, which it cannot read. "
        "Reader `train` "
        "knows the train split's families only: a held-out family's own site (a request or claim wording no "
        "train mechanism has) reads as unknown, with no rule, posterior or wording kind, so the policy must "
        "fall back on the board and the evidence. Reader `all` also knows the held-out families' mechanisms "
        "(waiver, reopen, snapshot), which is hand-coded knowledge of the unseen-family slice. All readers "
        "share the evidence reader (policy.evidence_violation), which recognises every artifact's violation, "
        "the held-out mechanisms' included (its worth is measured below): it reads an artifact against S1-S3, "
        "not a family. The rule and the planner are "
        "hand-written references and read with everything. The same weights, played with each reader on the "
        "unseen family:",
        "",
        "| slice | reader | safe ship % | mean return |",
        "|---|---|---|---|",
        *rows,
        "",
    ]


def evidence_lines(ablation: dict | None) -> list[str]:
    """The evidence reader's worth (research/evidence_ablation.py), if it was measured for this checkpoint."""
    if not ablation:
        return []
    rows = [
        f"| {name} | {label} | "
        + " | ".join(f"{_pct(m['safe_ship'])}; {_ret(m['mean_return'])}" for m in by_reader.values())
        + " |"
        for name, part in ablation["slices"].items()
        for label, by_reader in part.items()
    ]
    return [
        "**What the evidence reader knows.** Every policy reads an inspected artifact through the same "
        "hand-written evidence reader, and it knows the held-out mechanisms' artifacts too: two fields only "
        "held-out mechanisms write (a P1 closed while its errors continue, payment snapshots rewritten) show "
        "a broken rule to it. Played with a reader that leaves those two fields unread, as one written from "
        "the train split alone would, on the first "
        f"{ablation['n']} unseen-family tasks (`python -m research.evidence_ablation --structured-checkpoint "
        f"{ablation['checkpoint']} -n {ablation['n']} --into research/results/learnability.json`):",
        "",
        "| slice | policy | every artifact: safe ship %; mean return | train artifacts only: safe ship %; "
        "mean return |",
        "|---|---|---|---|",
        *rows,
        "",
    ]


def _pct(m: dict) -> str:
    if m.get("rate") is None:
        return "n/a"
    return f"{100 * m['rate']:.1f} [{100 * m['ci95'][0]:.1f}, {100 * m['ci95'][1]:.1f}]"


def _ret(m: dict) -> str:
    return f"{m['mean']:.3f} [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]"


def _shares(c: dict) -> str:
    """The trained policy's and the planner's share of the attention gap, and the cue-blind policy it is
    measured against (checks written before the planner's share was reported have the trained one only)."""
    if "planner_attention_share" not in c:
        return str(c.get("attention_share", "n/a"))
    return f"{c['attention_share']:.3f} / {c['planner_attention_share']:.3f} ({c['best_cue_blind']})"


def summary_table(s: dict) -> str:
    """One row per slice: safe ship and mean return of rule, trained, planner; the verdicts; the gap closed."""
    lines = [
        "| slice | safe ship %: rule / trained / planner | mean return: rule / trained / planner | "
        "above rule and every exploit (safe ship, return) | rule→planner gap closed (safe ship, return) | "
        "trained: unsafe / missed / false blocks / P1 catch / budget % | share of the attention gap: trained / planner "
        "(against) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, part in s["slices"].items():
        r, c = part["results"], part["checks"]
        m = r["trained"]["metrics"]
        ok = [
            "yes"
            if v["above_rule"] and not v["exploits_not_beaten"]
            else "no (" + ", ".join((["rule"] if not v["above_rule"] else []) + v["exploits_not_beaten"]) + ")"
            for v in (c["safe_ship"], c["mean_return"])
        ]
        gaps = ["n/a" if c[k]["gap_closed"] is None else f"{c[k]['gap_closed']:.2f}" for k in COMPARED]
        lines.append(
            f"| {name} | {' / '.join(_pct(r[p]['metrics']['safe_ship']) for p in ('rule', 'trained', 'planner'))} | "
            f"{' / '.join(_ret(r[p]['metrics']['mean_return']) for p in ('rule', 'trained', 'planner'))} | "
            f"{ok[0]}, {ok[1]} | {gaps[0]}, {gaps[1]} | "
            f"{100 * m['unsafe_ship']['rate']:.1f} / {100 * m['missed_deadline']['rate']:.1f} / "
            f"{100 * (m['false_block']['rate'] or 0):.1f} / {100 * (m['p1_catch']['rate'] or 0):.1f} / "
            f"{100 * m['budget_used']['rate']:.0f} | {_shares(c)} |"
        )
    return "\n".join(lines)


def yardstick_lines(s: dict) -> list[str]:
    """The trained policy against `evidence_first`, the claim-blind script an adversarial review found."""
    if not all("evidence_first" in part["results"] for part in s["slices"].values()):
        return []
    rows = []
    for name, part in s["slices"].items():
        r = part["results"]
        cells = []
        for key, fmt in (("safe_ship", _pct), ("mean_return", _ret)):
            ahead = above(r["evidence_first"], r["trained"], key)
            behind = above(r["trained"], r["evidence_first"], key)
            verdict = "evidence_first above" if ahead else "trained above" if behind else "intervals overlap"
            cells.append(f"{fmt(r['evidence_first']['metrics'][key])} ({verdict})")
        rows.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return [
        "**A stronger yardstick than the rule.** `evidence_first` "
        "(releaseops_arena/policies/baselines.py) never reads a "
        "claim, a voice, a confidence, a hint or a track record: it inspects each site's decisive artifact in a "
        "fixed order, blocks what the evidence shows broken and approves the rest. An adversarial review of this "
        "report found it. It supervises through evidence alone, so it is not in the exploit suite; where it beats "
        "the trained policy, reading the cues bought nothing over spending the budget in a fixed order.",
        "",
        "| slice | evidence_first safe ship % (against trained) | evidence_first mean return (against trained) |",
        "|---|---|---|",
        *rows,
        "",
    ]


def structured_markdown(s: dict) -> list[str]:
    from .structured_policy import VALIDATION_START

    t = s["training"]
    lines = [
        "## Structured policy (RL over the public observation)",
        "",
        f"Checkpoint `{s['checkpoint']}`. {s['provenance']}",
        "",
        f"Behaviour-cloned from the {t['warm_start']} on {t['warm_episodes']} `train` episodes "
        f"({t['warm_start_seconds']} s), then {t['steps']} GRPO-style updates ({t['scenarios_per_step']} scenarios "
        f"x {t['group']} episodes, learning rate {t['lr']}, entropy bonus {t.get('entropy_coef')}, KL "
        f"{t['kl_coef']} towards the cloned start) in "
        f"{t['seconds']} s on one core, all difficulties. Every {t['validate_every']} updates the greedy policy "
        f"played {t['validation_episodes']} validation scenarios (`train` seeds from {VALIDATION_START:,}, never "
        f'trained on); "trained" is the best of those checkpoints (update {t["best_step"]}'
        + (": no update beat the cloned start, so trained is the warm start" if t["best_step"] == 0 else "")
        + '), "warm start" the cloned start before any update. No held-out seed, family or mix was played in '
        "training or selection. "
        + reader_sentence(s.get("reader", "all"), t.get("reading_dropout", 0.0), t.get("dropout_whole", False)),
        "",
        f"Each slice: the first {s['n']} tasks. Rule, planner, warm start and trained are played by this "
        f"command; the exploit suite's intervals, on the same tasks, come from {calibration_source(s)}.",
        "",
        summary_table(s),
        "",
        *ablation_lines(s.get("reader_ablation", {}), s.get("reader", "all")),
        *evidence_lines(s.get("evidence_ablation")),
        *yardstick_lines(s),
        "![learning curve](learnability_structured_curve.png)",
        "",
    ]
    lines += [f"![{name}: rule, trained, planner](learnability_bars_{name.split('/')[0]}.png)" for name in BARS_SLICES]
    for name, part in s["slices"].items():
        lines += ["", f"### {name}", "", markdown(list(part["results"].values())), ""]
    if s.get("variants"):
        lines += [
            "### Every variant tried",
            "",
            "Selection used the `train` validation seeds only; held-out numbers of "
            "a variant are reported, never used to choose.",
            "",
            "| variant | measured | result | command |",
            "|---|---|---|---|",
        ]
        lines += [f"| {v['name']} | {v['measured_with']} | {v['result']} | `{v['command']}` |" for v in s["variants"]]
        lines.append("")
    lines += ["### Behaviour: the demo seeds before and after training, and where trained and rule part", ""]
    for title, b in s["behaviour"].items():
        lines += [f"**{title}** `{json.dumps(b['scenario'])}`", ""]
        for label in ("rule", "before training", "after training"):
            if label in b:
                lines.append(
                    f"- {label} ({b[label]['outcome']}, return {b[label]['return']:.2f}, budget used "
                    f"{b[label]['budget_used']}): " + " → ".join(b[label]["calls"])
                )
        lines.append("")
    return lines


def calibration_source(structured: dict) -> str:
    """Where the exploit intervals were read, and the command that writes that file."""
    path = Path(structured.get("calibration", "research/results/calibration.json"))
    out = "" if path.parent == Path("research/results") else f" --out {path.parent} --docs {path.parent}"
    return f"`{path}`, written by `python -m research.calibrate -n {structured['n']}{out}`"


# The published LM recipe (lm_settings.PRESETS["published"]), for re-measuring it on this version.
LM_RUN_COMMAND = "python -m research.lm_learnability --preset published --minutes 50 -n 1000 --out runs/lm"
# The last commit of the world and prompt the reported LM numbers were measured with (benchmark v2,
# before the brief), and the same recipe as that commit's command line spelled it.
LM_MEASURED_COMMIT = "fed4342"
LM_MEASURED_COMMAND = (
    "python -m training.lm_learnability --minutes 60 -n 2000 --out runs/lm --set processes=2 "
    "sft_seeds=2 recovery=0.5 sft_share=0.275 grpo_share=0.3 grpo_margin=2.0 temperature=1.0 "
    "grpo_lr=1e-4 mine_tasks=160 replay=1.0 eval_start=2000 select_episodes=100"
)


def report(data: dict, docs: Path) -> str:
    lines = [
        "# Learnability",
        "",
        f"Generated by `{data['command']}` on {data['machine']}"
        + (f"; the LM section re-read by `{data['rerendered']}`" if data.get("rerendered") else "")
        + (
            f"; {', '.join(data['replayed'])} played again on the same tasks by `{data['replayed_by']}`"
            if data.get("replayed")
            else ""
        )
        + ".",
        "",
    ]
    if "structured" in data:
        lines += structured_markdown(data["structured"])
    if "lm" in data:
        from .lm_report import markdown as lm_markdown

        lines += ["## Language model with TRL", ""]
        measured_on = data["lm"].get("benchmark_version") or "v2"  # runs before versions were stamped were v2's
        if measured_on != BENCHMARK_VERSION:
            # Never presented as this version's numbers: the world they were measured in is another one.
            lines += [
                f"**These numbers were measured on benchmark {measured_on}, not on {BENCHMARK_VERSION}**: the "
                f"language-model run has not been repeated on {BENCHMARK_VERSION}'s world. To measure it on "
                f"{BENCHMARK_VERSION}: `{LM_RUN_COMMAND}` (a 50-minute wall-time budget on two cores), then "
                "`python -m research.learnability --rerender --lm-results research/results/lm_learnability.json`.",
                "",
            ]
        prompt = data["lm"].get("prompt_version")
        if prompt != PROMPT_VERSION:
            # Runs before the brief played from one user message ("You are the release oversight supervisor.
            # ... Stop once the phase or episode is resolved."), the prompt the brief replaced.
            lines += [
                f"**Prompt: {prompt or 'the pre-brief prompt'}, not the task brief ({PROMPT_VERSION}).** The model was "
                f"trained and evaluated with "
                f"{'that prompt' if prompt else 'the one-line user prompt the brief replaced'}. "
                f"To reproduce these numbers as measured: `git checkout {LM_MEASURED_COMMIT}`, then (that commit's "
                f"layout) `{LM_MEASURED_COMMAND}`; to measure with the brief, run the command above on this version.",
                "",
            ]
        lines += [data["lm_provenance"], "", lm_markdown(data["lm"]), ""]
        if data.get("lm_curve"):
            lines += ["![GRPO reward](learnability_lm_curve.png)", ""]
        for more in data.get("lm_more", []):
            c = more["results"]["config"]
            lines += [
                f"### At {c.get('difficulty', 'easy')}",
                "",
                f"Read from `{more['path']}`, written by `{more['command']}`.",
                "",
                lm_markdown(more["results"]),
                "",
            ]
    text = "\n".join(lines) + "\n"
    (docs / "learnability.md").write_text(text)
    return text
