"""Throughput and latency, ours against the echo floor: the load table and the what-ifs at 64 sessions.

For each round and concurrency both servers are driven back to back (the order
alternating), each for a warm-up then a fixed window. Ratios ours/echo are taken
per round and their medians reported. The what-ifs change one thing per row (the
full-collection log, then `gc.freeze()` after import, then no permessage-deflate);
their full collections are counted by `gc.callbacks` inside the servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from pathlib import Path

from bench.common import bench_server, med
from bench.replay import ECHO, OURS, Replay, drive, warm_up

LEVELS = (1, 16, 64)
COMPARED = ("throughput", "p50_ms", "p99_ms", "server_cpu", "server_cpu_us_per_step")
COMPARED_LOAD = COMPARED + ("client_cpu", "mean_reply_bytes", "resets_per_s")


@contextlib.contextmanager
def ours_and_echo(server_cpus: set[int], module: str = "uvicorn", env: dict | None = None,
                  env_of: dict[str, dict] | None = None):
    """Both servers, alike but for the app (and `env_of[name]`); yields {name: (url, pid)}."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(bench_server(app, cpus=server_cpus, module=module,
                                                      env={**(env or {}), **(env_of or {}).get(name, {})}))
               for name, app in (("ours", OURS), ("echo", ECHO))}


def compare(ours: list[dict], echo: list[dict], keys: tuple[str, ...]) -> dict:
    """One table row from paired runs: medians of each measure, and of the per-round ratios."""
    row = {}
    for key in keys:
        row[f"ours_{key}"] = med([o[key] for o in ours])
        row[f"echo_{key}"] = med([e[key] for e in echo])
    tr = [o["throughput"] / e["throughput"] for o, e in zip(ours, echo)]
    pr = [o["p99_ms"] / e["p99_ms"] for o, e in zip(ours, echo)]
    row.update({"throughput_ratio": med(tr), "p99_ratio": med(pr), "throughput_ratio_range": [min(tr), max(tr)],
                "p99_ratio_range": [min(pr), max(pr)],
                "mismatches": sum(x["mismatches"] + x["errors"] for x in ours + echo)})
    return row


async def load(replays: list[Replay], rounds: int, warmup_s: float, window_s: float, server_cpus: set[int]) -> dict:
    results: dict[str, dict[int, list[dict]]] = {"ours": {n: [] for n in LEVELS}, "echo": {n: [] for n in LEVELS}}
    with ours_and_echo(server_cpus) as servers:
        await warm_up(servers, replays)
        for r in range(rounds):
            for n in LEVELS:
                for name in (("ours", "echo") if (r + n) % 2 == 0 else ("echo", "ours")):
                    url, pid = servers[name]
                    res = await drive(url, pid, n, replays, warmup_s, window_s, echo=name == "echo")
                    results[name][n].append(res)
                    print(f"  round {r + 1} {name:4s} {n:2d} sessions: {res['throughput']:7.0f} steps/s "
                          f"p50 {res['p50_ms']:.2f} ms p99 {res['p99_ms']:.2f} ms server cpu "
                          f"{res['server_cpu']:.2f} client cpu {res['client_cpu']:.2f}", flush=True)
                    await asyncio.sleep(0.3)
    table = [{"sessions": n, **compare(results["ours"][n], results["echo"][n], COMPARED_LOAD)} for n in LEVELS]
    return {"rounds": rounds, "warmup_s": warmup_s, "window_s": window_s, "table": table, "raw": results}


# Each row changes one thing from the row above: (label, server environment, client compression).
VARIANTS = (
    ("stock, full GCs logged", {}, "deflate"),
    ("gc.freeze() after import", {"BENCH_GC_FREEZE": "1"}, "deflate"),
    ("gc.freeze() + no permessage-deflate", {"BENCH_GC_FREEZE": "1"}, None),
)


async def variants(replays: list[Replay], rounds: int, warmup_s: float, window_s: float, server_cpus: set[int],
                   sessions: int = 64) -> dict:
    """What-ifs at 64 sessions, ours vs echo side by side (`bench/_uvicorn_wrap.py` serves both)."""
    out = []
    for label, env, compression in VARIANTS:
        res: dict[str, list[dict]] = {"ours": [], "echo": []}
        with tempfile.TemporaryDirectory(prefix="releaseops_bench_gc_") as tmp:
            logs = {name: str(Path(tmp) / f"{name}.json") for name in res}
            with ours_and_echo(server_cpus, module="bench._uvicorn_wrap", env=env,
                               env_of={name: {"BENCH_GC_LOG": path} for name, path in logs.items()}) as servers:
                await warm_up(servers, replays, compression=compression)
                for r in range(rounds):
                    for name in (("ours", "echo") if r % 2 == 0 else ("echo", "ours")):
                        url, pid = servers[name]
                        res[name].append(await drive(url, pid, sessions, replays, warmup_s, window_s,
                                                     echo=name == "echo", compression=compression))
                        await asyncio.sleep(0.3)
            # the servers have stopped, so their logs are written
            gc_logs = {name: json.loads(Path(path).read_text()) for name, path in logs.items()}
        row = {"variant": label, **compare(res["ours"], res["echo"], COMPARED)}
        for name in res:
            row.update({f"{name}_{k}": v for k, v in full_collections(gc_logs[name], res[name]).items()})
        print(f"  {label}: ours {row['ours_throughput']:.0f}/s p99 {row['ours_p99_ms']:.1f} ms, echo "
              f"{row['echo_throughput']:.0f}/s p99 {row['echo_p99_ms']:.1f} ms, ratio {row['throughput_ratio']:.2f} "
              f"p99 ratio {row['p99_ratio']:.2f}", flush=True)
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
    return {"full_gc_per_s": len(inside) / seconds, "full_gc_share": sum(inside) / seconds,
            "full_gc_max_ms": max(inside) * 1e3 if inside else 0.0,
            "full_gc_per_1000_steps": len(inside) / steps * 1000 if steps else float("nan"),
            "tracked_objects_at_start": log["tracked_objects_at_start"], "frozen_by_app": log["frozen_by_app"]}
