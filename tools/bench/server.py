"""Server benchmarks: WebSocket step throughput and latency against the echo floors, 1 worker
against 2, memory per live session, a memory soak, and where a server step's CPU goes.

    PYTHONPATH=. .venv/bin/python -m tools.bench.server [--quick] [--json out.json]
        [--only pipeline,load,variants,workers,memory,soak,timers,profile]

Method.

* Workload: the `rule` baseline plays held-out-seed episodes of every
  (family, difficulty) in-process; the recorded calls are replayed over `/ws`
  (`tools/bench/replay.py`), so our server plays real, valid episodes, and every reply
  is checked against what the in-process run saw.
* Servers: `python -m uvicorn server.app:app` (ours), `python -m uvicorn
  tools.bench.text_echo_app:app` (the text echo: answers each reset and step with
  exactly the text ours sends there, loaded at start-up from a file this
  process writes, no engine work) and `python -m uvicorn tools.bench.echo_app:app`
  (the bare echo: does nothing), all `create_app(max_concurrent_envs=64)`
  with the start-up heap frozen, on the served stack: server/limits.py's uvicorn
  flags (`tools/bench/launch.py:_stack_args`; permessage-deflate off) and
  `--log-level warning`, ENABLE_WEB_INTERFACE unset, pinned to the same core. The
  client (this process: asyncio + `websockets`, offering permessage-deflate as
  OpenEnv's client does, declined by the servers) is pinned to the other core, so
  the server process is what saturates; both processes' CPU use is reported. The workers piece
  alone puts the servers and the client on every core (`tools/bench/load.py`).
* Load and what-ifs (`tools/bench/load.py`), memory and the soak (`tools/bench/memory.py`),
  timers, profiles and the in-process pipeline (`tools/bench/cpu.py`): each module
  says how it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from server.limits import uvicorn_cli_args
from tools.bench import cpu, load, memory
from tools.bench.common import allowed_cpus, pin, record, workload_scenarios, write_json
from tools.bench.replay import ECHO, OURS, TEXT_ECHO, encode
from tools.bench.text_echo_app import TEXTS_ENV, write_texts

PARTS = ("pipeline", "load", "variants", "workers", "memory", "soak", "timers", "profile")


def split_cpus() -> tuple[set[int], set[int]]:
    """(server cores, client cores): the last allowed core serves, the first drives; one core does both.
    Call it before pinning this process (it reads what this process may use)."""
    cpus = allowed_cpus()
    if len(cpus) >= 2:
        return {cpus[-1]}, {cpus[0]}
    return set(cpus), set(cpus)


def run(quick: bool, only: set[str]) -> dict:
    episodes = record("rule", workload_scenarios(4 if quick else 10))
    with tempfile.TemporaryDirectory(prefix="releaseops_bench_texts_") as tmp:
        # every text echo this process starts inherits the path and loads these texts
        os.environ[TEXTS_ENV] = str(Path(tmp) / "texts.json")
        write_texts(episodes, Path(os.environ[TEXTS_ENV]))
        try:
            return _run(quick, only, episodes)
        finally:
            del os.environ[TEXTS_ENV]


# Rounds behind the ratio goals (load and variants). The ratios sit near their goals and move a few
# hundredths from run to run on this shared machine: five rounds make the median steadier (about 4
# more minutes), in both directions.
GOAL_ROUNDS = 5


def _run(quick: bool, only: set[str], episodes: list[dict]) -> dict:
    server_cpus, client_cpus = split_cpus()
    pinned = pin(client_cpus)
    replays = encode(episodes)
    window = {"warmup_s": 0.5 if quick else 1.0, "window_s": 2.0 if quick else 5.0, "server_cpus": server_cpus}
    out: dict = {
        "server_cpus": sorted(server_cpus),
        "client_cpus": pinned,
        "uvicorn_flags": uvicorn_cli_args(),
        "episodes": len(episodes),
        "steps_per_episode": sum(len(r.steps) for r in replays) / len(replays),
    }
    if "pipeline" in only:
        print("server: in-process step pipeline", flush=True)
        out["pipeline"] = cpu.pipeline(episodes, 3 if quick else 7)
    if "load" in only:
        print("server: load (ours, text echo, bare echo)", flush=True)
        out["load"] = asyncio.run(load.load(replays, rounds=2 if quick else GOAL_ROUNDS, **window))
    if "variants" in only:
        print("server: what-ifs at 64 sessions (as served, permessage-deflate on, floors on the loop)", flush=True)
        out["variants"] = asyncio.run(load.variants(replays, rounds=2 if quick else GOAL_ROUNDS, **window))
    if "workers" in only:
        print("server: 1 worker against 2 at 64 sessions, servers and client on every core", flush=True)
        out["workers"] = asyncio.run(
            load.workers(
                replays,
                rounds=2 if quick else 3,
                warmup_s=window["warmup_s"],
                window_s=window["window_s"],
                cpus=server_cpus | client_cpus,
            )
        )
        print(f"  2 workers / 1: {out['workers']['speedup']:.2f}x", flush=True)
    if "memory" in only:
        print("server: memory per live session", flush=True)
        out["memory"] = {
            "ours": asyncio.run(memory.memory_of(OURS, replays, server_cpus, echo=False)),
            "echo": asyncio.run(memory.memory_of(ECHO, replays, server_cpus, echo=True)),
        }
        print(f"  ours: {out['memory']['ours']}\n  echo: {out['memory']['echo']}", flush=True)
    if "soak" in only:
        seconds = 20.0 if quick else 120.0
        print(f"server: soak, 64 sessions for {seconds:.0f} s", flush=True)
        s = out["soak"] = asyncio.run(memory.soak(replays, seconds, server_cpus))
        print(
            f"  {s['episodes']} episodes, rss start {s['rss_start_mb']:.1f} end {s['rss_end_mb']:.1f} "
            f"max {s['rss_max_mb']:.1f} MB, second half {s['second_half_growth_mb']:+.2f} MB",
            flush=True,
        )
    if "timers" in only:
        print("server: in-situ timers (16 sessions)", flush=True)
        out["timers"] = asyncio.run(cpu.in_situ_timers(replays, 2.0 if quick else 4.0, server_cpus))
    if "profile" in only:
        print("server: profile", flush=True)
        seconds = 3.0 if quick else 6.0
        out["profile"] = asyncio.run(cpu.server_profile(replays, seconds, server_cpus))
        out["profile_text_echo"] = asyncio.run(cpu.server_profile(replays, seconds, server_cpus, app=TEXT_ECHO))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="OpenEnv WebSocket server benchmarks (ours vs the echo floors).")
    parser.add_argument("--quick", action="store_true", help="short windows, fewer rounds (~2.5 min)")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--json", help="write the results here (default: stdout)")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    if only - set(PARTS):
        parser.error(f"unknown part(s) {', '.join(sorted(only - set(PARTS)))}; valid: {', '.join(PARTS)}")
    write_json(args.json, run(args.quick, only))


if __name__ == "__main__":
    main()
