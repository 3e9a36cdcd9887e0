"""The Notes of docs/benchmarks.md: observations computed from one run's numbers.

Each note is a function of the results that returns its text, or None when the
pieces it compares did not run; thresholds come from `bench/goals.py`.
"""

from __future__ import annotations

from typing import Optional

from bench.goals import GOALS, at_64
from bench.markdown import f0, f1, f2


def notes(results: dict) -> list[str]:
    found = (engine_in_situ(results), full_collections(results), deflate(results), cpu_budget(results),
             littles_law(results), client_cpu(results))
    return [n for n in found if n]


def _variants(results: dict) -> dict[str, dict]:
    return {row["variant"]: row for row in results["server"].get("variants", {}).get("table", [])}


def engine_in_situ(results: dict) -> Optional[str]:
    tm, pl = results["server"].get("timers"), results["server"].get("pipeline")
    if not (tm and pl):
        return None
    return (f"The engine figures are a hot loop on one pinned core. Inside the running server the same "
            f"`env.step` costs {f1(tm['ours']['us_per_call']['env.step'])} us per call (in-situ) against "
            f"{f1(pl['ours']['env_step_us'])} us in-process, of which the engine's own step is "
            f"{f1(pl['engine_step_us'])} us; the rest of `env.step` is the adapter.")


def _gc(row: dict, name: str) -> str:
    return (f"{f2(row[f'{name}_full_gc_per_s'])} full collections/s, {row[f'{name}_full_gc_share'] * 100:.1f}% of "
            f"the time, pauses up to {f0(row[f'{name}_full_gc_max_ms'])} ms, "
            f"{f2(row[f'{name}_full_gc_per_1000_steps'])} per 1,000 steps")


def _heap(row: dict, name: str) -> str:
    if f"{name}_tracked_objects_at_start" not in row:
        return ""
    frozen = row[f"{name}_frozen_by_app"]
    return (f"{row[f'{name}_tracked_objects_at_start']:,} objects"
            + (f", {frozen:,} of them frozen by the app itself" if frozen else ", none frozen by the app"))


def full_collections(results: dict) -> Optional[str]:
    va = _variants(results)
    stock, frozen = va.get("stock, full GCs logged"), va.get("gc.freeze() after import")
    if not (stock and frozen and "ours_full_gc_per_s" in stock and "ours_full_gc_per_s" in frozen):
        return None
    mem = results["server"].get("memory")
    heaps = [f"{name} {_heap(stock, name)}" for name in ("ours", "echo") if _heap(stock, name)]
    start = (f"Ours starts at {f0(mem['ours']['rss0_mb'])} MB of RSS, echo at {f0(mem['echo']['rss0_mb'])}"
             if mem else "Both servers start large")
    return (
        "OpenEnv imports gradio at import time even with the web interface off, and every full (generation-2) "
        "collection walks the whole unfrozen heap while holding the GIL, stalling every session. "
        f"{start}{' (start-up heap: ' + '; '.join(heaps) + ')' if heaps else ''}. At 64 sessions, as shipped, "
        f"ours ran {_gc(stock, 'ours')}; echo {_gc(stock, 'echo')}. With `gc.freeze()` after import in both "
        f"servers: ours {_gc(frozen, 'ours')}, p99 {f1(stock['ours_p99_ms'])} -> {f1(frozen['ours_p99_ms'])} ms; "
        f"echo {_gc(frozen, 'echo')}, p99 {f1(stock['echo_p99_ms'])} -> {f1(frozen['echo_p99_ms'])} ms.")


def deflate_cost(results: dict) -> Optional[tuple[float, float]]:
    """Server CPU per step that permessage-deflate costs (ours, echo): the what-if without it."""
    va = _variants(results)
    frozen, plain = va.get("gc.freeze() after import"), va.get("gc.freeze() + no permessage-deflate")
    if not (frozen and plain):
        return None
    return (frozen["ours_server_cpu_us_per_step"] - plain["ours_server_cpu_us_per_step"],
            frozen["echo_server_cpu_us_per_step"] - plain["echo_server_cpu_us_per_step"])


def deflate(results: dict) -> Optional[str]:
    cost = deflate_cost(results)
    if not cost:
        return None
    text = (f"permessage-deflate (negotiated by default by OpenEnv's client and uvicorn) costs ours about "
            f"{f0(cost[0])} us of server CPU per step and echo about {f0(cost[1])} us")
    if "load" in results["server"]:
        row = at_64(results)
        text += (f", for mean replies of {f0(row['ours_mean_reply_bytes'])} and {f0(row['echo_mean_reply_bytes'])} "
                 "bytes at 64 sessions")
    return text + "."


def cpu_budget(results: dict) -> Optional[str]:
    server, em = results["server"], results["engine"]["median"]
    tm = server.get("timers")
    if not (tm and "load" in server):
        return None
    goal = GOALS["server_throughput_64"].limit
    l64 = at_64(results)
    echo_us = l64["echo_server_cpu_us_per_step"]
    allowed = echo_us / goal - echo_us
    engine_us = em["step_mean_us"] + em["reset_median_us"] / max(1.0, server["steps_per_episode"])
    o, e = tm["ours"], tm["echo"]
    in_env = o["us_per_step"]["env.step"] + o["us_per_step"]["env.reset"]
    serialize_extra = sum(o["us_per_step"][k] - e["us_per_step"][k]
                          for k in ("serialize_observation", "response.model_dump_json"))
    text = (
        f"The {goal:g}x throughput goal is a CPU budget while the server saturates its core: echo costs "
        f"{f0(echo_us)} us of server CPU per step at 64 sessions, so ours may cost at most {f0(echo_us / goal)} us, "
        f"{f0(allowed)} us more than echo. Ours costs {f0(l64['ours_server_cpu_us_per_step'] - echo_us)} us more. "
        f"The engine alone, hot, needs {f1(engine_us)} us per step (step {f1(em['step_mean_us'])} us + reset "
        f"{f1(em['reset_median_us'])} us / {server['steps_per_episode']:.1f} steps), and in-situ "
        f"({tm['sessions']} sessions) ours spends {f1(in_env)} us per step in `env.step` + `env.reset`, "
        f"{f1(serialize_extra)} us more than echo serializing, and "
        f"{f1(o['rest_us_per_step'] - e['rest_us_per_step'])} us more in the rest of the server (transport, "
        f"framing, compression, executor hop) for {f0(o['mean_reply_bytes'])}-byte replies against "
        f"{f0(e['mean_reply_bytes'])}.")
    if o["server_cpu_us_per_step"] - e["server_cpu_us_per_step"] - in_env > allowed:
        text += " Even a free engine would leave ours over that budget: the goal cannot be met by engine tuning alone."
    return text


def littles_law(results: dict) -> Optional[str]:
    if "load" not in results["server"]:
        return None
    l64 = at_64(results)
    return (f"Latency at a fixed number of closed-loop sessions follows throughput (Little's law: mean latency = "
            f"sessions / throughput): at 64 sessions the p50 ratio is {f2(l64['ours_p50_ms'] / l64['echo_p50_ms'])}x "
            f"for a throughput ratio of {f2(l64['throughput_ratio'])}x, so the p99 goal "
            f"({GOALS['server_p99_64'].goal()}) needs the throughput goal met first.")


def client_cpu(results: dict) -> Optional[str]:
    if "load" not in results["server"]:
        return None
    l64 = at_64(results)
    busy = l64["ours_server_cpu"] >= 0.95 and l64["echo_server_cpu"] >= 0.95
    return (
        "Client and server run on different cores; the client's CPU is reported next to the server's "
        f"({f2(l64['ours_client_cpu'])} / {f2(l64['echo_client_cpu'])} of a core at 64 sessions). "
        + ("Both servers use a full core at 64 sessions: the server process is the bottleneck being measured."
           if busy else
           f"The servers used {f2(l64['ours_server_cpu'])} / {f2(l64['echo_server_cpu'])} of a core at 64 "
           "sessions: other tenants' processes shared the core, so CPU per step is the figure noise affects least."))
