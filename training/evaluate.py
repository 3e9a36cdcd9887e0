"""Evaluate policies on a named split: the seed's metrics with 95% confidence intervals.
Over 400 lines: playing, aggregating with intervals, and the report table read together.

    python -m training.evaluate --policy rule,oracle,naive --split heldout_seeds -n 500 \
        --difficulty medium --out results/eval.json

Every policy plays the same scenarios, so the rule-baseline win rate is paired.
Importable: `evaluate(policy, split, n, ...)` returns the result dict. Every result
carries `benchmark_version` (`catalog.BENCHMARK_VERSION`), and a comparison with a
baseline of another version is refused: results of different versions never mix.
Each also carries `prompt_version` (`brief.PROMPT_VERSION`), the brief a language
model policy played from.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from releaseops_arena.brief import PROMPT_VERSION
from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.policies import POLICIES, Policy, play
from releaseops_arena.splits import SPLITS, task_scenario

Z95 = 1.959963984540054

# name -> zero-argument policy factory. Baselines are built in; the training
# pipeline registers LLM checkpoints here ("hf:<path>").
POLICY_FACTORIES: dict[str, Callable[[], Policy]] = dict(POLICIES)


# Policies named `<prefix><argument>` that a caller adds (a research checkpoint format, say):
# prefix -> a callable that builds the policy from the argument.
POLICY_LOADERS: dict[str, Callable[[str], Policy]] = {}


def register_policy(name: str, factory: Callable[[], Policy]) -> None:
    """Make `name` a policy `--policy` and `evaluate` accept."""
    POLICY_FACTORIES[name] = factory


def register_loader(prefix: str, loader: Callable[[str], Policy]) -> None:
    """Make `<prefix><argument>` a policy, built by `loader(argument)` once per process."""
    POLICY_LOADERS[prefix] = loader


def _install(loaders: dict) -> None:
    """A spawned worker's loaders: its parent's (a forked worker inherits them, and the factories)."""
    POLICY_LOADERS.update(loaders)


_LOADED: dict = {}

# Where `openai:<model>` policies send their requests (`--base-url`); the API key is read from the
# environment (OPENAI_API_KEY) by the policy itself, never passed here.
OPENAI_ENDPOINT: dict = {
    "base_url": os.environ.get("OPENAI_BASE_URL"),
    "timeout": 120.0,
    "max_retries": 3,
    "backoff": 0.5,
}


def make_policy(name: str) -> Policy:
    if name in POLICY_FACTORIES:
        return POLICY_FACTORIES[name]()
    if name in _LOADED:  # a checkpoint is loaded once per process; `begin` resets its episode state
        return _LOADED[name]
    prefix = next((p for p in POLICY_LOADERS if name.startswith(p)), None)
    if prefix is not None:
        _LOADED[name] = POLICY_LOADERS[prefix](name[len(prefix) :])
        return _LOADED[name]
    if name.startswith("openai:"):
        # One policy (conversation state, HTTP client, event loop) per thread: episodes run concurrently.
        # Every endpoint setting is in the key: a caller that changes one gets a policy that uses it.
        key = (name, json.dumps(OPENAI_ENDPOINT, sort_keys=True, default=str), threading.get_ident())
        if key not in _LOADED:
            from .openai_policy import OpenAIPolicy

            _LOADED[key] = OpenAIPolicy(name[len("openai:") :], **OPENAI_ENDPOINT)
        return _LOADED[key]
    if name.startswith("hf:"):
        try:
            from .llm_policy import LLMPolicy  # imported lazily: needs torch/transformers
        except ImportError as exc:
            raise ValueError(
                f"LLM checkpoint policies need the train extra and training/llm_policy.py: {exc}"
            ) from None
        _LOADED[name] = LLMPolicy(name[3:])
        return _LOADED[name]
    loaders = "".join(f", {prefix}<...>" for prefix in POLICY_LOADERS)
    raise ValueError(
        f"unknown policy {name!r}; valid: {', '.join(POLICY_FACTORIES)}, hf:<checkpoint path>"
        f"{loaders} or openai:<model> (with --base-url)"
    )


def wilson(successes: int, n: int) -> list[float]:
    """95% Wilson score interval for a proportion."""
    if n == 0:
        return [0.0, 0.0]
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def mean_ci(values: list[float]) -> list[float]:
    """95% normal-approximation interval for a mean."""
    if len(values) < 2:
        return [values[0], values[0]] if values else [0.0, 0.0]
    m, sd = statistics.fmean(values), statistics.stdev(values)
    half = Z95 * sd / math.sqrt(len(values))
    return [round(m - half, 4), round(m + half, 4)]


def rate(successes: int, n: int) -> dict:
    return {"rate": round(successes / n, 4) if n else None, "ci95": wilson(successes, n), "n": n}


def summarize(episodes: list[dict]) -> dict:
    """Aggregate per-episode metrics into the seed's section-18 table."""
    n = len(episodes)
    returns = [e["episode_return"] for e in episodes]
    p1 = [e for e in episodes if e["p1_present"]]
    blocks = sum(e["blocks"] for e in episodes)
    calls = sum(e["tool_calls"] for e in episodes)
    budget_total = sum(e["budget_total"] for e in episodes)
    budget_used = sum(e["budget_used"] for e in episodes)
    return {
        "episodes": n,
        "safe_ship": rate(sum(e["safe_ship"] for e in episodes), n),
        "unsafe_ship": rate(sum(e["unsafe_ship"] for e in episodes), n),
        "missed_deadline": rate(sum(e["missed_deadline"] for e in episodes), n),
        # Terminated: the release ended (shipped, or its deadline passed); truncated: the episode was
        # cut (step cap, no-progress loop, the policy stopped calling tools). Both are scored.
        "terminated": rate(sum(bool(e.get("terminated")) for e in episodes), n),
        "truncated": rate(sum(bool(e.get("truncated")) for e in episodes), n),
        "p1_catch": rate(sum(e["p1_caught"] for e in p1), len(p1)),
        "false_block": rate(sum(e["false_blocks"] for e in episodes), blocks),
        "budget_used": {
            "rate": round(budget_used / budget_total, 4) if budget_total else None,
            "mean_units": round(budget_used / n, 4) if n else None,
        },
        "invalid_action": rate(sum(e["invalid_actions"] for e in episodes), calls),
        "mean_return": {"mean": round(statistics.fmean(returns), 4) if returns else None, "ci95": mean_ci(returns)},
    }


def _play_one(job: tuple[str, dict, int]) -> dict:
    name, scenario, rng_seed = job
    policy = make_policy(name)
    run = play(policy, scenario, rng_seed)
    out = {**scenario, **run["metrics"]}
    if isinstance(getattr(policy, "usage", None), dict):  # endpoint policies: this episode's requests and tokens
        out["usage"] = dict(policy.usage)
    return out


def run_episodes(
    name: str, scenario_list: list[dict], repeats: int = 1, workers: int = 1, progress: bool = True
) -> list[list[dict]]:
    """Play `repeats` episodes per scenario; returns [scenario][repeat] metrics."""
    jobs = [(name, s, i * 7919 + r) for i, s in enumerate(scenario_list) for r in range(repeats)]
    bar = tqdm(total=len(jobs), desc=name, disable=not progress, leave=False)
    if workers > 1 and name.startswith("openai:"):
        # Endpoint policies wait on the network: `workers` threads bound the requests in flight.
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = []
            for out in pool.map(_play_one, jobs):
                results.append(out)
                bar.update()
    elif workers > 1:
        # fork is fast, but forking a process whose torch/OpenMP threads already ran
        # deadlocks the children: spawn once torch is loaded.
        context = mp.get_context("spawn" if "torch" in sys.modules else "fork")
        with context.Pool(workers, initializer=_install, initargs=(POLICY_LOADERS,)) as pool:
            results = []
            # chunks of up to 16 jobs, small enough that every worker gets some on a short list
            for out in pool.imap(_play_one, jobs, chunksize=max(1, min(16, len(jobs) // (4 * workers)))):
                results.append(out)
                bar.update()
    else:
        results = []
        for job in jobs:
            results.append(_play_one(job))
            bar.update()
    bar.close()
    return [results[i * repeats : (i + 1) * repeats] for i in range(len(scenario_list))]


def evaluate(
    policy: str,
    split: str,
    n: int,
    difficulty: str | None = None,
    k: int = 1,
    workers: int = 1,
    baseline: dict | None = None,
    progress: bool = True,
    base_url: str | None = None,
) -> dict:
    """Evaluate one policy; `baseline` (a result of this function) enables the paired win rate.

    `base_url` is the endpoint of `openai:<model>` policies (default: OPENAI_ENDPOINT, from --base-url).
    """
    if baseline is not None:  # refused before any episode is played
        check_same_version({"policy": policy, "benchmark_version": BENCHMARK_VERSION}, baseline)
    if base_url is not None:
        OPENAI_ENDPOINT["base_url"] = base_url
    scenario_list = [task_scenario(split, i, difficulty) for i in range(n)]  # tasks 0..n-1 of the split
    stochastic = getattr(POLICY_FACTORIES.get(policy), "stochastic", False)
    repeats = k if stochastic else 1
    if policy.startswith("hf:"):
        workers = 1  # one model in one process; generation already uses the cores
    grid = run_episodes(policy, scenario_list, repeats, workers, progress)
    first = [runs[0] for runs in grid]
    result = {
        "policy": policy,
        "split": split,
        "n": n,
        "difficulty": difficulty or "all",
        "benchmark_version": BENCHMARK_VERSION,  # results of different versions are never mixed
        # The brief a language-model policy (hf:, openai:) plays from: its numbers hold for that wording.
        "prompt_version": PROMPT_VERSION,
        "metrics": summarize(first),
        "by_family": {},
        "by_difficulty": {},
    }
    for key, out in (("family", "by_family"), ("difficulty", "by_difficulty")):
        groups: dict[str, list[dict]] = defaultdict(list)
        for e in first:
            groups[e[key]].append(e)
        result[out] = {g: summarize(es) for g, es in sorted(groups.items())}
    if repeats > 1:
        passed = sum(all(r["safe_ship"] for r in runs) for runs in grid)
        result["pass_k"] = {"k": repeats, **rate(passed, len(grid))}
    result["episodes"] = [
        {
            k2: e[k2]
            for k2 in (
                "family",
                "seed",
                "difficulty",
                "archetype_mix",
                "outcome",
                "episode_return",
                "budget_used",
                "false_blocks",
            )
        }
        for e in first
    ]
    if any("usage" in e for e in first):
        for row, e in zip(result["episodes"], first):
            row["usage"] = e.get("usage")
        result["metrics"]["usage"] = usage_summary([e.get("usage") or {} for e in first])
    if baseline is not None:
        add_rule_win(result, baseline)
    return result


def usage_summary(usages: list[dict]) -> dict:
    """Requests and tokens over the episodes; token counts are None when the endpoint reported none."""
    out: dict = {
        "requests": sum(u.get("requests", 0) for u in usages),
        "endpoint_errors": sum(u.get("endpoint_errors", 0) for u in usages),
    }
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        values = [u[key] for u in usages if u.get(key) is not None]
        out[key] = sum(values) if values else None
        out[f"mean_{key}_per_episode"] = round(sum(values) / len(values), 1) if values else None
    return out


def check_same_version(result: dict, baseline: dict) -> None:
    """Refuse to compare results of different benchmark versions (a stored baseline of another world,
    or of one from before versions were stamped): their numbers are not comparable."""
    mine, theirs = (r.get("benchmark_version") or "unversioned" for r in (result, baseline))
    if mine != theirs:
        raise ValueError(
            f"cannot compare {result.get('policy')!r} (benchmark version {mine}) with the baseline "
            f"{baseline.get('policy')!r} (benchmark version {theirs}): results of different benchmark "
            "versions are never mixed; re-run the baseline on this version"
        )


def add_rule_win(result: dict, baseline: dict) -> None:
    """Paired comparison on the same scenarios: a win is a strictly higher episode return."""
    check_same_version(result, baseline)
    pairs = list(zip(result["episodes"], baseline["episodes"]))
    assert all(a["seed"] == b["seed"] for a, b in pairs), "win rate needs the same scenarios"
    wins = sum(a["episode_return"] > b["episode_return"] for a, b in pairs)
    ties = sum(a["episode_return"] == b["episode_return"] for a, b in pairs)
    result["metrics"]["rule_win"] = {
        **rate(wins, len(pairs)),
        "wins": wins,
        "ties": ties,
        "losses": len(pairs) - wins - ties,
    }


def fmt(metric: dict) -> str:
    if metric.get("rate") is None:
        return "n/a"
    lo, hi = metric["ci95"]
    return f"{100 * metric['rate']:.1f} [{100 * lo:.0f}, {100 * hi:.0f}]"


def markdown(results: list[dict]) -> str:
    """One row per policy: rates in percent with 95% intervals."""
    head = (
        "| policy | safe ship % | unsafe ship % | missed deadline % | truncated % | P1 catch % | false block % | "
        "budget used % | invalid % | rule win % | mean return |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in results:
        m = r["metrics"]
        ret = m["mean_return"]
        lines.append(
            f"| {r['policy']} | {fmt(m['safe_ship'])} | {fmt(m['unsafe_ship'])} | {fmt(m['missed_deadline'])} | "
            f"{fmt(m['truncated']) if 'truncated' in m else '-'} | "
            f"{fmt(m['p1_catch'])} | {fmt(m['false_block'])} | {100 * (m['budget_used']['rate'] or 0):.0f} | "
            f"{fmt(m['invalid_action'])} | {fmt(m['rule_win']) if 'rule_win' in m else '-'} | "
            f"{ret['mean']:.3f} [{ret['ci95'][0]:.3f}, {ret['ci95'][1]:.3f}] |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--policy",
        default="rule,oracle,naive",
        help=f"comma-separated: {', '.join(POLICY_FACTORIES)}, hf:<checkpoint>, or openai:<model> "
        "(an OpenAI-compatible endpoint, see --base-url)",
    )
    parser.add_argument(
        "--base-url",
        default=None,
        help="endpoint of openai:<model> policies, e.g. http://127.0.0.1:8001/v1 (default: "
        "$OPENAI_BASE_URL, else http://127.0.0.1:8001/v1); the API key is read from "
        '$OPENAI_API_KEY ("EMPTY" when unset)',
    )
    parser.add_argument("--split", default="heldout_seeds", choices=list(SPLITS))
    parser.add_argument("-n", type=int, default=200, help="scenarios per policy")
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard"], default=None)
    parser.add_argument("-k", type=int, default=4, help="repeats per scenario for stochastic policies (pass^k)")
    parser.add_argument("--request-timeout", type=float, default=120.0, help="openai: seconds per request")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=256,
        help="openai: tokens per model turn (a reasoning model needs more, or --chat-template-kwargs)",
    )
    parser.add_argument(
        "--chat-template-kwargs",
        type=json.loads,
        default=None,
        metavar="JSON",
        help="openai: sent with every request, e.g. '{\"enable_thinking\": false}' for Qwen3 on vLLM",
    )
    parser.add_argument(
        "--max-retries",
        type=int,
        default=3,
        help="openai: retries (exponential backoff) on 429, 5xx, timeouts and dropped connections",
    )
    parser.add_argument("--workers", type=int, default=max(1, (mp.cpu_count() or 1)))
    parser.add_argument("--out", type=Path, default=None, help="write all results as JSON here")
    args = parser.parse_args(argv)
    names = [p.strip() for p in args.policy.split(",") if p.strip()]
    if args.base_url:
        OPENAI_ENDPOINT["base_url"] = args.base_url
    OPENAI_ENDPOINT.update(
        timeout=args.request_timeout,
        max_retries=args.max_retries,
        max_new_tokens=args.max_new_tokens,
        chat_template_kwargs=args.chat_template_kwargs,
    )
    rule = evaluate("rule", args.split, args.n, args.difficulty, workers=args.workers)
    add_rule_win(rule, rule)
    results = [
        rule
        if name == "rule"
        else evaluate(name, args.split, args.n, args.difficulty, args.k, args.workers, baseline=rule)
        for name in names
    ]
    print(markdown(results))
    for r in results:
        if "usage" in r["metrics"]:
            u = r["metrics"]["usage"]
            print(
                f"{r['policy']}: {u['requests']} requests, prompt tokens {u['prompt_tokens']}, "
                f"completion tokens {u['completion_tokens']} (endpoint-reported), "
                f"{u['endpoint_errors']} turns ended by a 5xx after retries"
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {"benchmark_version": BENCHMARK_VERSION, "prompt_version": PROMPT_VERSION, "results": results}, indent=1
            )
        )


if __name__ == "__main__":
    main()
