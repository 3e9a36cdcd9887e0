"""What a model reads: characters and tokens of observations, tool results and whole episodes.

    PYTHONPATH=. .venv/bin/python -m tools.bench.tokens [--quick] [--json out.json]

Per difficulty, `-n` held-out-seed scenarios (`splits.scenarios("heldout_seeds",
n, difficulty)`, the families and mixes cycling) are played by the `oracle` and
the `rule` baselines in-process. Measured, in characters and in tokens of the
tiny test tokenizer (`training.tiny_model.build_tokenizer()`: a 2,048-entry
byte-level BPE trained on this environment's own text, so its counts are lower
than a general-purpose tokenizer's would be):

* the initial observation (what `reset` returns);
* every tool result, whole, and without `"next"` (results that end a phase carry
  the next phase's clock and proposals under `"next"`);
* whole transcripts: the initial observation, plus for every call the call as
  compact JSON `{"name": tool, "arguments": {...}}` and the result (or error)
  string. Chat-template markup and the tool schemas are not included; the
  schemas' own size is reported separately.
"""

from __future__ import annotations

import argparse
import json
import time

from releaseops_arena.catalog import DIFFICULTIES
from releaseops_arena.policies import POLICIES, play
from releaseops_arena.rendering import dumps
from releaseops_arena.splits import scenarios
from releaseops_arena.tools import tool_schemas
from tools.bench.common import summary, write_json
from tools.bench.goals import RESULT_CHARS


def without_next(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and "next" in data:
        data = {k: v for k, v in data.items() if k != "next"}
        return dumps(data)
    return text


def _int_summary(values: list[int]) -> dict:
    s = summary(values)
    return {k: (round(v, 1) if isinstance(v, float) else v) for k, v in s.items()}


def run(n: int) -> dict:
    t0 = time.perf_counter()
    from training.tiny_model import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer_s = time.perf_counter() - t0
    backend = tokenizer.backend_tokenizer

    def count(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False)] if texts else []

    schemas = json.dumps(tool_schemas())
    out: dict = {
        "episodes_per_difficulty": n,
        "result_limit_chars": RESULT_CHARS,
        "tokenizer": {"vocab": len(tokenizer), "build_s": tokenizer_s},
        "tool_schemas": {"chars": len(schemas), "tokens": count([schemas])[0]},
        "by_difficulty": {},
    }
    for difficulty in DIFFICULTIES:
        scen = list(scenarios("heldout_seeds", n, difficulty=difficulty))
        initial: list[str] = []
        per_policy: dict = {}
        for policy in ("oracle", "rule"):
            results_whole, results_bare, transcripts, tool_of, calls = [], [], [], [], []
            outcomes: dict[str, int] = {}
            for i, scenario in enumerate(scen):
                run_ = play(POLICIES[policy](), scenario, rng_seed=i)
                if policy == "oracle":
                    initial.append(run_["observation"])
                parts = [run_["observation"]]
                for step in run_["steps"]:
                    text = step.get("result") or step.get("error") or ""
                    parts.append(
                        json.dumps({"name": step["tool"], "arguments": step["arguments"]}, separators=(",", ":"))
                    )
                    parts.append(text)
                    results_whole.append(text)
                    results_bare.append(without_next(text))
                    tool_of.append(step["tool"])
                transcripts.append("".join(parts))
                calls.append(len(run_["steps"]))
                outcomes[run_["metrics"]["outcome"]] = outcomes.get(run_["metrics"]["outcome"], 0) + 1
            whole_chars = [len(t) for t in results_whole]
            bare_chars = [len(t) for t in results_bare]
            largest = max(range(len(results_bare)), key=lambda k: bare_chars[k]) if results_bare else None
            per_policy[policy] = {
                "outcomes": outcomes,
                "calls_per_episode": _int_summary(calls),
                "results": len(results_whole),
                "results_with_next": sum(1 for a, b in zip(results_whole, results_bare) if a != b),
                "result_chars_whole": _int_summary(whole_chars),
                "result_chars_without_next": _int_summary(bare_chars),
                "result_tokens_whole": _int_summary(count(results_whole)),
                "result_tokens_without_next": _int_summary(count(results_bare)),
                "results_over_limit_whole": sum(1 for c in whole_chars if c > RESULT_CHARS),
                "results_over_limit_without_next": sum(1 for c in bare_chars if c > RESULT_CHARS),
                "largest_result_without_next": {
                    "tool": tool_of[largest],
                    "chars": bare_chars[largest],
                    "text": results_bare[largest],
                }
                if largest is not None
                else None,
                "transcript_chars": _int_summary([len(t) for t in transcripts]),
                "transcript_tokens": _int_summary(count(transcripts)),
            }
        out["by_difficulty"][difficulty] = {
            "initial_chars": _int_summary([len(t) for t in initial]),
            "initial_tokens": _int_summary(count(initial)),
            "policies": per_policy,
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Characters and tokens of observations, results and episodes.")
    parser.add_argument("--quick", action="store_true", help="60 episodes per difficulty instead of 300")
    parser.add_argument("-n", type=int, help="episodes per difficulty")
    parser.add_argument("--json", help="write the results here (default: stdout)")
    args = parser.parse_args(argv)
    result = run(args.n or (60 if args.quick else 300))
    write_json(args.json, result)


if __name__ == "__main__":
    main()
