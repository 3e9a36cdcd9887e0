"""The server sections of docs/benchmarks.md: load, what-ifs, in-situ timers, memory, soak, server profile.

Each function takes the server part's JSON (`bench/server.py`) and returns Markdown,
or "" when the piece it reports did not run.
"""

from __future__ import annotations

from bench.markdown import drop_empty_columns, f0, f1, f2, table


def sections(results: dict) -> list[str]:
    server = results["server"]
    pieces = [s for s in (load_section(server), variants_section(server), timers_section(server)) if s]
    return ["\n\n".join([intro(server), *pieces]) if pieces else "", memory_section(server)]


def intro(server: dict) -> str:
    return (
        "## 2. Server (`bench/server.py`, `bench/echo_app.py`)\n\n"
        f"Ours (`uvicorn server.app:app`) against an echo environment on the same OpenEnv + uvicorn stack "
        f"(`bench/echo_app.py`, `create_app(max_concurrent_envs=64)`), both `python -m uvicorn APP --log-level "
        f"warning` with ENABLE_WEB_INTERFACE unset, pinned to CPU {server['server_cpus']}; the client (asyncio + "
        f"`websockets`, default permessage-deflate as OpenEnv's client) is pinned to CPU {server['client_cpus']}. "
        f"Sessions replay recorded `rule` episodes ({server['episodes']} scenarios, "
        f"{server['steps_per_episode']:.1f} steps each): reset, then every step; ours must answer each step with "
        "exactly the text the in-process run saw.")


def _pair(row: dict, key: str, fmt=f0) -> str:
    return f"{fmt(row[f'ours_{key}'])} / {fmt(row[f'echo_{key}'])}"


def load_section(server: dict) -> str:
    if "load" not in server:
        return ""
    ld = server["load"]
    rows = [[row["sessions"], f0(row["ours_throughput"]), f0(row["echo_throughput"]),
             f"**{f2(row['throughput_ratio'])}x**", f"{f2(row['ours_p50_ms'])} / {f2(row['ours_p99_ms'])}",
             f"{f2(row['echo_p50_ms'])} / {f2(row['echo_p99_ms'])}", f"**{f2(row['p99_ratio'])}x**",
             _pair(row, "server_cpu_us_per_step"), _pair(row, "server_cpu", f2), _pair(row, "client_cpu", f2),
             _pair(row, "mean_reply_bytes"), row["mismatches"]] for row in ld["table"]]
    ranges = "; ".join(f"{r['sessions']} sessions {f2(r['throughput_ratio_range'][0])} - "
                       f"{f2(r['throughput_ratio_range'][1])}" for r in ld["table"])
    p99_ranges = "; ".join(f"{r['sessions']} sessions {f2(r['p99_ratio_range'][0])} - {f2(r['p99_ratio_range'][1])}"
                           for r in ld["table"])
    return (
        f"Load: {ld['rounds']} rounds, each a {ld['warmup_s']:g} s warm-up and a {ld['window_s']:g} s window per "
        "server and concurrency, order alternating; medians. Throughput counts step replies (resets excluded but "
        "performed); latency is send-to-reply per step.\n\n"
        + table(["sessions", "ours steps/s", "echo steps/s", "ours/echo", "ours p50 / p99 ms", "echo p50 / p99 ms",
                 "p99 ours/echo", "server CPU us/step ours / echo", "server CPU (cores) ours / echo",
                 "client CPU ours / echo", "reply bytes ours / echo", "wrong replies"], rows)
        + f"\n\nThroughput ratio range over rounds: {ranges}. p99 ratio range: {p99_ranges}.")


def _full_gcs(row: dict) -> str:
    if "ours_full_gc_per_s" not in row or "echo_full_gc_per_s" not in row:
        return ""
    return (f"{f2(row['ours_full_gc_per_s'])}/s, {row['ours_full_gc_share'] * 100:.1f}% of time, max "
            f"{f0(row['ours_full_gc_max_ms'])} ms / {f2(row['echo_full_gc_per_s'])}/s, "
            f"{row['echo_full_gc_share'] * 100:.1f}%, max {f0(row['echo_full_gc_max_ms'])} ms")


def variants_section(server: dict) -> str:
    if "variants" not in server:
        return ""
    va = server["variants"]
    rows = [[row["variant"], f0(row["ours_throughput"]), f0(row["echo_throughput"]), f"{f2(row['throughput_ratio'])}x",
             _pair(row, "p99_ms", f1), f"{f2(row['p99_ratio'])}x", _pair(row, "server_cpu_us_per_step"),
             _full_gcs(row)] for row in va["table"]]
    header = ["variant", "ours steps/s", "echo steps/s", "ours/echo", "p99 ms ours / echo", "p99 ours/echo",
              "CPU us/step ours / echo", "full GCs ours / echo"]
    return (
        f"### What-ifs at {va['sessions']} sessions\n\n"
        "The same comparison under variants, each row changing one thing from the row above, both servers "
        "alike (`bench/_uvicorn_wrap.py` runs `uvicorn.run` with the same settings plus the variant and a "
        "full-collection log through `gc.callbacks`). Full collections are the generation-2 GC runs that started "
        "inside the measurement windows.\n\n" + table(*drop_empty_columns(header, rows)))


TIMED = ("env.step", "env.reset", "deserialize_action", "serialize_observation", "response.model_dump_json")


def timers_section(server: dict) -> str:
    if "timers" not in server:
        return ""
    tm = server["timers"]
    o, e = tm["ours"], tm["echo"]
    rows = [[f"`{k}`", f1(o["us_per_step"][k]), f1(e["us_per_step"][k]), f1(o["us_per_step"][k] - e["us_per_step"][k])]
            for k in TIMED if k in o["us_per_step"] and k in e["us_per_step"]]
    rows.append(["rest of the server", f1(o["rest_us_per_step"]), f1(e["rest_us_per_step"]),
                 f1(o["rest_us_per_step"] - e["rest_us_per_step"])])
    rows.append(["**server CPU per step**", f"**{f1(o['server_cpu_us_per_step'])}**",
                 f"**{f1(e['server_cpu_us_per_step'])}**",
                 f"**{f1(o['server_cpu_us_per_step'] - e['server_cpu_us_per_step'])}**"])
    rows.append(["mean reply bytes", f0(o["mean_reply_bytes"]), f0(e["mean_reply_bytes"]), ""])
    text = (
        f"### Where a server step's CPU goes ({tm['sessions']} sessions, in-situ timers)\n\n"
        "Thread CPU time of each piece, read inside the running servers (two clock reads per call, no "
        "profiler; both servers with `gc.freeze()` so collection pauses do not land in a timed piece), per "
        "step; `env.reset` is amortized over the steps of its episode. The rest is uvicorn, websockets "
        "(framing, permessage-deflate), asyncio, the per-session executor hop and OpenEnv's handler.\n\n"
        + table(["piece (us per step)", "ours", "echo", "ours - echo"], rows))
    pl = server.get("pipeline")
    if pl:
        po, pe = pl["ours"], pl["echo"]
        text += (
            f"\n\nIn-process, hot (no network, no executor hop; `bench/cpu.py:pipeline`): parse "
            f"{f1(po['parse_us'])} / {f1(pe['parse_us'])} us, `env.step` {f1(po['env_step_us'])} / "
            f"{f1(pe['env_step_us'])} us (of which the engine's own step {f1(pl['engine_step_us'])} us), "
            f"`serialize_observation` {f1(po['serialize_us'])} / {f1(pe['serialize_us'])} us, response JSON "
            f"{f1(po['response_json_us'])} / {f1(pe['response_json_us'])} us; total {f1(po['total_us'])} / "
            f"{f1(pe['total_us'])} us per step (ours / echo), responses of {f0(po['mean_response_bytes'])} / "
            f"{f0(pe['mean_response_bytes'])} bytes.")
    return text


def memory_section(server: dict) -> str:
    parts = []
    if "memory" in server:
        mem = server["memory"]
        rows = [[name, f1(x["rss0_mb"]), f1(x["rss16_mb"]), f1(x["rss64_mb"]), f1(x["rss_after_close_mb"]),
                 f"{x['per_session_16_mb']:.3f}", f"**{x['per_session_64_mb']:.3f}**", x["threads_at_64"]]
                for name, x in ((n, mem[n]) for n in ("ours", "echo"))]
        parts += [
            "RSS (psutil) of a fresh server of each kind after a warm-up (4 sessions playing, then closed): with no "
            "session open, with 16 and with 64 live sessions that have each reset an episode, and after they close.",
            table(["server", "RSS 0 sessions MB", "16 sessions", "64 sessions", "after close", "MB/session (16)",
                   "MB/session (64)", "threads at 64"], rows)]
    if "soak" in server:
        parts += soak_parts(server["soak"])
    return "## 3. Memory\n\n" + "\n\n".join(parts) if parts else ""


def soak_parts(soak: dict) -> list[str]:
    samples = soak["samples"]
    step = max(1, len(samples) // 12)
    picks = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    return [
        f"Soak: {soak['sessions']} sessions playing `rule` episodes back to back on our server for "
        f"{soak['seconds']:.0f} s (each session reconnects every {soak['reconnect_every']} episodes): "
        f"{soak['episodes']:,} episodes, {soak['steps']:,} steps, {soak['mismatches']} wrong replies. RSS idle "
        f"before {f1(soak['rss_idle_before_mb'])} MB; during the soak start {f1(soak['rss_start_mb'])}, end "
        f"{f1(soak['rss_end_mb'])}, min {f1(soak['rss_min_mb'])}, max {f1(soak['rss_max_mb'])} MB; second half "
        f"{soak['second_half_growth_mb']:+.2f} MB (slope {soak['second_half_slope_mb_per_min']:+.2f} MB/min); "
        f"after the sessions close {f1(soak['rss_after_close_mb'])} MB.",
        table(["t (s)", "RSS MB", "episodes"], [[f0(t), f1(r), f"{e:,}"] for t, r, e in picks])]


def server_profile(server: dict) -> str:
    sp, se = server["profile"], server.get("profile_echo")
    cats = sorted(set(sp["category_us_per_step"]) | set(se["category_us_per_step"] if se else {}),
                  key=lambda k: -sp["category_us_per_step"].get(k, 0.0))
    rows = [[c, f1(sp["categories"].get(c, 0.0) * 100), f1(se["categories"].get(c, 0.0) * 100) if se else ""]
            for c in cats]
    echo = f", echo {f0(se['cpu_us_per_step'])}" if se else ""
    return (
        f"### Server step (cProfile per thread, CPU clock; {sp['sessions']} sessions)\n\n"
        "The event loop thread and every session's executor thread, merged. Profiling multiplies the "
        f"per-step CPU (ours {f0(sp['cpu_us_per_step'])} us/step profiled{echo}), inflating Python-heavy code "
        "(the engine, pydantic wrappers, asyncio) far more than C code (zlib): use the in-situ timers above for "
        "costs, this for what is hot.\n\n" + table(*drop_empty_columns(["category", "ours share %", "echo share %"],
                                                                        rows)))
