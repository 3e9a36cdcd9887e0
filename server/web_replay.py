"""Replays of a trajectory file on the Watch tab (any policy's episodes, an LLM's included).

A collect file (`results.jsonl`, from `training.collect` or OpenEnv's `CollectRunner` over
`client.harness`) holds one OpenEnv `EpisodeRecord` per line: the task it played (`task`: a
scenario, family, seed, difficulty, archetype_mix and benchmark_version; or a task of a split,
`split`, `index` and an optional `difficulty`, replayed on the public draw), the calls it made
(`tool_trace`: tool_name, arguments, result.data or result.error), its reward and metrics, and
who played (`extra.policy`, when the collector names it). This module reads those
lines as plain JSON (the server never imports `training`), turns one record into
a Watch column, and checks it against the engine: the calls are played again on
the same task, so a column whose results differ from the file says so.
Uploads are capped (`MAX_BYTES`, also the upload route's limit: `web_ui.ReleaseBoard`). An operator may
also offer the collect files under a folder of the server (`RELEASEOPS_REPLAY_DIR`): the board lists them,
and a visitor picks from that list (never a path of their own).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from releaseops_arena import catalog
from releaseops_arena.episode import Episode
from releaseops_arena.rewards import MAX_TOOL_CALLS
from releaseops_arena.splits import task_scenario
from releaseops_arena.tools import TOOL_NAMES

MAX_BYTES = 5 * 1024 * 1024  # the published upload limit (docs/server.md)
MAX_EPISODES = 500  # records offered in the episode menu
SCENARIO_KEYS = ("family", "seed", "difficulty", "archetype_mix")
REPLAY_DIR_ENV = "RELEASEOPS_REPLAY_DIR"  # unset: uploads only
MAX_SERVER_FILES = 100


def server_files() -> tuple[Path | None, list[str], str]:
    """The operator's folder of collect files, the `*.jsonl` files under it (relative paths, sorted), and a note
    when the folder is set but unusable. Unset: (None, [], "")."""
    folder = os.environ.get(REPLAY_DIR_ENV, "").strip()
    if not folder:
        return None, [], ""
    root = Path(folder)
    if not root.is_dir():
        return None, [], f"{REPLAY_DIR_ENV}={folder} is not a folder on this server"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.jsonl") if p.is_file())[:MAX_SERVER_FILES]
    return root, files, "" if files else f"no .jsonl files under {REPLAY_DIR_ENV}"


def server_file(name: str) -> Path:
    """One of the listed files (a name not in the list is refused: a visitor never reads another path)."""
    root, files, note = server_files()
    if root is None or name not in files:
        raise ReplayError(note or f"{name!r} is not one of the files this server offers")
    return root / name


class ReplayError(ValueError):
    """A file the board cannot replay, with what is wrong in one sentence."""


def read_records(path: str | os.PathLike, max_bytes: int = MAX_BYTES) -> list[dict]:
    """The episode records of a collect file, checked; a ReplayError names the first problem."""
    size = os.path.getsize(path)
    if size > max_bytes:
        raise ReplayError(f"the file is {size / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.0f} MB (split it)")
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except UnicodeDecodeError:
        raise ReplayError("the file is not UTF-8 text: expected results.jsonl from training.collect") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise ReplayError(f"line {number} is not JSON: expected one episode record per line") from None
        records.append(check_record(record, number))
        if len(records) >= MAX_EPISODES:
            break
    if not records:
        raise ReplayError("the file holds no episodes: expected results.jsonl from training.collect")
    return records


def check_record(record, number: int) -> dict:
    if not isinstance(record, dict) or not isinstance(record.get("task"), dict):
        raise ReplayError(f"line {number} is not an episode record of training.collect or CollectRunner (no task)")
    task = record["task"]
    missing = [k for k in SCENARIO_KEYS if k not in task]
    if missing and "index" in task:  # a split's task (the harness's form): resolved on the public draw
        try:
            scenario(record)
        except (TypeError, ValueError) as exc:
            raise ReplayError(f"line {number}: {exc}") from None
    elif missing:
        raise ReplayError(f"line {number}: its task has no {', '.join(missing)} (nor a split and index)")
    version = task.get("benchmark_version")
    if version is not None and version != catalog.BENCHMARK_VERSION:
        raise ReplayError(
            f"line {number} was played under benchmark {version}; this server runs {catalog.BENCHMARK_VERSION} "
            "(results of different versions are never mixed)"
        )
    if not isinstance(record.get("metrics", {}), dict) or not isinstance(record.get("extra", {}), dict):
        raise ReplayError(f"line {number}: its metrics and extra must be objects")
    if not missing and (not isinstance(task.get("difficulty"), str) or type(task.get("seed")) is not int):
        raise ReplayError(f"line {number}: its task needs a difficulty name and an integer seed")
    trace = record.get("tool_trace")
    if not isinstance(trace, list) or not all(
        isinstance(c, dict) and isinstance(c.get("tool_name"), str) and isinstance(c.get("arguments", {}), dict)
        for c in trace
    ):
        raise ReplayError(f"line {number}: its tool_trace is not a list of calls")
    return record


def scenario(record: dict) -> dict:
    """The scenario a record played: its own, or its split task's on the public draw (a server's private
    draw is never replayed for a visitor's file)."""
    task = record["task"]
    if all(k in task for k in SCENARIO_KEYS):
        return {k: task[k] for k in SCENARIO_KEYS}
    if type(task.get("index")) is not int or not isinstance(task.get("split"), str):
        raise ValueError("its task needs a split name and an integer index")
    return task_scenario(task["split"], task["index"], task.get("difficulty"))


def policy_name(record: dict) -> str:
    extra = record.get("extra") if isinstance(record.get("extra"), dict) else {}
    return str(extra.get("policy") or ("harness model" if "messages" in record else "unknown policy"))


def episode_label(index: int, record: dict) -> str:
    """A menu label: who played which task, and how it ended."""
    task, metrics = record["task"], record.get("metrics") or {}
    where = f"{task.get('split', 'task')} #{task.get('index', index)}" if "split" in task else f"seed {task['seed']}"
    outcome = metrics.get("outcome") or (record.get("verify_metrics") or {}).get("outcome", "?")
    reward = record.get("reward")
    tail = f" · {reward:+.2f}" if isinstance(reward, (int, float)) else ""
    return f"{index + 1}. {policy_name(record)} · {where} · {scenario(record)['difficulty']} · {outcome}{tail}"


def replay_run(record: dict) -> dict:
    """The record as a Watch column, its calls played again through the engine on the same task.
    `matches` says whether the engine gave the same answers the file holds."""
    episode = Episode(**scenario(record))
    steps, matches = [], True
    for number, call in enumerate(record["tool_trace"], 1):
        tool, args = call["tool_name"], dict(call.get("arguments") or {})
        recorded = call.get("result") if isinstance(call.get("result"), dict) else {}
        if episode.done:
            matches = False
            break
        if tool not in TOOL_NAMES and "messages" in record:
            # The harness answered an unknown tool itself (no charge, as TRL does), and ended the
            # episode once every call was spent (client.harness): the same here.
            steps.append({"tool": tool, "arguments": args, "error": recorded.get("error") or "unknown tool"})
        else:
            result = episode.step(tool, args)
            if result.error is None:
                steps.append({"tool": tool, "arguments": args, "result": result.text})
                matches &= recorded.get("data") in (None, result.text)
            else:
                steps.append({"tool": tool, "arguments": args, "error": result.error})
                matches &= recorded.get("error") in (None, result.error)
        if number >= MAX_TOOL_CALLS and not episode.done and "messages" in record:
            episode.abandon()  # the harness session's own cap
    if not episode.done:
        episode.abandon()  # the policy stopped: scored as a missed deadline, as collect scores it
    return {
        "scenario": scenario(record),
        "policy": policy_name(record),
        "steps": steps,
        "metrics": episode.metrics(),
        "return": episode.episode_return,
        "label": f"your file: {policy_name(record)}",
        "role": "the episode from your trajectory file, played again through the engine",
        "sees": "the board only" if matches else "the board only (the engine's answers differ from the file's)",
        "matches": matches,
    }
