"""Throughput and latency against the floors: the load table, the what-ifs and the workers at 64 sessions.

Three servers on the same stack: ours, the text echo (`tools/bench/text_echo_app.py`: our
texts, no engine; the floor the goals use) and the bare echo (`tools/bench/echo_app.py`, for
reference). For each round and concurrency they are driven back to back (the order
rotating), each for a warm-up then a fixed window. Ratios are taken per round and
their medians reported. Every server runs on the served stack: uvicorn with
server/limits.py's flags (permessage-deflate off, so the client's offer is declined;
each handshake is checked). The what-ifs repeat the 64-session comparison as served,
with permessage-deflate turned on (uvicorn's default, not served) and with the floors
stepping on the event loop, counting full collections through `gc.callbacks` inside
the servers. Beside the step p99 (the goals'), every row keeps the p99 with reset
round trips counted and without the steps that end a release phase, to read the tail.
The workers piece runs ours with 1 and with 2 uvicorn worker
processes, servers and load client all on every core, sharing them as a trainer on one machine would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

from tools.bench.common import bench_server, med, percentile, pin
from tools.bench.launch import http_get
from tools.bench.replay import ECHO, OURS, TEXT_ECHO, Replay, drive, warm_up

LEVELS = (1, 16, 64)
SERVERS = (("ours", OURS), ("text_echo", TEXT_ECHO), ("echo", ECHO))
FLOORS = {"": "text_echo", "_bare": "echo"}  # ratio key suffix -> the floor it divides by
COMPARED = (
    "throughput",
    "p50_ms",
    "p99_ms",
    "server_cpu",
    "server_cpu_us_per_step",
    "reply_bytes_p50",
    "reply_bytes_p99",
    "mean_reply_bytes",
    "p99_with_resets_ms",
    "p99_without_phase_ends_ms",
    "reset_p50_ms",
    "reset_p99_ms",
    "phase_end_p99_ms",
)
# per-round ratios of ours to each floor: (ratio key, measure)
RATIOS = (
    ("p99_ratio", "p99_ms"),
    ("p99_resets_ratio", "p99_with_resets_ms"),
    ("p99_no_phase_ends_ratio", "p99_without_phase_ends_ms"),
)
COMPARED_LOAD = COMPARED + ("client_cpu", "resets_per_s")


@contextlib.contextmanager
def three_servers(
    server_cpus: set[int], module: str = "uvicorn", env: dict | None = None, env_of: dict[str, dict] | None = None
):
    """Ours and both floors, alike but for the app (and `env_of[name]`); yields {name: (url, pid)}."""
    with contextlib.ExitStack() as stack:
        yield {
            name: stack.enter_context(
                bench_server(app, cpus=server_cpus, module=module, env={**(env or {}), **(env_of or {}).get(name, {})})
            )
            for name, app in SERVERS
        }


def rotated(r: int) -> list[str]:
    names = [name for name, _ in SERVERS]
    return names[r % len(names) :] + names[: r % len(names)]


def compare(runs: dict[str, list[dict]], keys: tuple[str, ...]) -> dict:
    """One table row from paired runs: medians of each measure, and of the per-round ratios of ours to
    each floor (`throughput_ratio`, `p99_ratio` against the text echo; `..._bare` against the bare echo)."""
    row = {f"{name}_{key}": med([x[key] for x in xs]) for name, xs in runs.items() for key in keys}
    ours = runs["ours"]
    for suffix, floor in FLOORS.items():
        tr = [o["throughput"] / e["throughput"] for o, e in zip(ours, runs[floor])]
        row.update(
            {
                f"throughput_ratio{suffix}": med(tr),
                f"throughput_ratio{suffix}_range": [min(tr), max(tr)],
            }
        )
        for name, key in RATIOS:
            pr = [o[key] / e[key] for o, e in zip(ours, runs[floor])]
            row.update(
                {
                    f"{name}{suffix}": med(pr),
                    f"{name}{suffix}_range": [min(pr), max(pr)],
                    f"{name}{suffix}_by_round": pr,
                }
            )
    # p99 of the samples of all rounds pooled (as a harness that keeps one distribution reports it), and of
    # the first 3 rounds pooled: a pooled p99 follows the noisiest window, the median of ratios does not.
    for name, key in (("pooled_p99_ratio", "_steps"), ("pooled_p99_resets_ratio", "_round_trips")):
        for label, rounds in (("", None), ("_first3", 3)):
            if all(key in x for x in ours[:rounds] + runs["text_echo"][:rounds]):
                o = [v for x in ours[:rounds] for v in x[key]]
                e = [v for x in runs["text_echo"][:rounds] for v in x[key]]
                row[f"{name}{label}"] = percentile(o, 99) / percentile(e, 99)
    for xs in runs.values():
        for x in xs:
            x.pop("_steps", None)
            x.pop("_round_trips", None)
    row["cpu_us_minus_text_echo"] = med(
        [o["server_cpu_us_per_step"] - e["server_cpu_us_per_step"] for o, e in zip(ours, runs["text_echo"])]
    )
    row["mismatches"] = sum(x["mismatches"] + x["errors"] for xs in runs.values() for x in xs)
    row["extensions"] = sorted({e for xs in runs.values() for x in xs for e in x["extensions"]}, key=str)
    return row


def _log(prefix: str, name: str, res: dict) -> None:
    print(
        f"  {prefix} {name:9s}: {res['throughput']:7.0f} steps/s p50 {res['p50_ms']:.2f} ms p99 "
        f"{res['p99_ms']:.2f} ms server cpu {res['server_cpu']:.2f} client cpu {res['client_cpu']:.2f} "
        f"reply {res['reply_bytes_p50']:.0f}/{res['reply_bytes_p99']:.0f} B; p99 with resets "
        f"{res['p99_with_resets_ms']:.2f} ms, reset p99 {res['reset_p99_ms']:.2f} ms",
        flush=True,
    )


async def load(replays: list[Replay], rounds: int, warmup_s: float, window_s: float, server_cpus: set[int]) -> dict:
    results = {name: {n: [] for n in LEVELS} for name, _ in SERVERS}
    with three_servers(server_cpus) as servers:
        await warm_up(servers, replays)
        for r in range(rounds):
            for n in LEVELS:
                for name in rotated(r + n):
                    url, pid = servers[name]
                    res = await drive(url, pid, n, replays, warmup_s, window_s, echo=name == "echo")
                    results[name][n].append(res)
                    _log(f"round {r + 1} {n:2d} sessions", name, res)
                    await asyncio.sleep(0.3)
    table = [{"sessions": n, **compare({name: results[name][n] for name in results}, COMPARED_LOAD)} for n in LEVELS]
    return {"rounds": rounds, "warmup_s": warmup_s, "window_s": window_s, "table": table, "raw": results}


# (key, label, permessage-deflate on, floors on the event loop, floors behind the session guard): each row
# changes one thing, the servers run as served otherwise (server/limits.py's uvicorn settings, deflate off).
# The client always offers permessage-deflate, as OpenEnv's client does. Ours steps on the event loop
# (server/releaseops_environment.py) behind the session guard (server/session_guard.py); the floors use
# OpenEnv's session executor and no guard unless the row says otherwise.
VARIANTS = (
    ("served", "as served (no permessage-deflate)", False, False, False),
    ("deflate", "permessage-deflate on (uvicorn's default, not served)", True, False, False),
    ("loop", "floors also step on the event loop", False, True, False),
    ("guard", "floors also behind the session guard", False, False, True),
)
# The guarded floors never report play: their sessions must outlive the claim bound of every window.
GUARDED_FLOOR_ENV = {"BENCH_GUARD": "1", "SESSION_CLAIM_TIMEOUT_S": "3600"}


async def variants(
    replays: list[Replay], rounds: int, warmup_s: float, window_s: float, server_cpus: set[int], sessions: int = 64
) -> dict:
    """Ours against both floors at 64 sessions as served, with permessage-deflate turned on, and with the
    floors stepping on the event loop as ours does (`tools/bench/_uvicorn_wrap.py` serves all three on the
    served stack and logs their full collections)."""
    out = []
    for key, label, deflate, floors_on_loop, floors_guarded in VARIANTS:
        res: dict[str, list[dict]] = {name: [] for name, _ in SERVERS}
        with tempfile.TemporaryDirectory(prefix="releaseops_bench_gc_") as tmp:
            logs = {name: str(Path(tmp) / f"{name}.json") for name in res}
            env_of = {
                name: {
                    "BENCH_GC_LOG": path,
                    **({"BENCH_LOOP_STEP": "1"} if floors_on_loop and name != "ours" else {}),
                    **({"BENCH_WS_DEFLATE": "1"} if deflate else {}),
                    **(GUARDED_FLOOR_ENV if floors_guarded and name != "ours" else {}),
                }
                for name, path in logs.items()
            }
            with three_servers(server_cpus, module="tools.bench._uvicorn_wrap", env_of=env_of) as servers:
                await warm_up(servers, replays, deflate=deflate)
                for r in range(rounds):
                    for name in rotated(r):
                        url, pid = servers[name]
                        res[name].append(
                            await drive(
                                url,
                                pid,
                                sessions,
                                replays,
                                warmup_s,
                                window_s,
                                echo=name == "echo",
                                deflate=deflate,
                            )
                        )
                        _log(f"{label}, round {r + 1}", name, res[name][-1])
                        await asyncio.sleep(0.3)
            # the servers have stopped, so their logs are written
            gc_logs = {name: json.loads(Path(path).read_text()) for name, path in logs.items()}
        row = {
            "key": key,
            "variant": label,
            "compression": "deflate" if deflate else None,  # what the handshakes agreed to
            "deflate": deflate,
            "floors_on_loop": floors_on_loop,
            "floors_guarded": floors_guarded,
            **compare(res, COMPARED),
        }
        for name in res:
            row.update({f"{name}_{k}": v for k, v in full_collections(gc_logs[name], res[name]).items()})
        print(
            f"  {label}: ours/text echo {row['throughput_ratio']:.2f}x, p99 {row['p99_ratio']:.2f}x; ours/bare echo "
            f"{row['throughput_ratio_bare']:.2f}x, p99 {row['p99_ratio_bare']:.2f}x; p99 with resets counted "
            f"{row['p99_resets_ratio']:.2f}x, without phase ends {row['p99_no_phase_ends_ratio']:.2f}x; extensions "
            f"{row['extensions']}",
            flush=True,
        )
        out.append(row)
    return {"sessions": sessions, "rounds": rounds, "window_s": window_s, "table": out}


def full_collections(log: dict, runs: list[dict]) -> dict:
    """Full (generation-2) collections that started inside the measured windows: rate, share of the
    time, longest pause, and per 1,000 steps; plus the heap the server started with and how much of
    it the app froze itself."""
    windows = [x["window_wall"] for x in runs]
    inside = [d for t, d in log["full_collections"] if any(w0 <= t <= w1 for w0, w1 in windows)]
    seconds = sum(w1 - w0 for w0, w1 in windows)
    steps = sum(x["steps_in_window"] for x in runs)
    return {
        "full_gc_per_s": len(inside) / seconds,
        "full_gc_share": sum(inside) / seconds,
        "full_gc_max_ms": max(inside) * 1e3 if inside else 0.0,
        "full_gc_per_1000_steps": len(inside) / steps * 1000 if steps else float("nan"),
        "tracked_objects_at_start": log["tracked_objects_at_start"],
        "frozen_by_app": log["frozen_by_app"],
    }


WORKER_COUNTS = (1, 2)
WORKER_KEYS = ("throughput", "p50_ms", "p99_ms", "server_cpu", "client_cpu", "server_cpu_us_per_step")


@contextlib.contextmanager
def ours_with_workers(n: int, cpus: set[int]):
    """Ours under `uvicorn --workers n` (what `releaseops-serve --workers n` runs) on all of `cpus`; yields
    (url, pid of the supervisor) once every worker has started: the kernel picks which worker accepts
    a connection, and /health answers as soon as one is up."""
    with tempfile.TemporaryDirectory(prefix="releaseops_bench_workers_") as tmp:
        log = Path(tmp) / "server.log"
        # server/limits.py's flags (`--timeout-worker-healthcheck 60` among them) come with the launcher
        args = ("--workers", str(n), "--log-level", "info", "--no-access-log")
        with bench_server(OURS, env={"WEB_CONCURRENCY": str(n)}, args=args, log_path=log, cpus=cpus) as (url, pid):
            deadline = time.monotonic() + 120
            while log.read_text(errors="replace").count("Application startup complete") < n:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{n} workers did not all start within 120 s:\n{log.read_text()[-2000:]}")
                time.sleep(0.2)
            workers = json.loads(http_get(f"{url}/metadata")[1])["workers"]
            if workers != n:
                raise RuntimeError(f"/metadata reports {workers} workers, expected {n}")
            yield url, pid


@contextlib.contextmanager
def on_cpus(cpus: set[int]):
    """The load client on all of `cpus` for a while (the workers share them with it), then pinned back."""
    before = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    pin(cpus)
    try:
        yield
    finally:
        if before:
            pin(before)


async def workers(
    replays: list[Replay], rounds: int, warmup_s: float, window_s: float, cpus: set[int], sessions: int = 64
) -> dict:
    """2 workers against 1 at the same load, both alive for the whole piece and driven in turns; the servers
    and the client all on `cpus` (every core this run may use: a child inherits its parent's pinning, so
    each is given them explicitly)."""
    res: dict[int, list[dict]] = {n: [] for n in WORKER_COUNTS}
    with on_cpus(cpus), contextlib.ExitStack() as stack:
        servers = {n: stack.enter_context(ours_with_workers(n, cpus)) for n in WORKER_COUNTS}
        for url, pid in servers.values():
            await drive(url, pid, sessions, replays, 0.2, 1.0, echo=False)  # every worker warm
        for r in range(rounds):
            for n in WORKER_COUNTS if r % 2 == 0 else WORKER_COUNTS[::-1]:
                url, pid = servers[n]
                res[n].append(await drive(url, pid, sessions, replays, warmup_s, window_s, echo=False))
                _log(f"round {r + 1}", f"{n} worker{'s' * (n > 1)}", res[n][-1])
                await asyncio.sleep(0.3)
    table = [
        {
            "workers": n,
            **{k: med([x[k] for x in res[n]]) for k in WORKER_KEYS},
            # per process, busiest first: medians over rounds of the busiest, the next, ...
            "server_cpu_by_process": [med(x) for x in zip(*(r["server_cpu_by_process"] for r in res[n]))],
            "mismatches": sum(x["mismatches"] + x["errors"] for x in res[n]),
        }
        for n in WORKER_COUNTS
    ]
    speedups = [b["throughput"] / a["throughput"] for a, b in zip(res[1], res[2])]
    return {
        "sessions": sessions,
        "rounds": rounds,
        "window_s": window_s,
        "cpus": sorted(cpus),
        "table": table,
        "speedup": med(speedups),
        "speedup_range": [min(speedups), max(speedups)],
    }
