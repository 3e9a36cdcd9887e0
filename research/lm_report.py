"""The LM study's report: the markdown `research.learnability` puts in docs/learnability.md, and variant rows.

Rendering only: it reads the results dict `research.lm_learnability.run` writes.
"""

from __future__ import annotations

import shlex
from statistics import NormalDist


def variant_row(name: str, note: str, m: dict, measured_with: str) -> dict:
    """A row of the variants table from a SUMMARY (valid calls, finished, calls/episode, return)."""
    valid = "no calls" if not m["invalid_rate"]["n"] else _pct(_valid(m))
    return {
        "name": name,
        "note": note,
        "valid_calls": valid,
        "finished": _pct(m["finished"]),
        "calls_per_episode": _mean(m["calls_per_episode"], 2),
        "mean_return": _mean(m["mean_return"]),
        "measured_with": measured_with,
    }


def _pct(metric: dict) -> str:
    if metric["rate"] is None:
        return "n/a"
    lo, hi = metric["ci95"]
    return f"{100 * metric['rate']:.1f} [{100 * lo:.0f}, {100 * hi:.0f}]"


def _mean(metric: dict, digits: int = 3) -> str:
    lo, hi = metric["ci95"]
    return f"{metric['mean']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def markdown(results: dict) -> str:
    """The report's section: setup, stage times, before/after with 95% intervals, verdict, variants.
    A results file holding only the variants tried (no completed run) renders that table alone."""
    if "eval" not in results:
        return "\n".join(
            ["No complete run of `python -m research.lm_learnability` is recorded yet.", ""] + _variants(results)
        )
    c, s, k = results["config"], results["stages"], results["config"]["settings"]
    lines = [
        f"Model: Qwen3-style, {c['parameters'] / 1e6:.1f}M parameters ({k['layers']} layers, hidden {k['hidden']}), "
        f"vocabulary {c['vocab']} with one token per board id"
        + _head(k)
        + f". Warm start on {c['warm_start_episodes']} "
        f"{k['warm_policy']} episodes (train split, {c.get('difficulty', 'easy')}{_recovery(k)}; "
        f"{results['sft']['steps']} steps, loss "
        f"{results['sft']['loss_first']:.2f} → {results['sft']['loss_last']:.2f}), then GRPO with TRL's "
        f"`environment_factory` ({results['grpo']['steps']} steps, {k['num_generations']} generations per prompt, "
        f"lr {k['grpo_lr']}, KL weight beta {k.get('beta', 0.0)}{_zero_std(results['grpo'])})"
        + _mining(results)
        + f". Evaluated greedily on {c['n_eval']} "
        f"{c['split']} episodes ({c['difficulty']}; tasks "
        f"{k.get('eval_start', 0)}-{k.get('eval_start', 0) + c['n_eval'] - 1}), the "
        f"same episodes before and after. Seed {c['seed']}, " + _cores(k) + "." + _selection(results),
        "",
        "Time per stage (wall / CPU s"
        + (", CPU of the main process only" if k.get("processes", 1) > 1 else "")
        + "): "
        + ", ".join(f"{name} {t['wall_s']} / {t['cpu_s']}" for name, t in s.items())
        + ".",
        "",
        "| model | calls / episode | invalid calls % | finished % | safe ship % | unsafe ship % | "
        "missed deadline % | mean return |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, m in results["eval"].items():
        lines.append(
            f"| {label} | {_mean(m['calls_per_episode'], 2)} | {_pct(m['invalid_rate'])} | "
            f"{_pct(m['finished'])} | {_pct(m['safe_ship'])} | {_pct(m['unsafe_ship'])} | "
            f"{_pct(m['missed_deadline'])} | {_mean(m['mean_return'])} |"
        )
    t = results["targets"]
    yes = {True: "met", False: "not met"}
    lines += [
        "",
        f"Targets: warm start ≥ 90% valid calls: {yes[t['sft_valid_calls_90']]}; ≥ 50% finished: "
        f"{yes[t['sft_finished_50']]}; GRPO raises mean return with non-overlapping intervals, calls per "
        f"episode not collapsed: {yes[t['grpo_gain']]}"
        + (" (calls per episode fell under half)" if results["calls_collapse"] else "")
        + ".",
    ]
    lines += ["", _lm_target_summary(results)]
    lines += _replicates(results)
    lines += _paired(results)
    lines += _recovery_probe(results)
    if results.get("examples"):
        lines += [
            "",
            "Before and after GRPO, greedy, on held-out tasks (`python -m research.lm_examples`):",
            "",
            *examples_markdown(results["examples"]),
        ]
    return "\n".join(lines + [""] + _variants(results))


def _replicates(results: dict) -> list[str]:
    """The same recipe run again with other seeds: how much of the result is the recipe and how much the warm
    start it happened to draw, and whether the replicate meets the LM target."""

    def ret(m: dict) -> float:
        return m["mean_return"]["mean"]

    lines = []
    published = results["eval"]["warm start (SFT)"], results["eval"]["SFT + GRPO"]
    for r in results.get("replicates", []):
        before, after = r["warm start (SFT)"], r["SFT + GRPO"]
        relative = intervals(before, after)
        # A replicate without its own first task was played where the published run was.
        first = results["config"]["settings"]["eval_start"]
        start, n = r.get("eval_start", first), before["episodes"]
        tasks = (
            "the same held-out tasks"
            if (start, n) == (first, published[0]["episodes"])
            else f"held-out tasks {start}-{start + n - 1}"
        )
        # Is the result the recipe's or its draw? Compare the warm starts' spread with what GRPO moved.
        spread = abs(ret(before) - ret(published[0]))
        moved = max(abs(ret(after) - ret(before)), abs(ret(published[1]) - ret(published[0])))
        lines += [
            "",
            f"The same recipe with seed {r['seed']} (`{r['command']}`), on {tasks}: "
            f"warm start {_mean(before['mean_return'])} ({valid_calls(before)}, missed deadlines "
            f"{100 * before['missed_deadline']['rate']:.1f}%), after GRPO {_mean(after['mean_return'])} "
            f"({valid_calls(after)}), intervals "
            + ("apart" if relative != "overlapping" else "overlapping")
            + "."
            + (
                f" The two warm starts differ by {spread:.3f}, GRPO moved either by at most {moved:.3f}: the "
                "result depends on the warm start drawn more than on GRPO."
                if spread > moved
                else ""
            )
            + (f" {r['note']}" if r.get("note") else "")
            + " "
            + _lm_target(before, after, relative),
        ]
    return lines


def _paired(results: dict) -> list[str]:
    """`python -m research.lm_paired` runs: two checkpoints on the same held-out tasks, each one's interval and
    the gain task by task (which leaves out the spread between tasks that both share)."""
    lines = []
    for r in results.get("paired", []):
        t = r["tasks_played"]
        before, after, g, n = r["before"], r["after"], r["gain"], r["tasks"]
        lo, hi = g["ci95"]
        lines += [
            "",
            f"{r['name']} (`{r['command']}`): " + (f"{r['note']} " if r["note"] else "") + f"Over "
            f"{before['episodes']} {t['split']} tasks ({t['difficulty']}, tasks {t['start']}-"
            f"{t['start'] + before['episodes'] - 1}): before {_mean(before['mean_return'])} ({valid_calls(before)}, "
            f"missed deadlines {100 * before['missed_deadline']['rate']:.1f}%), after {_mean(after['mean_return'])} "
            f"({valid_calls(after)}, missed deadlines {100 * after['missed_deadline']['rate']:.1f}%), intervals "
            f"{r['intervals']}; paired gain {g['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}], "
            + ("above 0" if lo > 0 else "below 0" if hi < 0 else "including 0")
            + f" ({n['better']} tasks better, {n['worse']} worse, {n['same']} the same). "
            + _lm_target(before, after, r["intervals"]),
        ]
        if r.get("examples"):
            lines += [
                "",
                f"Its before and after, greedy (`python -m research.lm_examples --paired {shlex.quote(r['name'])} "
                "--into research/results/lm_learnability.json`):",
                "",
                *examples_markdown(r["examples"]),
            ]
    return lines


def intervals(before: dict, after: dict) -> str:
    """How two summaries' 95% return intervals lie: "after above", "after below" or "overlapping"."""
    (lo1, hi1), (lo2, hi2) = before["mean_return"]["ci95"], after["mean_return"]["ci95"]
    return "after above" if lo2 > hi1 else "after below" if hi2 < lo1 else "overlapping"


def _lm_target(before: dict, after: dict, relative: str) -> str:
    """Does one comparison meet the study's LM target: valid calls >= 90% before and after GRPO, and the
    return after GRPO above the warm start's with the two 95% intervals apart?"""
    misses = _lm_target_misses(before, after, relative)
    return "LM target (valid calls ≥ 90% before and after, return intervals apart, after above): " + (
        f"not met ({'; '.join(misses)})." if misses else "met."
    )


def _lm_target_misses(before: dict, after: dict, relative: str) -> list[str]:
    short = [label for label, m in (("before", before), ("after", after)) if not valid_calls_90(m)]
    return ([f"valid calls under 90% {' and '.join(short)}"] if short else []) + (
        [] if relative == "after above" else [f"intervals {relative}"]
    )


def _lm_target_summary(results: dict) -> str:
    """One line over the GRPO runs checked against the LM target (the published run, its replicates, the paired
    runs), naming those that meet it, each with its intervals widened for every GRPO try the study made."""
    published = results["eval"]["warm start (SFT)"], results["eval"]["SFT + GRPO"]
    runs = [("the run above", *published, intervals(*published))]
    for r in results.get("replicates", []):
        before, after = r["warm start (SFT)"], r["SFT + GRPO"]
        runs.append((f"the seed-{r['seed']} replicate", before, after, intervals(before, after)))
    runs += [(r["name"], r["before"], r["after"], r["intervals"]) for r in results.get("paired", [])]
    met = [(name, b, a) for name, b, a, relative in runs if not _lm_target_misses(b, a, relative)]
    # A pass among many tries could be luck. Widen each passing run's intervals (Bonferroni, each at
    # 1 - 0.05 / tries) for an overcount of the tries: these runs plus every GRPO row of the variants table,
    # though some rows are these runs and some were played on validation tasks or with an earlier prompt.
    tries = len(runs) + sum("GRPO" in v["name"] for v in results.get("variants", []))
    scale = NormalDist().inv_cdf(1 - 0.05 / (2 * tries)) / NormalDist().inv_cdf(0.975)
    widened = []
    for name, b, a in met:
        # each stored interval is a normal approximation: its centre and half-width give the mean and its error
        (b_lo, b_hi), (a_lo, a_hi) = b["mean_return"]["ci95"], a["mean_return"]["ci95"]
        top = (b_lo + b_hi) / 2 + (b_hi - b_lo) / 2 * scale
        bottom = (a_lo + a_hi) / 2 - (a_hi - a_lo) / 2 * scale
        widened.append(
            f"{name} (widened for {tries} tries, {100 * (1 - 0.05 / tries):.2f}% intervals: before up to "
            f"{top:.3f}, after from {bottom:.3f}, " + ("still apart)" if bottom > top else "overlapping)")
        )
    return (
        f"LM target (valid calls ≥ 90% before and after GRPO, return intervals apart on held-out tasks): of the "
        f"{len(runs)} GRPO runs checked against it (the run above, its replicates and the paired runs below), "
        + (f"{len(met)} meet{'s' if len(met) == 1 else ''} it: {'; '.join(widened)}." if met else "none meets it.")
        + (
            f" The tries counted are these runs and every GRPO row of the variants table ({tries}), an "
            "overcount: some rows are these runs, some were played on validation tasks or with an earlier prompt."
            if met
            else ""
        )
    )


def valid_calls_90(m: dict) -> bool:
    """The study's valid-call target: at least 90% of a model's calls accepted. No call at all is no valid
    call: the rate is undefined and the target not met."""
    return m["invalid_rate"]["n"] > 0 and 1 - m["invalid_rate"]["rate"] >= 0.9


def valid_calls(m: dict) -> str:
    """ "valid calls 95.7%", or "no calls" where the model made none (the rate is then undefined)."""
    return f"valid calls {100 * _valid(m)['rate']:.1f}%" if m["invalid_rate"]["n"] else "no calls"


def _valid(m: dict) -> dict:
    bad = m["invalid_rate"]
    return {"rate": 1 - bad["rate"], "ci95": [1 - bad["ci95"][1], 1 - bad["ci95"][0]]}


def _recovery_probe(results: dict) -> list[str]:
    """What `python -m research.lm_recovery` found: can sampling at GRPO's temperature recover where the greedy
    warm start fails? A group whose every rollout fails has nothing to reinforce but failing less expensively."""
    from collections import Counter

    from releaseops_arena.catalog import OUTCOMES

    p = results.get("recovery_probe")
    if not p:
        return []
    failed = p["failed"]
    refused = [f for f in failed if f["first_refusal"] is not None]
    at = Counter(f["first_refusal"] + 1 for f in refused)

    shipped_outcomes = [o for o in OUTCOMES if o != "missed_deadline"]  # the release ended by a ship decision

    def ships(f: dict) -> int:
        return sum(row[2] for rows in f["from"].values() for row in rows if row[0] in shipped_outcomes)

    shipped = [f for f in refused if ships(f)]
    sampled = sum(row[2] for f in refused for rows in f["from"].values() for row in rows)
    drift = p.get("prefix_drift")
    return [
        "",
        f"Can GRPO's sampling recover where the greedy warm start fails (`python -m research.lm_recovery "
        f"{p['checkpoint']} -n {p['tasks']} --samples {p['samples']} --temperature {p['temperature']}`)? Of "
        f"{p['tasks']} train-split validation tasks (easy, tasks {p['start']}-{p['start'] + p['tasks'] - 1}), the "
        f"warm start fails {len(failed)}, {len(refused)} of them after a refused call (the first refused call is call "
        + ", ".join(f"{call} in {n}" for call, n in sorted(at.items()))
        + f"). Sampled at temperature {p['temperature']} from each one's first refused call and from the call after "
        f"it ({p['samples']} continuations each, the calls before greedy"
        + (f"; {drift} of them strayed from the greedy episode before the switch" if drift is not None else "")
        + f"), {sum(map(ships, refused))} of {sampled} continuations finished the release with a ship, on "
        f"{len(shipped)} of the {len(refused)} tasks. On the other {len(refused) - len(shipped)}, none of the "
        f"{2 * p['samples']} continuations did: a GRPO group on such a task most likely differs only in how much "
        "it loses, which teaches the model to lose less, not to finish.",
    ]


def _cores(k: dict) -> str:
    procs = k.get("processes", 1)
    if procs == 1:
        return "one CPU core (the budget in CPU time)"
    threads = k.get("sft_threads") or procs
    warm = (
        f"{k['sft_seeds']} warm starts in {k['sft_seeds']} processes of one torch thread each"
        if k.get("sft_seeds", 1) > 1
        else f"the warm start on {threads} torch thread{'s' if threads > 1 else ''}"
    )
    return (
        f"{procs} CPU cores (the budget in wall time: {warm}, the "
        f"evaluations and the mining in {procs} worker processes, GRPO on {procs} data-parallel ranks, "
        f"each playing its own prompt group every step)"
    )


def _recovery(k: dict) -> str:
    if not k.get("recovery"):
        return ""
    return (
        f"; {100 * k['recovery']:.0f}% of their blocks first tried with a rule the proposal's risk does not "
        f"allow, which the engine refuses, that refused turn not learned from (`research/recovery.py`)"
    )


def _selection(results: dict) -> str:
    return _warm_selection(results) + _grpo_selection(results)


def _grpo_selection(results: dict) -> str:
    """With `grpo_save_steps`: which saved GRPO model was evaluated, and every one's validation return."""
    grpo, k = results["grpo"], results["config"]["settings"]
    if not grpo.get("selection"):
        return ""
    start = k["select_start"]
    rows = "; ".join(
        f"step {s['step']}: {_mean(s['validation']['mean_return'])}, {valid_calls(s['validation'])}"
        for s in grpo["selection"]
    )
    return (
        f" GRPO saved its model every {k['grpo_save_steps']} steps, and the one evaluated is step "
        f"{grpo['kept_step']} of {grpo.get('global_step', grpo['steps'])}, kept for its mean return on "
        f"{k['select_episodes']} train-split validation tasks ({results['config']['difficulty']}, tasks {start}-"
        f"{start + k['select_episodes'] - 1}; never the held-out ones): {rows}."
    )


def _warm_selection(results: dict) -> str:
    warms, k = results.get("warm_starts"), results["config"]["settings"]
    if not warms:
        return ""
    start = k["select_start"]
    rows = "; ".join(
        f"seed {w['seed']}: {w['steps']} steps, loss {w['loss_last']:.4f}, return "
        f"{_mean(w['validation']['mean_return'])}, valid calls "
        f"{100 * (1 - w['validation']['invalid_rate']['rate']):.1f}%"
        for w in warms
    )
    return (
        f" {len(warms)} warm starts were trained side by side, one per process, and seed {results['sft']['seed']} "
        f"was kept for its mean return on {k['select_episodes']} train-split validation tasks (easy, tasks "
        f"{start}-{start + k['select_episodes'] - 1}; never the held-out ones): {rows}."
    )


def _zero_std(grpo: dict) -> str:
    if "zero_std_steps" not in grpo:
        return ""
    return f"; {grpo['zero_std_steps']} of its steps had all rollouts at one return, so zero advantage"


def _mining(results: dict) -> str:
    m = results.get("mining")
    if not m:
        return ""
    return (
        f", on the {m['kept']} hard train tasks of {m['pool'][1] - m['pool'][0]} mined "
        f"(tasks {m['pool'][0]}-{m['pool'][1] - 1}, {results['config'].get('difficulty', 'easy')}; those the "
        "greedy warm start does not solve: return "
        f"below a clean safe ship's and the planner's"
        + ("; of those, only the ones it does not finish" if _mine_keep(results) == "unfinished" else "")
        + f"; warm start {m['policy_mean']:.3f}, planner "
        f"{m['reference_mean']:.3f} on the pool)"
        + (
            f" and {m['replayed']} of the "
            + ("others" if _mine_keep(results) == "unfinished" else "solved ones")
            + " replayed beside them"
            if m.get("replayed")
            else ""
        )
    )


def _mine_keep(results: dict) -> str:
    return results["config"]["settings"].get("mine_keep", "below_reference")


def _head(k: dict) -> str:
    if not k.get("pointer"):
        return ""
    read = f", reading the {k['read_span']} tokens after each id" if k.get("read_span") else ""
    acted = (
        "acted on in tool results that are not errors"
        if k.get("coverage_results")
        else "mentioned again (errors included)"
    )
    return (
        f", and a pointer-generator head (`research/copy_model.py`: a gated copy distribution over the board ids "
        f"already in the conversation, with coverage of the ids {acted}{read})"
    )


def _variants(results: dict) -> list[str]:
    if not results.get("variants"):
        return []
    lines = [
        "Every variant tried (greedy; easy episodes unless the name says medium; which episodes: the last column):",
        "",
        "| variant | valid calls % | finished % | calls / episode | mean return | measured with |",
        "|---|---|---|---|---|---|",
    ]
    for v in results["variants"]:
        lines.append(
            f"| {v['name']}: {v['note']} | {v['valid_calls']} | {v['finished']} | "
            f"{v['calls_per_episode']} | {v['mean_return']} | {v['measured_with']} |"
        )
    return lines


def examples_markdown(rows: list[dict]) -> list[str]:
    """Before/after episodes (`research.lm_examples`), each call a numbered sentence."""
    out = []
    for r in rows:
        t = r["task"]
        what = {
            "differ": "the first where they end differently",
            "better": "the first where GRPO ends better",
            "worse": "the first where GRPO ends worse",
            "same": "the first where both end alike",
        }[r["kind"]]
        out += [f"**{t['split']} task {t['index']} ({t['difficulty']}), {what}**", ""]
        for label in ("before", "after"):
            e = r[label]
            name = "warm start" if label == "before" else "after GRPO"
            out += [f"- {name} ({e['outcome']}, return {e['return']:.2f}):"]
            out += [f"  {k}. {c}" for k, c in enumerate(e["calls"], 1)]
        out.append("")
    return out
