"""Collect episodes of any policy as a dataset, in OpenEnv's rollout collect format.

    python -m training.collect --policy rule --split train -n 256 --out data/rule-train
    python -m training.collect --policy hf:runs/qwen3 --split heldout_seeds -n 100 --difficulty hard --out data/qwen3

Writes `DIR/results.jsonl`, one `openenv.core.harness.collect.EpisodeRecord` per
line, and `DIR/metadata.json` (a sidecar: policy, split, counts, benchmark
version). A record holds the conversation as `messages`, exactly as TRL's tool
loop shows it to a model (the observation appended to the user prompt, each call
an assistant `tool_calls` turn, each result a `tool` turn, errors as
`{'error': ...}`), the tool calls (`tool_trace`), the verified reward with its
breakdown, the metrics and the task's identity (with `benchmark_version`). An
interrupted run resumes: episodes already on disk are skipped, and a directory
holding another benchmark version's episodes is refused (versions are never
mixed). Load with `datasets.load_dataset("json", data_files=...)`; the
`messages` column is what TRL's `SFTTrainer` takes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from openenv.core.harness.collect import EpisodeRecord, RolloutSerializer
from tqdm import tqdm

from releaseops_arena import rewards
from releaseops_arena.baselines import play
from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.splits import SPLITS, task_scenario

from .evaluate import make_policy
from releaseops_arena.brief import with_board


def conversation(run: dict) -> list[dict]:
    """One played episode as chat messages, formatted the way TRL's tool loop formats them."""
    messages = with_board(run["observation"])
    for step in run["steps"]:
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": step["tool"], "arguments": step["arguments"]}}]})
        content = step["result"] if "result" in step else str({"error": step["error"]})
        messages.append({"role": "tool", "name": step["tool"], "content": content})
    return messages


def reward_breakdown(metrics: dict) -> dict[str, float]:
    """The verified return by part of the reward table (the server's rubric tree); the parts sum to it."""
    return rewards.breakdown({"outcome": metrics["outcome"], "budget_used": metrics["budget_used"],
                              "invalid_actions": metrics["invalid_actions"],
                              "discoveries_paid": metrics["discoveries"]})  # all paid once the episode is over


def episode_id(policy: str, split: str, difficulty: str | None, index: int) -> str:
    return f"{policy}|{split}|{difficulty or 'all'}|{index}"


def to_record(run: dict, eid: str, split: str, index: int) -> EpisodeRecord:
    metrics = run["metrics"]
    trace = [{"tool_name": s["tool"], "arguments": dict(s["arguments"]),
              "result": {"data": s.get("result"), "done": False, "metadata": {}, "error": s.get("error")}}
             for s in run["steps"]]
    if trace and metrics.get("terminal_reason") != "abandoned":  # else the policy stopped after its last call
        trace[-1]["result"]["done"] = True
    breakdown = reward_breakdown(metrics)
    assert abs(sum(breakdown.values()) - run["return"]) < 1e-6, (breakdown, run["return"])
    return EpisodeRecord(
        episode_id=eid, messages=conversation(run), reward=run["return"], done=True, tool_trace=trace,
        metrics=metrics, verify_metrics={"reward_breakdown": breakdown}, artifacts={},
        task={"split": split, "index": index, **run["scenario"], "benchmark_version": BENCHMARK_VERSION},
        extra={"policy": run["policy"]})


def collect(policy: str, split: str, n: int, out: Path, difficulty: str | None = None,
            progress: bool = True) -> dict:
    """Play `n` scenarios of `split` with `policy` into `out`; returns counts. Resumes a partial run."""
    serializer = RolloutSerializer(out)
    check_version(serializer)
    done = serializer.collected_episode_ids()
    todo = [(i, task_scenario(split, i, difficulty)) for i in range(n)
            if episode_id(policy, split, difficulty, i) not in done]
    for i, scenario in tqdm(todo, desc=f"collect {policy}", disable=not progress):
        run = play(make_policy(policy), scenario, rng_seed=i * 7919)
        serializer.write_episode(to_record(run, episode_id(policy, split, difficulty, i), split, i))
    total = len(serializer.collected_episode_ids())
    serializer.write_metadata({"policy": policy, "split": split, "difficulty": difficulty or "all", "n": n,
                               "episodes": total, "format": "openenv.core.harness.collect.EpisodeRecord",
                               "benchmark_version": BENCHMARK_VERSION})
    return {"collected": len(todo), "skipped": n - len(todo), "episodes": total}


def check_version(serializer: RolloutSerializer) -> None:
    """Refuse to resume into a directory collected under another benchmark version (or before
    versions were stamped): its episodes were played in a different world."""
    if not serializer.results_path.exists():
        return
    if serializer.metadata_path.exists():
        stored = json.loads(serializer.metadata_path.read_text()).get("benchmark_version")
    else:  # interrupted before its first metadata: ask its first record
        with serializer.results_path.open() as lines:
            first = next((line for line in lines if line.strip()), None)
        if first is None:
            return
        stored = (json.loads(first).get("task") or {}).get("benchmark_version")
    if stored != BENCHMARK_VERSION:
        raise ValueError(f"{serializer.output_dir} holds episodes of benchmark version {stored or 'unversioned'}, "
                         f"not {BENCHMARK_VERSION}: collect into a new directory (versions are never mixed)")


def load_conversations(out: Path, only_safe: bool = True) -> list[list[dict]]:
    """The `messages` of a collected dataset (by default only episodes that shipped safely)."""
    from datasets import load_dataset

    rows = load_dataset("json", data_files=str(Path(out) / "results.jsonl"), split="train")
    return [_clean(row["messages"]) for row in rows
            if not only_safe or row["metrics"]["outcome"] == "safe_ship"]


def _clean(messages: list[dict]) -> list[dict]:
    # Arrow fills the keys a message lacks with None (a user turn gets `tool_calls: None`); a chat
    # template reads a present key, so the keys each role never has are dropped again.
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        for call in m.get("tool_calls", []):
            call["function"]["arguments"] = {k: v for k, v in call["function"]["arguments"].items() if v is not None}
        out.append(m)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", required=True, help="a baseline name, hf:<checkpoint> or structured:<weights.pt>")
    parser.add_argument("--split", default="train", choices=list(SPLITS))
    parser.add_argument("-n", type=int, default=128)
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard"], default=None)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    result = collect(args.policy, args.split, args.n, args.out, args.difficulty)
    print(f"{result['collected']} collected, {result['skipped']} already on disk, {result['episodes']} in {args.out}")


if __name__ == "__main__":
    main()
