"""Server benchmarks: WebSocket step throughput and latency against an echo baseline,
memory per live session, a memory soak, and a CPU profile of the server step.

    PYTHONPATH=. .venv/bin/python -m bench.server [--quick] [--json out.json]
        [--only pipeline,load,variants,memory,soak,timers,profile]

Method.

* Workload: the `rule` baseline plays held-out-seed episodes of every
  (family, difficulty) in-process; the recorded calls are replayed over
  `/ws` (`{"type":"reset","data":scenario}` then `{"type":"step","data":
  {"tool_name":..., "arguments":...}}` per call), so our server plays real,
  valid episodes. Every reply is checked: ours must return exactly the text
  the in-process run saw, the echo server the tool name.
* Servers: `python -m uvicorn server.app:app` (ours) and `python -m uvicorn
  bench.echo_app:app` (an OpenEnv Environment that does nothing, same stack,
  `create_app(max_concurrent_envs=64)`), same uvicorn settings (defaults,
  `--log-level warning`), ENABLE_WEB_INTERFACE unset, both pinned to the same
  core. The client (this process: asyncio + `websockets`, compression left at
  its default as OpenEnv's client does) is pinned to the other core, so the
  server process is what saturates; both processes' CPU use is reported.
* Load: for each round and each concurrency (1, 16, 64 sessions), ours and the
  echo server are driven back to back (the order alternates per round) for a
  warm-up then a fixed window; throughput = step replies completed in the
  window / window; latency = send-to-reply time of the steps in the window.
  Ratios ours/echo are taken per round; medians over rounds are reported.
* Variants (64 sessions, ours vs echo again): full-GC logging, then `gc.freeze()`
  after import (`bench/_uvicorn_wrap.py`), then that without permessage-deflate.
* Memory: a fresh server of each kind; RSS (psutil) after a warm-up with no
  session open, with 16 and with 64 live sessions that have each reset an
  episode, and after they close. Soak: 64 sessions playing episodes back to back
  (reconnecting every 20 episodes) on our server, RSS sampled every second.
* Where the CPU goes: in-situ timers inside both running servers (thread CPU of
  env.reset, env.step and OpenEnv's (de)serialization per step, against the
  process's CPU per step); cProfile of both servers (per-thread CPU clock,
  `bench._uvicorn_wrap`) while 16 sessions replay episodes; and an in-process
  breakdown of the server step pipeline (parse, env.step, serialize, response
  JSON) for ours and the echo environment, without the network.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pstats
import re
import signal
import tempfile
import time
from dataclasses import dataclass, field

import psutil
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from bench.common import allowed_cpus, med, percentile, pin, record, uvicorn_server, workload_scenarios, write_json

OURS = "server.app:app"
ECHO = "bench.echo_app:app"
LEVELS = (1, 16, 64)
GOAL_THROUGHPUT_RATIO = 0.85
GOAL_P99_RATIO = 1.25
GOAL_MB_PER_SESSION = 1.0
RECONNECT_EVERY = 20  # soak: each session closes and reopens its socket every this many episodes


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/ws"


@dataclass
class Replay:
    """Pre-encoded messages of one recorded episode."""

    reset: str
    steps: list[str]
    tools: list[str]
    expected: list[str | None]


def encode(episodes: list[dict]) -> list[Replay]:
    out = []
    for ep in episodes:
        out.append(Replay(
            reset=json.dumps({"type": "reset", "data": ep["scenario"]}),
            steps=[json.dumps({"type": "step", "data": {"tool_name": t, "arguments": a}}) for t, a in ep["calls"]],
            tools=[t for t, _ in ep["calls"]],
            expected=[r if r is not None else e for r, e in zip(ep["results"], ep["errors"])],
        ))
    return out


@dataclass
class Clock:
    t_start: float = float("inf")
    t_end: float = float("inf")
    stop_at: float = float("inf")


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    steps_in_window: int = 0
    resets_in_window: int = 0
    steps: int = 0
    episodes: int = 0
    mismatches: int = 0
    errors: int = 0
    reply_bytes: int = 0
    replies: int = 0


async def open_session(base: str, first: str, attempts: int = 200, compression: str | None = "deflate"):
    """Connect and send the first reset; retry while the server is at capacity (a closed
    session's slot is freed asynchronously)."""
    last = None
    for _ in range(attempts):
        ws = None
        try:
            ws = await connect(ws_url(base), max_size=2**24, proxy=None, open_timeout=60, compression=compression)
            await ws.send(first)
            reply = json.loads(await ws.recv())
            if reply.get("type") == "error":
                last = reply["data"]
                await ws.close()
                await asyncio.sleep(0.05)
                continue
            return ws
        except (ConnectionClosed, OSError) as exc:
            last = exc
            if ws is not None:
                with contextlib.suppress(Exception):
                    await ws.close()
            await asyncio.sleep(0.05)
    raise RuntimeError(f"could not open a session on {base}: {last}")


async def close_session(ws) -> None:
    with contextlib.suppress(Exception):
        await ws.send('{"type":"close"}')
    with contextlib.suppress(Exception):
        await ws.close()


async def worker(idx: int, base: str, ws, replays: list[Replay], clock: Clock, tally: Tally, echo: bool,
                 reset_done: bool, reconnect_every: int | None = None, compression: str | None = "deflate") -> None:
    pc = time.perf_counter
    cursor = idx * 7
    played = 0
    try:
        while pc() < clock.stop_at:
            rep = replays[cursor % len(replays)]
            cursor += 1
            if reconnect_every and played and played % reconnect_every == 0:
                await close_session(ws)
                ws = await open_session(base, rep.reset, compression=compression)
                reset_done = True
            if not reset_done:
                await ws.send(rep.reset)
                reply = json.loads(await ws.recv())
                if reply.get("type") != "observation":
                    tally.errors += 1
                t = pc()
                if clock.t_start <= t <= clock.t_end:
                    tally.resets_in_window += 1
            reset_done = False
            finished = True
            for msg, tool, expected in zip(rep.steps, rep.tools, rep.expected):
                if pc() >= clock.stop_at:
                    finished = False
                    break
                t0 = pc()
                await ws.send(msg)
                raw = await ws.recv()
                t1 = pc()
                tally.steps += 1
                tally.replies += 1
                tally.reply_bytes += len(raw)
                if clock.t_start <= t1 <= clock.t_end:
                    tally.steps_in_window += 1
                    if t0 >= clock.t_start:
                        tally.latencies.append(t1 - t0)
                reply = json.loads(raw)
                if reply.get("type") != "observation":
                    tally.errors += 1
                    continue
                text = reply["data"]["observation"].get("text")
                if text != (tool if echo else expected):
                    tally.mismatches += 1
            if finished:
                played += 1
                tally.episodes += 1
    finally:
        await close_session(ws)


def _cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


async def drive(base: str, pid: int, sessions: int, replays: list[Replay], warmup_s: float, window_s: float,
                echo: bool, compression: str | None = "deflate") -> dict:
    """Open `sessions` sessions, replay for warm-up + window, close them; measure the window."""
    firsts = [replays[(i * 7) % len(replays)].reset for i in range(sessions)]
    sockets = await asyncio.gather(*(open_session(base, f, compression=compression) for f in firsts))
    clock, tally = Clock(), Tally()
    now = time.perf_counter()
    clock.t_start = now + warmup_s
    clock.t_end = clock.t_start + window_s
    clock.stop_at = clock.t_end + 0.05
    me = os.getpid()
    cpu = {}

    async def sample():
        await asyncio.sleep(max(0.0, clock.t_start - time.perf_counter()))
        cpu["server0"], cpu["client0"], cpu["t0"], cpu["wall0"] = _cpu(pid), _cpu(me), time.perf_counter(), time.time()
        await asyncio.sleep(max(0.0, clock.t_end - time.perf_counter()))
        cpu["server1"], cpu["client1"], cpu["t1"], cpu["wall1"] = _cpu(pid), _cpu(me), time.perf_counter(), time.time()

    await asyncio.gather(sample(), *(worker(i, base, ws, replays, clock, tally, echo, reset_done=True,
                                            compression=compression) for i, ws in enumerate(sockets)))
    span = cpu["t1"] - cpu["t0"]
    lat = tally.latencies
    return {
        "sessions": sessions,
        "throughput": tally.steps_in_window / window_s,
        "resets_per_s": tally.resets_in_window / window_s,
        "p50_ms": percentile(lat, 50) * 1e3 if lat else float("nan"),
        "p99_ms": percentile(lat, 99) * 1e3 if lat else float("nan"),
        "latency_samples": len(lat),
        "server_cpu": (cpu["server1"] - cpu["server0"]) / span,
        "server_cpu_us_per_step": (cpu["server1"] - cpu["server0"]) / max(1, tally.steps_in_window) * 1e6,
        "window_wall": [cpu["wall0"], cpu["wall1"]],
        "client_cpu": (cpu["client1"] - cpu["client0"]) / span,
        "mismatches": tally.mismatches,
        "errors": tally.errors,
        "mean_reply_bytes": tally.reply_bytes / max(1, tally.replies),
    }


async def load(replays: list[Replay], rounds: int, warmup_s: float, window_s: float, server_cpus: set[int]) -> dict:
    results: dict[str, dict[int, list[dict]]] = {"ours": {n: [] for n in LEVELS}, "echo": {n: [] for n in LEVELS}}
    with uvicorn_server(OURS, cpus=server_cpus) as (ours_url, ours_pid), \
            uvicorn_server(ECHO, cpus=server_cpus) as (echo_url, echo_pid):
        servers = {"ours": (ours_url, ours_pid), "echo": (echo_url, echo_pid)}
        for name, (url, pid) in servers.items():  # warm-up: imports, first sessions, caches
            await drive(url, pid, 4, replays, 0.2, 0.8, echo=name == "echo")
        for r in range(rounds):
            for n in LEVELS:
                order = ("ours", "echo") if (r + n) % 2 == 0 else ("echo", "ours")
                for name in order:
                    url, pid = servers[name]
                    res = await drive(url, pid, n, replays, warmup_s, window_s, echo=name == "echo")
                    results[name][n].append(res)
                    print(f"  round {r + 1} {name:4s} {n:2d} sessions: {res['throughput']:7.0f} steps/s "
                          f"p50 {res['p50_ms']:.2f} ms p99 {res['p99_ms']:.2f} ms server cpu "
                          f"{res['server_cpu']:.2f} client cpu {res['client_cpu']:.2f}", flush=True)
                    await asyncio.sleep(0.3)
    table = []
    for n in LEVELS:
        ours, echo = results["ours"][n], results["echo"][n]
        tr = [o["throughput"] / e["throughput"] for o, e in zip(ours, echo)]
        pr = [o["p99_ms"] / e["p99_ms"] for o, e in zip(ours, echo)]
        row = {"sessions": n}
        for key in ("throughput", "p50_ms", "p99_ms", "server_cpu", "server_cpu_us_per_step", "client_cpu",
                    "mean_reply_bytes", "resets_per_s"):
            row[f"ours_{key}"] = med([o[key] for o in ours])
            row[f"echo_{key}"] = med([e[key] for e in echo])
        row["ours_full_gc_per_1000_steps"] = row.get("ours_full_gc_per_s", 0.0) / row["ours_throughput"] * 1000
        row["echo_full_gc_per_1000_steps"] = row.get("echo_full_gc_per_s", 0.0) / row["echo_throughput"] * 1000
        row["throughput_ratio"] = med(tr)
        row["p99_ratio"] = med(pr)
        row["throughput_ratio_range"] = [min(tr), max(tr)]
        row["p99_ratio_range"] = [min(pr), max(pr)]
        row["mismatches"] = sum(o["mismatches"] + o["errors"] for o in ours) + sum(
            e["mismatches"] + e["errors"] for e in echo)
        table.append(row)
    last = table[-1]
    return {
        "rounds": rounds, "warmup_s": warmup_s, "window_s": window_s, "table": table, "raw": results,
        "goals": {
            "throughput_ratio_64": {"goal": f">= {GOAL_THROUGHPUT_RATIO}x echo", "value": last["throughput_ratio"],
                                    "met": last["throughput_ratio"] >= GOAL_THROUGHPUT_RATIO},
            "p99_ratio_64": {"goal": f"<= {GOAL_P99_RATIO}x echo", "value": last["p99_ratio"],
                             "met": last["p99_ratio"] <= GOAL_P99_RATIO},
        },
    }


async def variants(replays: list[Replay], rounds: int, warmup_s: float, window_s: float, server_cpus: set[int],
                   sessions: int = 64) -> dict:
    """What-ifs at 64 sessions, ours vs echo side by side: the stock stack with full-GC logging,
    the same with `gc.freeze()` after the app is imported (the proposed server fix), and that with
    the client not negotiating permessage-deflate (each row changes one thing from the one above)."""
    specs = [
        ("stock, full GCs logged", "bench._uvicorn_wrap", {}, "deflate"),
        ("gc.freeze() after import", "bench._uvicorn_wrap", {"BENCH_GC_FREEZE": "1"}, "deflate"),
        ("gc.freeze() + no permessage-deflate", "bench._uvicorn_wrap", {"BENCH_GC_FREEZE": "1"}, None),
    ]
    out = []
    for label, module, env, compression in specs:
        logs = {name: tempfile.mktemp(prefix=f"bench_gc_{name}_", suffix=".json") for name in ("ours", "echo")}
        res: dict[str, list[dict]] = {"ours": [], "echo": []}
        try:
            with uvicorn_server(OURS, cpus=server_cpus, module=module, env={**env, "BENCH_GC_LOG": logs["ours"]}) \
                    as (ours_url, ours_pid), \
                    uvicorn_server(ECHO, cpus=server_cpus, module=module, env={**env, "BENCH_GC_LOG": logs["echo"]}) \
                    as (echo_url, echo_pid):
                servers = {"ours": (ours_url, ours_pid), "echo": (echo_url, echo_pid)}
                for name, (url, pid) in servers.items():
                    await drive(url, pid, 4, replays, 0.2, 0.8, echo=name == "echo", compression=compression)
                for r in range(rounds):
                    for name in (("ours", "echo") if r % 2 == 0 else ("echo", "ours")):
                        url, pid = servers[name]
                        res[name].append(await drive(url, pid, sessions, replays, warmup_s, window_s,
                                                     echo=name == "echo", compression=compression))
                        await asyncio.sleep(0.3)
            gcs = {}
            for name, path in logs.items():
                with contextlib.suppress(OSError, ValueError):
                    with open(path) as f:
                        events = json.load(f)["full_collections"]
                    windows = [x["window_wall"] for x in res[name]]
                    inside = [d for t, d in events if any(w[0] <= t <= w[1] for w in windows)]
                    total_window = sum(x["window_wall"][1] - x["window_wall"][0] for x in res[name])
                    gcs[name] = {"full_gc_per_s": len(inside) / total_window,
                                 "full_gc_share": sum(inside) / total_window,
                                 "full_gc_max_ms": max(inside) * 1e3 if inside else 0.0}
        finally:
            for path in logs.values():
                with contextlib.suppress(OSError):
                    os.remove(path)
        row = {"variant": label}
        for name in ("ours", "echo"):
            for key in ("throughput", "p50_ms", "p99_ms", "server_cpu", "server_cpu_us_per_step"):
                row[f"{name}_{key}"] = med([x[key] for x in res[name]])
            if name in gcs:
                row.update({f"{name}_{k}": v for k, v in gcs[name].items()})
        row["ours_full_gc_per_1000_steps"] = row.get("ours_full_gc_per_s", 0.0) / row["ours_throughput"] * 1000
        row["echo_full_gc_per_1000_steps"] = row.get("echo_full_gc_per_s", 0.0) / row["echo_throughput"] * 1000
        row["throughput_ratio"] = med([o["throughput"] / e["throughput"] for o, e in zip(res["ours"], res["echo"])])
        row["p99_ratio"] = med([o["p99_ms"] / e["p99_ms"] for o, e in zip(res["ours"], res["echo"])])
        row["mismatches"] = sum(x["mismatches"] + x["errors"] for v in res.values() for x in v)
        print(f"  {label}: ours {row['ours_throughput']:.0f}/s p99 {row['ours_p99_ms']:.1f} ms, echo "
              f"{row['echo_throughput']:.0f}/s p99 {row['echo_p99_ms']:.1f} ms, ratio {row['throughput_ratio']:.2f} "
              f"p99 ratio {row['p99_ratio']:.2f}", flush=True)
        out.append(row)
    return {"sessions": sessions, "rounds": rounds, "window_s": window_s, "table": out}


# ------------------------------------------------------------------ memory

def _rss_mb(pid: int, samples: int = 5) -> float:
    proc = psutil.Process(pid)
    values = []
    for _ in range(samples):
        values.append(proc.memory_info().rss / 2**20)
        time.sleep(0.05)
    return med(values)


async def _idle_sessions(base: str, replays: list[Replay], n: int, offset: int) -> list:
    return list(await asyncio.gather(*(open_session(base, replays[(offset + i) % len(replays)].reset)
                                       for i in range(n))))


async def memory_of(app: str, replays: list[Replay], server_cpus: set[int], echo: bool) -> dict:
    with uvicorn_server(app, cpus=server_cpus) as (url, pid):
        # warm-up: every code path once, then nothing open
        await drive(url, pid, 4, replays, 0.2, 1.0, echo=echo)
        await asyncio.sleep(1.0)
        rss0 = _rss_mb(pid)
        held = await _idle_sessions(url, replays, 16, 0)
        await asyncio.sleep(0.5)
        rss16 = _rss_mb(pid)
        held += await _idle_sessions(url, replays, 48, 16)
        await asyncio.sleep(0.5)
        rss64 = _rss_mb(pid)
        threads64 = psutil.Process(pid).num_threads()
        await asyncio.gather(*(close_session(ws) for ws in held))
        await asyncio.sleep(2.0)
        rss_closed = _rss_mb(pid)
    return {"rss0_mb": rss0, "rss16_mb": rss16, "rss64_mb": rss64, "rss_after_close_mb": rss_closed,
            "per_session_16_mb": (rss16 - rss0) / 16, "per_session_64_mb": (rss64 - rss0) / 64,
            "threads_at_64": threads64}


async def soak(replays: list[Replay], seconds: float, server_cpus: set[int], sessions: int = 64) -> dict:
    with uvicorn_server(OURS, cpus=server_cpus) as (url, pid):
        proc = psutil.Process(pid)
        await drive(url, pid, 4, replays, 0.2, 1.0, echo=False)
        rss_idle = _rss_mb(pid)
        firsts = [replays[(i * 7) % len(replays)].reset for i in range(sessions)]
        sockets = await asyncio.gather(*(open_session(url, f) for f in firsts))
        clock, tally = Clock(), Tally()
        t0 = time.perf_counter()
        clock.stop_at = t0 + seconds
        samples: list[tuple[float, float, int]] = []

        async def sampler():
            while time.perf_counter() < clock.stop_at:
                samples.append((time.perf_counter() - t0, proc.memory_info().rss / 2**20, tally.episodes))
                await asyncio.sleep(1.0)

        await asyncio.gather(sampler(), *(worker(i, url, ws, replays, clock, tally, False, True,
                                                 reconnect_every=RECONNECT_EVERY)
                                          for i, ws in enumerate(sockets)))
        await asyncio.sleep(2.0)
        rss_after = _rss_mb(pid)
    ts = [s[0] for s in samples]
    rs = [s[1] for s in samples]
    half = [s for s in samples if s[0] >= seconds / 2]
    slope = 0.0
    if len(half) >= 3:
        xs, ys = [s[0] for s in half], [s[1] for s in half]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        den = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 60 if den else 0.0
    second_half_growth = half[-1][1] - half[0][1] if half else 0.0
    return {
        "seconds": seconds, "sessions": sessions, "reconnect_every": RECONNECT_EVERY, "episodes": tally.episodes,
        "steps": tally.steps,
        "mismatches": tally.mismatches + tally.errors,
        "rss_idle_before_mb": rss_idle, "rss_start_mb": rs[0], "rss_end_mb": rs[-1], "rss_max_mb": max(rs),
        "rss_min_mb": min(rs), "rss_after_close_mb": rss_after,
        "second_half_growth_mb": second_half_growth, "second_half_slope_mb_per_min": slope,
        "flat": second_half_growth <= max(2.0, 0.01 * rs[-1]),
        "samples": [[round(t, 1), round(r, 2), e] for t, r, e in zip(ts, rs, [s[2] for s in samples])],
    }


# ----------------------------------------------------------------- profiles

_CATEGORIES = (
    ("engine (releaseops_arena)", ("/releaseops_arena/",)),
    ("adapter (server/)", ("/main/server/",)),
    ("pydantic", ("pydantic", "<method 'model_dump", "<method 'validate_python", "<method 'to_json",
                  "<method '__init__' of 'pydantic")),
    ("openenv", ("/openenv/",)),
    ("websockets + compression", ("/websockets/", "zlib", "Compress", "Decompress")),
    ("uvicorn + starlette", ("/uvicorn/", "/starlette/", "/fastapi/")),
    ("asyncio + executor hop", ("/asyncio/", "/concurrent/", "threading.py", "queue.py", "selectors.py",
                                "_asyncio", "<method 'acquire'", "<method 'release'", "_thread",
                                "<method 'put'", "<method 'get' of '_queue")),
    ("json", ("/json/", "_json")),
    ("sockets", ("<method 'send'", "<method 'recv", "socket")),
)


def _label(filename: str, line: int, func: str) -> str:
    func = re.sub(r" at 0x[0-9a-f]+", "", func)
    short = filename
    for marker in ("/site-packages/", "/main/"):
        if marker in short:
            short = short.split(marker)[-1]
    if "/lib/python3" in short:
        short = "stdlib:" + short.split("/lib/python3")[-1].split("/", 1)[-1]
    return f"{short}:{line}({func})" if line else func


def _category(filename: str, func: str) -> str:
    key = filename + " " + func
    for name, needles in _CATEGORIES:
        if any(n in key for n in needles):
            return name
    return "other"


def summarize_profile(path: str, top: int = 20) -> dict:
    st = pstats.Stats(path)
    total = st.total_tt
    rows, cats = [], {}
    for (filename, line, func), (cc, nc, tt, ct, _callers) in st.stats.items():
        rows.append({"function": _label(filename, line, func), "calls": nc, "tottime_share": tt / total,
                     "cumtime_share": ct / total})
        cat = _category(filename, func)
        cats[cat] = cats.get(cat, 0.0) + tt / total
    rows.sort(key=lambda r: -r["tottime_share"])
    by_cum = sorted(rows, key=lambda r: -r["cumtime_share"])
    return {"total_cpu_s": total, "top_tottime": rows[:top], "top_cumtime": by_cum[:top],
            "categories": dict(sorted(cats.items(), key=lambda kv: -kv[1]))}


async def server_profile(replays: list[Replay], seconds: float, server_cpus: set[int], sessions: int = 16,
                         app: str = OURS) -> dict:
    out = tempfile.mktemp(prefix="bench_server_", suffix=".prof")
    echo = app == ECHO
    try:
        with uvicorn_server(app, cpus=server_cpus, module="bench._uvicorn_wrap",
                            env={"BENCH_PROFILE_OUT": out}) as (url, pid):
            await drive(url, pid, 4, replays, 0.2, 0.5, echo=echo)  # warm-up, not profiled (threads end)
            await asyncio.sleep(0.5)
            os.kill(pid, signal.SIGUSR1)
            res = await drive(url, pid, sessions, replays, 0.0, seconds, echo=echo)
            os.kill(pid, signal.SIGUSR2)
            await asyncio.sleep(1.5)  # the sessions' executor threads exit and keep their stats
        for _ in range(50):
            if os.path.exists(out + ".threads"):
                break
            time.sleep(0.1)
        summary = summarize_profile(out)
        with open(out + ".threads") as f:
            summary["threads_merged"] = int(f.read())
        summary["steps_profiled"] = res["throughput"] * seconds
        summary["sessions"] = sessions
        summary["cpu_us_per_step"] = summary["total_cpu_s"] / max(1.0, summary["steps_profiled"]) * 1e6
        summary["category_us_per_step"] = {k: v * summary["cpu_us_per_step"] for k, v in summary["categories"].items()}
        return summary
    finally:
        for p in (out, out + ".threads"):
            with contextlib.suppress(OSError):
                os.remove(p)


async def in_situ_timers(replays: list[Replay], seconds: float, server_cpus: set[int], sessions: int = 16) -> dict:
    """Where a server step's CPU goes, measured inside the running servers (no profiler): thread CPU
    of env.reset / env.step and of OpenEnv's (de)serialization per step, against the process's
    whole CPU per step. Both servers run with gc.freeze() so that full-collection pauses do not
    land at random in one of the timed pieces."""
    out = {}
    for name, app in (("ours", OURS), ("echo", ECHO)):
        path = tempfile.mktemp(prefix=f"bench_timers_{name}_", suffix=".json")
        try:
            with uvicorn_server(app, cpus=server_cpus, module="bench._uvicorn_wrap",
                                env={"BENCH_TIMERS": path, "BENCH_GC_FREEZE": "1"}) as (url, pid):
                await drive(url, pid, 4, replays, 0.2, 0.5, echo=name == "echo")
                res = await drive(url, pid, sessions, replays, 0.5, seconds, echo=name == "echo")
            with open(path) as f:
                timers = json.load(f)
        finally:
            with contextlib.suppress(OSError):
                os.remove(path)
        steps = timers["env.step"]["calls"]
        per_step = {k: v["cpu_s"] / steps * 1e6 for k, v in timers.items()}
        per_call = {k: v["cpu_s"] / v["calls"] * 1e6 for k, v in timers.items()}
        timed = sum(per_step.values())
        out[name] = {"server_cpu_us_per_step": res["server_cpu_us_per_step"], "us_per_step": per_step,
                     "us_per_call": per_call, "timed_us_per_step": timed,
                     "rest_us_per_step": res["server_cpu_us_per_step"] - timed,
                     "mean_reply_bytes": res["mean_reply_bytes"], "throughput": res["throughput"],
                     "mismatches": res["mismatches"] + res["errors"]}
    out["sessions"] = sessions
    return out


def pipeline(episodes: list[dict], repeats: int) -> dict:
    """The server's per-step CPU path in-process (no network, no executor hop), ours vs echo:
    parse (json.loads + WSStepMessage + deserialize_action), env.step, serialize_observation,
    WSObservationResponse(...).model_dump_json()."""
    from openenv.core.env_server.serialization import deserialize_action, serialize_observation
    from openenv.core.env_server.types import WSObservationResponse, WSStepMessage

    from bench.echo_app import EchoAction, EchoEnvironment
    from client.models import ReleaseOpsAction
    from releaseops_arena.tool_env import ReleaseOpsToolEnv
    from server.releaseops_environment import ReleaseOpsEnvironment

    replays = encode(episodes)
    pc = time.perf_counter_ns

    def run(env_cls, action_cls):
        env = env_cls()
        parse = step = ser = resp = 0
        n = 0
        size = 0
        for ep, rep in zip(episodes, replays):
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
                size += len(text)
                n += 1
        return {"parse_us": parse / n / 1e3, "env_step_us": step / n / 1e3, "serialize_us": ser / n / 1e3,
                "response_json_us": resp / n / 1e3, "total_us": (parse + step + ser + resp) / n / 1e3,
                "mean_response_bytes": size / n}

    def engine_only():
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

    runs = []
    for _ in range(repeats):
        runs.append({"ours": run(ReleaseOpsEnvironment, ReleaseOpsAction), "echo": run(EchoEnvironment, EchoAction),
                     "engine_step_us": engine_only()})
    out = {"ours": {k: med([r["ours"][k] for r in runs]) for k in runs[0]["ours"]},
           "echo": {k: med([r["echo"][k] for r in runs]) for k in runs[0]["echo"]},
           "engine_step_us": med([r["engine_step_us"] for r in runs]), "repeats": repeats}
    return out


# --------------------------------------------------------------------- main

def run(quick: bool, only: set[str]) -> dict:
    cpus = allowed_cpus()
    if len(cpus) >= 2:
        server_cpus, client_cpus = {cpus[-1]}, {cpus[0]}
    else:
        server_cpus, client_cpus = set(cpus), set(cpus)
    pinned = pin(client_cpus)
    episodes = record("rule", workload_scenarios(4 if quick else 10))
    replays = encode(episodes)
    out: dict = {"server_cpus": sorted(server_cpus), "client_cpus": pinned, "episodes": len(episodes),
                 "steps_per_episode": sum(len(r.steps) for r in replays) / len(replays)}
    if "pipeline" in only:
        print("server: in-process step pipeline", flush=True)
        out["pipeline"] = pipeline(episodes, 3 if quick else 7)
    if "load" in only:
        print("server: load (ours vs echo)", flush=True)
        out["load"] = asyncio.run(load(replays, rounds=2 if quick else 3, warmup_s=0.5 if quick else 1.0,
                                       window_s=2.0 if quick else 5.0, server_cpus=server_cpus))
    if "variants" in only:
        print("server: variants at 64 sessions (gc log, gc.freeze, no compression)", flush=True)
        out["variants"] = asyncio.run(variants(replays, rounds=1 if quick else 2, warmup_s=0.5 if quick else 1.0,
                                               window_s=2.0 if quick else 5.0, server_cpus=server_cpus))
    if "memory" in only:
        print("server: memory per live session", flush=True)
        ours = asyncio.run(memory_of(OURS, replays, server_cpus, echo=False))
        echo = asyncio.run(memory_of(ECHO, replays, server_cpus, echo=True))
        out["memory"] = {"ours": ours, "echo": echo, "goals": {
            "mb_per_session_64": {"goal": f"<= {GOAL_MB_PER_SESSION} MB per live session",
                                  "value": ours["per_session_64_mb"],
                                  "met": ours["per_session_64_mb"] <= GOAL_MB_PER_SESSION}}}
        print(f"  ours: {ours}\n  echo: {echo}", flush=True)
    if "soak" in only:
        seconds = 20.0 if quick else 120.0
        print(f"server: soak, 64 sessions for {seconds:.0f} s", flush=True)
        out["soak"] = asyncio.run(soak(replays, seconds, server_cpus))
        s = out["soak"]
        print(f"  {s['episodes']} episodes, rss start {s['rss_start_mb']:.1f} end {s['rss_end_mb']:.1f} "
              f"max {s['rss_max_mb']:.1f} MB, second half {s['second_half_growth_mb']:+.2f} MB", flush=True)
    if "timers" in only:
        print("server: in-situ timers (16 sessions)", flush=True)
        out["timers"] = asyncio.run(in_situ_timers(replays, 2.0 if quick else 4.0, server_cpus))
    if "profile" in only:
        print("server: profile", flush=True)
        seconds = 3.0 if quick else 6.0
        out["profile"] = asyncio.run(server_profile(replays, seconds, server_cpus))
        out["profile_echo"] = asyncio.run(server_profile(replays, seconds, server_cpus, app=ECHO))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="OpenEnv WebSocket server benchmarks (ours vs echo).")
    parser.add_argument("--quick", action="store_true", help="short windows, fewer rounds (~2.5 min)")
    parser.add_argument("--only", default="pipeline,load,variants,memory,soak,timers,profile",
                        help="comma-separated subset of pipeline,load,variants,memory,soak,timers,profile")
    parser.add_argument("--json", help="write the results here (default: stdout)")
    args = parser.parse_args(argv)
    result = run(args.quick, set(args.only.split(",")))
    write_json(args.json, result)


if __name__ == "__main__":
    main()
