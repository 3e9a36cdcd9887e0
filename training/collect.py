"""Collect episodes of any policy as an SFT-ready dataset, in OpenEnv's rollout collect format.

    python -m training.collect --policy rule --split train -n 256 --out data/rule-train
    python -m training.collect --policy hf:runs/qwen3 --split heldout_seeds -n 100 --difficulty hard --out data/qwen3
    python -m training.collect --policy planner -n 256 --difficulty easy --out data/planner-easy --push-to-hub USER/NAME

Writes `DIR/results.jsonl`, one `openenv.core.harness.collect.EpisodeRecord` per
line (plus a `tools` column), `DIR/metadata.json` (a sidecar: policy, split,
counts, benchmark and prompt versions) and `DIR/README.md` (a dataset card whose
front matter makes `results.jsonl` the only data file). A record holds the
conversation as `messages`, exactly as TRL's GRPO tool loop shows it to a model:
the brief as the system message, the board appended to the user turn, each call
an assistant `tool_calls` turn, each result a `tool` turn (errors as
`{'error': ...}`), and the closing assistant turn without a call that ends the
loop (`CLOSING_TURN`). `tools` holds the seven tools' JSON schemas in the order
TRL derives them from `ReleaseOpsToolEnv` (`trl_tool_names`). Also: the tool calls
(`tool_trace`), the verified reward with its breakdown, the metrics and the
task's identity (with `benchmark_version` and `prompt_version`). An interrupted
run resumes: episodes already on disk are skipped, and a directory holding
another benchmark version's or another brief's episodes is refused (versions
are never mixed).

Load with `datasets.load_dataset("json", data_files="DIR/results.jsonl", split="train")`
(`load_dataset(DIR)` reads the card too, but `datasets` 5.2 caches a local folder by
its name, not its contents: a folder collected again would load stale rows unless
`download_mode="force_redownload"`): TRL's `SFTTrainer` takes it
as it is, rendering each `messages` with its `tools` into the same tokens the GRPO
tool loop builds for that episode (`tests/train/test_sft_ready.py`). `--push-to-hub`
uploads DIR with OpenEnv's `push_to_hf_hub` (this dataset card, not OpenEnv's
generic one).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

from openenv.core.harness.collect import EpisodeRecord, RolloutSerializer
from tqdm import tqdm

from releaseops_arena import rewards
from releaseops_arena.brief import PROMPT_VERSION, with_board
from releaseops_arena.catalog import BENCHMARK_VERSION
from releaseops_arena.policies import play
from releaseops_arena.splits import SPLITS, task_scenario

from .evaluate import make_policy
from .tool_calls import CLOSING_TURN, tools_column, trl_tool_names

# The turn that ends an episode's conversation. TRL's tool loop (`GRPOTrainer._tool_call_loop`) keeps
# generating while the parsed completion has tool calls; the episode's completion ends with the model's
# first assistant turn without one, after the last tool result. A played episode stops at its last tool
# result (the engine's end: the ship, the deadline, or the policy stopping), so this turn is added: a
# short text rather than an empty one, so that it is a visible, learnable stop (an empty turn renders
# as bare template markup, and some pipelines drop empty messages). A model warmed up without it keeps
# calling tools after the release has shipped, and every such call fails against a finished episode.
DATASET_LICENSE = "apache-2.0"  # the project's (pyproject.toml); the episodes are the engine's output
DATASET_TAGS = ["openenv", "releaseops-arena", "tool-calling", "agents", "sft", "trl", "synthetic"]


@dataclass
class ToolEpisodeRecord(EpisodeRecord):
    """OpenEnv's episode record with the tools the conversation was played with: TRL's `SFTTrainer`
    passes a row's `tools` to the chat template, so a row renders the tool schemas GRPO renders."""

    tools: list[dict] = field(default_factory=tools_column)


def conversation(run: dict) -> list[dict]:
    """One played episode as chat messages, formatted the way TRL's tool loop formats them,
    closed by `CLOSING_TURN`."""
    messages = with_board(run["observation"])
    for step in run["steps"]:
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": step["tool"], "arguments": step["arguments"]}}
                ],
            }
        )
        content = step["result"] if "result" in step else str({"error": step["error"]})
        messages.append({"role": "tool", "name": step["tool"], "content": content})
    messages.append(dict(CLOSING_TURN))
    return messages


def reward_breakdown(metrics: dict) -> dict[str, float]:
    """The verified return by part of the reward table (the server's rubric tree); the parts sum to it."""
    return rewards.breakdown(
        {
            "outcome": metrics["outcome"],
            "budget_used": metrics["budget_used"],
            "invalid_actions": metrics["invalid_actions"],
            "discoveries_paid": metrics["discoveries"],
        }
    )  # all paid once the episode is over


def episode_id(policy: str, split: str, difficulty: str | None, index: int) -> str:
    return f"{policy}|{split}|{difficulty or 'all'}|{index}"


def versions() -> dict[str, str]:
    """What a collected episode was played under: the world and the brief."""
    return {"benchmark_version": BENCHMARK_VERSION, "prompt_version": PROMPT_VERSION}


def to_record(run: dict, eid: str, split: str, index: int) -> ToolEpisodeRecord:
    metrics = run["metrics"]
    trace = [
        {
            "tool_name": s["tool"],
            "arguments": dict(s["arguments"]),
            "result": {"data": s.get("result"), "done": False, "metadata": {}, "error": s.get("error")},
        }
        for s in run["steps"]
    ]
    if trace and metrics.get("terminal_reason") != "abandoned":  # else the policy stopped after its last call
        trace[-1]["result"]["done"] = True
    breakdown = reward_breakdown(metrics)
    assert abs(sum(breakdown.values()) - run["return"]) < 1e-6, (breakdown, run["return"])
    return ToolEpisodeRecord(
        episode_id=eid,
        messages=conversation(run),
        reward=run["return"],
        done=True,
        tool_trace=trace,
        metrics=metrics,
        verify_metrics={"reward_breakdown": breakdown},
        artifacts={},
        task={"split": split, "index": index, **run["scenario"], **versions()},
        extra={"policy": run["policy"]},
    )


def collect(policy: str, split: str, n: int, out: Path, difficulty: str | None = None, progress: bool = True) -> dict:
    """Play `n` scenarios of `split` with `policy` into `out`; returns counts. Resumes a partial run.
    Writes the dataset card too (`dataset_card`)."""
    serializer = RolloutSerializer(out)
    check_version(serializer)
    done = serializer.collected_episode_ids()
    todo = [
        (i, task_scenario(split, i, difficulty))
        for i in range(n)
        if episode_id(policy, split, difficulty, i) not in done
    ]
    for i, scenario in tqdm(todo, desc=f"collect {policy}", disable=not progress):
        run = play(make_policy(policy), scenario, rng_seed=i * 7919)
        serializer.write_episode(to_record(run, episode_id(policy, split, difficulty, i), split, i))
    total = len(serializer.collected_episode_ids())
    serializer.write_metadata(
        {
            "policy": policy,
            "split": split,
            "difficulty": difficulty or "all",
            "n": n,
            "episodes": total,
            "format": "openenv.core.harness.collect.EpisodeRecord",
            **versions(),
            "tools": trl_tool_names(),
        }
    )
    hub_folder(out)
    return {"collected": len(todo), "skipped": n - len(todo), "episodes": total}


def check_version(serializer: RolloutSerializer) -> None:
    """Refuse to resume into a directory collected under another benchmark version or another brief
    (or before versions were stamped): its episodes were played in a different world, or show a
    model a different prompt."""
    if not serializer.results_path.exists():
        return
    if serializer.metadata_path.exists():
        stored = json.loads(serializer.metadata_path.read_text())
    else:  # interrupted before its first metadata: ask its first record
        with serializer.results_path.open() as lines:
            first = next((line for line in lines if line.strip()), None)
        if first is None:
            return
        stored = json.loads(first).get("task") or {}
    for key, current in versions().items():
        if stored.get(key) != current:
            what = key.replace("_", " ")
            raise ValueError(
                f"{serializer.output_dir} holds episodes of {what} {stored.get(key) or 'unversioned'}, "
                f"not {current}: collect into a new directory (versions are never mixed)"
            )


def load_conversations(out: Path, only_safe: bool = True) -> list[list[dict]]:
    """The `messages` of a collected dataset (by default only episodes that shipped safely)."""
    from datasets import load_dataset

    rows = load_dataset("json", data_files=str(Path(out) / "results.jsonl"), split="train")
    return [_clean(row["messages"]) for row in rows if not only_safe or row["metrics"]["outcome"] == "safe_ship"]


def _clean(messages: list[dict]) -> list[dict]:
    # An Arrow struct column (`Dataset.from_list`, older `datasets`) fills the keys a message lacks with
    # None (a user turn gets `tool_calls: None`); a chat template reads a present key, so the keys each
    # role never has are dropped again. (`datasets` >= 5 loads JSON messages as `Json`, unchanged.)
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        for call in m.get("tool_calls", []):
            call["function"]["arguments"] = {k: v for k, v in call["function"]["arguments"].items() if v is not None}
        out.append(m)
    return out


# ------------------------------------------------------------------ the Hub


def dataset_card(out: Path, repo_id: str | None = None) -> str:
    """The README.md of a collected dataset: OpenEnv's card (`build_dataset_readme`: the episode count,
    the run metadata, the record schema) under this project's front matter (results.jsonl as the only
    data file, as OpenEnv's; the license, tags, benchmark and prompt versions), with the tools and how
    to train on it."""
    from huggingface_hub import DatasetCardData
    from openenv.core.harness.collect import build_dataset_readme

    meta = json.loads((Path(out) / "metadata.json").read_text()) if (Path(out) / "metadata.json").exists() else {}
    front = DatasetCardData(
        license=DATASET_LICENSE,
        language=["en"],
        pretty_name="ReleaseOps Arena episodes"
        + (f" ({meta['policy']}, {meta['split']}, {meta['difficulty']})" if "policy" in meta else ""),
        task_categories=["text-generation"],
        tags=DATASET_TAGS,
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": "results.jsonl"}]}],
        **versions(),
    )
    openenv_card = build_dataset_readme(Path(out))
    body = openenv_card.split("---\n", 2)[2].strip()  # OpenEnv's front matter is replaced by ours
    body = body.replace("(`openenv collect`)", "(its rollout format, written by `python -m training.collect`)")
    if repo_id:
        body = body.replace("<user>/<repo>", repo_id)
    tools = "\n".join(
        f"| `{s['function']['name']}` | {', '.join(s['function']['parameters']['properties'])} | "
        f"{s['function']['description']} |"
        for s in tools_column()
    )
    # Once pushed, by its repo id; locally by its data file (`datasets` caches a folder loaded by path by
    # its name, not its contents, so a folder collected again would load stale rows).
    source = f'"{repo_id}"' if repo_id else f'"json", data_files="{Path(out) / "results.jsonl"}"'
    extra = f"""
## ReleaseOps Arena

Episodes of ReleaseOps Arena (an OpenEnv environment) played by the engine: benchmark version
`{BENCHMARK_VERSION}`, prompt version `{PROMPT_VERSION}` (the system message is the task brief,
`releaseops_arena.brief`). Datasets of different versions are never mixed.

- `messages`: the conversation exactly as TRL's GRPO tool loop shows it to a model (the brief, the
  board appended to the user turn, one assistant `tool_calls` turn per call, one `tool` turn per result,
  errors as `{{'error': ...}}`), closed by the assistant turn without a call that ends the loop
  (`{CLOSING_TURN["content"]}`).
- `tools`: the JSON schemas of the seven tools, in the order TRL derives them from `ReleaseOpsToolEnv`.

| tool | arguments | description |
| --- | --- | --- |
{tools}

## Supervised fine-tuning

```python
from datasets import load_dataset
from trl import SFTConfig, SFTTrainer

dataset = load_dataset({source}, split="train")
dataset = dataset.filter(lambda row: row["metrics"]["outcome"] == "safe_ship")
trainer = SFTTrainer(model="Qwen/Qwen3-0.6B", train_dataset=dataset,
                     args=SFTConfig(assistant_only_loss=True))
trainer.train()
```
"""
    return f"---\n{front.to_yaml()}\n---\n\n{body}\n{extra}"


def hub_folder(out: Path, repo_id: str | None = None) -> Path:
    """The folder `--push-to-hub` uploads (the collect directory itself: results.jsonl, metadata.json),
    with its dataset card written as README.md; `datasets.load_dataset(folder)` loads it (the card names
    the data file)."""
    out = Path(out)
    if not (out / "results.jsonl").exists():
        raise FileNotFoundError(f"no results.jsonl in {out}: collect first")
    (out / "README.md").write_text(dataset_card(out, repo_id), encoding="utf-8")
    return out


def push(out: Path, repo_id: str, private: bool = False, token: str | None = None) -> str:
    """Upload a collected dataset with OpenEnv's `push_to_hf_hub`; returns its URL. OpenEnv writes its
    own generic card (`build_dataset_readme`) over README.md just before the upload; for this call it
    writes ours (`dataset_card`, which keeps OpenEnv's card as its body)."""
    from unittest import mock

    from openenv.core.harness import collect as harness

    folder = hub_folder(out, repo_id)
    card = (folder / "README.md").read_text(encoding="utf-8")
    with mock.patch.object(harness, "build_dataset_readme", lambda _output_dir: card):
        message = f"ReleaseOps Arena episodes ({BENCHMARK_VERSION}, {PROMPT_VERSION})"
        return harness.push_to_hf_hub(folder, repo_id, private=private, token=token, commit_message=message)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", required=True, help="a reference policy's name, hf:<checkpoint> or openai:<model>")
    parser.add_argument("--split", default="train", choices=list(SPLITS))
    parser.add_argument("-n", type=int, default=128)
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard"], default=None)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "--push-to-hub",
        metavar="REPO",
        default=None,
        help="then upload DIR as the Hugging Face dataset REPO (user/name)",
    )
    parser.add_argument("--private", action="store_true", help="with --push-to-hub: create the repo private")
    args = parser.parse_args(argv)
    result = collect(args.policy, args.split, args.n, args.out, args.difficulty)
    print(f"{result['collected']} collected, {result['skipped']} already on disk, {result['episodes']} in {args.out}")
    if args.push_to_hub:
        print(push(args.out, args.push_to_hub, private=args.private))


if __name__ == "__main__":
    main()
