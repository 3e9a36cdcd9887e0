"""Where a server step's CPU goes: in-situ timers and cProfile inside the running servers, and the
step pipeline in-process.

* Timers (`BENCH_TIMERS`, see `tools/bench/_uvicorn_wrap.py`): thread CPU of env.reset,
  env.step and OpenEnv's (de)serialization per step, against the process's CPU per
  step. Both servers run with `gc.freeze()` so that full-collection pauses do not
  land at random in one of the timed pieces.
* Profile (`BENCH_PROFILE_OUT`): cProfile with a per-thread CPU clock while 16
  sessions replay episodes, shares by component (`tools.bench.profiles`).
* Pipeline: parse, env.step, serialize_observation and the response JSON per step,
  ours vs the text echo and the bare echo, without the network or the executor hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pstats
import signal
import tempfile
import time
from pathlib import Path

from tools.bench import profiles
from tools.bench.common import bench_server, med
from tools.bench.replay import ECHO, OURS, TEXT_ECHO, Replay, drive, encode

WRAP = "tools.bench._uvicorn_wrap"


async def server_profile(
    replays: list[Replay], seconds: float, server_cpus: set[int], sessions: int = 16, app: str = OURS
) -> dict:
    echo = app == ECHO
    with tempfile.TemporaryDirectory(prefix="releaseops_bench_prof_") as tmp:
        out = Path(tmp) / "server.prof"
        with bench_server(app, cpus=server_cpus, module=WRAP, env={"BENCH_PROFILE_OUT": str(out)}) as (url, pid):
            await drive(url, pid, 4, replays, 0.2, 0.5, echo=echo)  # warm-up, not profiled (its threads end)
            await asyncio.sleep(0.5)
            os.kill(pid, signal.SIGUSR1)
            res = await drive(url, pid, sessions, replays, 0.0, seconds, echo=echo)
            os.kill(pid, signal.SIGUSR2)
            await asyncio.sleep(1.5)  # the sessions' executor threads exit and keep their stats
        threads_file = Path(str(out) + ".threads")
        deadline = time.monotonic() + 5.0
        while not threads_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        stats = pstats.Stats(str(out))
        summary = {
            "total_cpu_s": stats.total_tt,
            **profiles.top(stats, 20),
            "categories": profiles.by_category(stats),
            "threads_merged": int(threads_file.read_text()),
        }
    summary.pop("total_s")
    summary["steps_profiled"] = res["steps_in_window"]
    summary["sessions"] = sessions
    summary["cpu_us_per_step"] = summary["total_cpu_s"] / max(1, summary["steps_profiled"]) * 1e6
    summary["category_us_per_step"] = {k: v * summary["cpu_us_per_step"] for k, v in summary["categories"].items()}
    return summary


async def in_situ_timers(replays: list[Replay], seconds: float, server_cpus: set[int], sessions: int = 16) -> dict:
    out: dict = {}
    for name, app in (("ours", OURS), ("text_echo", TEXT_ECHO), ("echo", ECHO)):
        with tempfile.TemporaryDirectory(prefix="releaseops_bench_timers_") as tmp:
            path = Path(tmp) / "timers.json"
            with bench_server(
                app, cpus=server_cpus, module=WRAP, env={"BENCH_TIMERS": str(path), "BENCH_GC_FREEZE": "1"}
            ) as (url, pid):
                await drive(url, pid, 4, replays, 0.2, 0.5, echo=name == "echo")
                res = await drive(url, pid, sessions, replays, 0.5, seconds, echo=name == "echo")
            timers = json.loads(path.read_text())  # written when the server stopped
        steps = timers["env.step"]["calls"]
        per_step = {k: v["cpu_s"] / steps * 1e6 for k, v in timers.items()}
        per_call = {k: v["cpu_s"] / v["calls"] * 1e6 for k, v in timers.items()}
        timed = sum(per_step.values())
        out[name] = {
            "server_cpu_us_per_step": res["server_cpu_us_per_step"],
            "us_per_step": per_step,
            "us_per_call": per_call,
            "timed_us_per_step": timed,
            "rest_us_per_step": res["server_cpu_us_per_step"] - timed,
            "mean_reply_bytes": res["mean_reply_bytes"],
            "throughput": res["throughput"],
            "mismatches": res["mismatches"] + res["errors"],
        }
    out["sessions"] = sessions
    return out


def pipeline(episodes: list[dict], repeats: int) -> dict:
    """The server's per-step CPU path in-process (no network, no executor hop), ours vs both echoes:
    parse (json.loads + WSStepMessage + deserialize_action), env.step, serialize_observation,
    WSObservationResponse(...).model_dump_json(); and the engine's own step for reference."""
    from client.models import ReleaseOpsAction
    from server.releaseops_environment import ReleaseOpsEnvironment
    from tools.bench.echo_app import EchoAction, EchoEnvironment
    from tools.bench.text_echo_app import TextEchoEnvironment, texts_of

    texts = texts_of(episodes)
    envs = {
        "ours": (ReleaseOpsEnvironment, ReleaseOpsAction),
        "text_echo": (lambda: TextEchoEnvironment(texts), EchoAction),
        "echo": (EchoEnvironment, EchoAction),
    }
    runs = []
    for _ in range(repeats):
        runs.append(
            {
                **{name: _pipeline_once(episodes, *env) for name, env in envs.items()},
                "engine_step_us": _engine_step_us(episodes),
            }
        )
    return {
        **{name: {k: med([r[name][k] for r in runs]) for k in runs[0][name]} for name in envs},
        "engine_step_us": med([r["engine_step_us"] for r in runs]),
        "repeats": repeats,
    }


def _pipeline_once(episodes: list[dict], env_cls, action_cls) -> dict:
    from openenv.core.env_server.serialization import deserialize_action, serialize_observation
    from openenv.core.env_server.types import WSObservationResponse, WSStepMessage

    pc = time.perf_counter_ns
    env = env_cls()
    parse = step = ser = resp = n = size = 0
    done_sizes, done_metadata = [], []
    for ep, rep in zip(episodes, encode(episodes)):
        env.reset(**ep["scenario"])
        for raw in rep.steps:
            t0 = pc()
            msg = WSStepMessage(**json.loads(raw))
            action = deserialize_action(msg.data, action_cls)
            t1 = pc()
            obs = env.step(action)
            t2 = pc()
            data = serialize_observation(obs)
            t3 = pc()
            text = WSObservationResponse(data=data).model_dump_json()
            t4 = pc()
            parse += t1 - t0
            step += t2 - t1
            ser += t3 - t2
            resp += t4 - t3
            size += len(text.encode())
            n += 1
            if obs.done:  # the episode's last reply, with its metadata
                done_sizes.append(len(text.encode()))
                done_metadata.append(len(json.dumps(obs.metadata, separators=(",", ":")).encode()))
    out = {
        "parse_us": parse / n / 1e3,
        "env_step_us": step / n / 1e3,
        "serialize_us": ser / n / 1e3,
        "response_json_us": resp / n / 1e3,
        "total_us": (parse + step + ser + resp) / n / 1e3,
        "mean_response_bytes": size / n,
    }
    if done_sizes:
        out.update(done_response_bytes=med(done_sizes), done_metadata_bytes=med(done_metadata))
    return out


def _engine_step_us(episodes: list[dict]) -> float:
    from releaseops_arena.tool_env import ReleaseOpsToolEnv

    pc = time.perf_counter_ns
    env = ReleaseOpsToolEnv()
    total = n = 0
    for ep in episodes:
        env.reset(**ep["scenario"])
        for tool, args in ep["calls"]:
            fn = getattr(env, tool)
            t0 = pc()
            with contextlib.suppress(ValueError):
                fn(**args)
            total += pc() - t0
            n += 1
    return total / n / 1e3
