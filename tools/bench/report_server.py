"""The server sections of docs/benchmarks.md: load, the tail, what-ifs, workers, in-situ timers, memory, soak,
server profile.

Each function takes the server part's JSON (`tools/bench/server.py`) and returns Markdown,
or "" when the piece it reports did not run.
"""

from __future__ import annotations

from tools.bench.markdown import drop_empty_columns, f0, f1, f2, table


def sections(results: dict) -> list[str]:
    server = results["server"]
    pieces = [
        s
        for s in (
            load_section(server),
            tail_section(server),
            variants_section(server),
            workers_section(server),
            timers_section(server),
        )
        if s
    ]
    return ["\n\n".join([intro(server), *pieces]) if pieces else "", memory_section(server)]


def intro(server: dict) -> str:
    flags = " ".join(server.get("uvicorn_flags", []))
    return (
        "## 2. Server (`tools/bench/server.py`, `tools/bench/text_echo_app.py`, `tools/bench/echo_app.py`)\n\n"
        "Ours (`server.app:app`) against two echo environments on the same OpenEnv + uvicorn stack, all "
        "`create_app(max_concurrent_envs=64)` with the start-up heap frozen (as `server/app.py` does): the **text "
        "echo** (`tools/bench/text_echo_app.py`), which answers each reset and step with exactly the `text` ours sends "
        "there (loaded at start-up from the recorded transcripts, no engine work; the floor the goals use, since "
        "the model's text is payload no design can drop), and the **bare echo** "
        "(`tools/bench/echo_app.py`, a tool-name "
        "echo; its ratios are for reference). All run on the served stack: `python -m uvicorn APP --log-level "
        f"warning {flags}`, server/limits.py's flags as `releaseops-serve` passes them (the what-ifs and timers "
        "apply the same settings through `uvicorn.run`), so permessage-deflate is off; ENABLE_WEB_INTERFACE unset, "
        f"pinned to CPU {server['server_cpus']}. The client (asyncio + `websockets`) offers permessage-deflate "
        "as OpenEnv's client does; the servers decline it, and every handshake is checked to have agreed to no "
        f"extension. It is pinned to CPU {server['client_cpus']} and sends all three the same messages. "
        f"Sessions replay recorded `rule` episodes ({server['episodes']} scenarios, "
        f"{server['steps_per_episode']:.1f} steps each): reset, then every step; ours and the text echo must answer "
        "each step with exactly the text the in-process run saw. Reply bytes are each step reply's JSON frame as "
        "sent (uncompressed, as served)."
    )


NAMES = ("ours", "text_echo", "echo")


def _trio(row: dict, key: str, fmt=f0) -> str:
    """ours / text echo / bare echo"""
    return " / ".join(fmt(row[f"{name}_{key}"]) for name in NAMES)


def _ranges(table_rows: list[dict], key: str) -> str:
    return "; ".join(f"{r['sessions']} sessions {f2(r[key][0])} - {f2(r[key][1])}" for r in table_rows)


def load_section(server: dict) -> str:
    if "load" not in server:
        return ""
    ld = server["load"]
    rows = [
        [
            row["sessions"],
            _trio(row, "throughput"),
            f"**{f2(row['throughput_ratio'])}x**",
            f"{f2(row['throughput_ratio_bare'])}x",
            _trio(row, "p50_ms", f2),
            _trio(row, "p99_ms", f2),
            f"**{f2(row['p99_ratio'])}x**",
            f"{f2(row['p99_ratio_bare'])}x",
            _trio(row, "server_cpu_us_per_step"),
            f0(row["cpu_us_minus_text_echo"]),
            _trio(row, "server_cpu", f2),
            _trio(row, "client_cpu", f2),
            _trio(row, "reply_bytes_p50"),
            _trio(row, "reply_bytes_p99"),
            _trio(row, "mean_reply_bytes"),
            row["mismatches"],
        ]
        for row in ld["table"]
    ]
    return (
        f"Load: {ld['rounds']} rounds, each a {ld['warmup_s']:g} s warm-up and a {ld['window_s']:g} s window per "
        "server and concurrency, order rotating; medians. Throughput counts step replies (resets excluded but "
        "performed); latency is send-to-reply per step. Triples are ours / text echo / bare echo; ratios are "
        "ours to the text echo (**bold**, the goals') and to the bare echo.\n\n"
        + table(
            [
                "sessions",
                "steps/s",
                "ours / text echo",
                "ours / bare echo",
                "p50 ms",
                "p99 ms",
                "p99 ours / text echo",
                "p99 ours / bare echo",
                "server CPU us/step",
                "CPU us/step ours - text echo",
                "server CPU (cores)",
                "client CPU (cores)",
                "reply bytes median",
                "reply bytes p99",
                "reply bytes mean",
                "wrong replies",
            ],
            rows,
        )
        + f"\n\nThroughput ratio to the text echo, range over rounds: {_ranges(ld['table'], 'throughput_ratio_range')}"
        f". p99 ratio: {_ranges(ld['table'], 'p99_ratio_range')}."
    )


def _full_gcs(row: dict) -> str:
    if not all(f"{name}_full_gc_per_s" in row for name in NAMES):
        return ""
    return " / ".join(
        f"{f2(row[f'{n}_full_gc_per_s'])}/s, {row[f'{n}_full_gc_share'] * 100:.1f}%, max "
        f"{f0(row[f'{n}_full_gc_max_ms'])} ms"
        for n in NAMES
    )


def variants_section(server: dict) -> str:
    if "variants" not in server:
        return ""
    va = server["variants"]
    rows = [
        [
            row["variant"],
            _trio(row, "throughput"),
            f"**{f2(row['throughput_ratio'])}x**",
            f"{f2(row['throughput_ratio_bare'])}x",
            _trio(row, "p99_ms", f1),
            f"**{f2(row['p99_ratio'])}x**",
            f"{f2(row['p99_ratio_bare'])}x",
            _trio(row, "server_cpu_us_per_step"),
            ", ".join(str(e) for e in row.get("extensions", [])),
            _full_gcs(row),
        ]
        for row in va["table"]
    ]
    header = [
        "variant",
        "steps/s",
        "ours / text echo",
        "ours / bare echo",
        "p99 ms",
        "p99 ours / text echo",
        "p99 ours / bare echo",
        "CPU us/step",
        "extensions agreed",
        "full GCs",
    ]
    return (
        f"### What-ifs at {va['sessions']} sessions\n\n"
        f"The same three servers under `tools/bench/_uvicorn_wrap.py` (`uvicorn.run` with the same settings, plus a "
        f"full-collection log through `gc.callbacks`), {va['rounds']} rounds of {va['window_s']:g} s each, "
        "medians; triples are ours / text echo / bare echo. The client offers permessage-deflate in every row; "
        "the servers agree to it only in the row that turns it on (`BENCH_WS_DEFLATE=1`: "
        "`ws_per_message_deflate=True`, uvicorn's own default, which the served stack turns off). The "
        "extensions column is what the servers agreed to, read from each handshake (empty: none). "
        "Ours runs each session's reset and step on the "
        "event loop (it overrides `step_async`, so OpenEnv skips the per-session executor thread); the floors "
        "use OpenEnv's default executor, except in the row where they too step on the event loop "
        "(`BENCH_LOOP_STEP=1`, `tools/bench/echo_app.py:LoopStep`), which takes dispatch out of the comparison. "
        "Ours also runs behind the session guard (server/session_guard.py: one yield per received frame, a "
        "watchdog per connection); the floors do not, except in the row where they do too (`BENCH_GUARD=1`, "
        "`tools/bench/echo_app.py:guarded`). "
        "Full collections are the generation-2 GC runs that started inside the measurement windows.\n\n"
        + table(*drop_empty_columns(header, rows))
    )


def _by_round(xs: list[float]) -> str:
    return ", ".join(f2(x) for x in xs)


def tail_section(server: dict) -> str:
    """The 64-session p99 read three ways: steps only (the goal's), reset round trips counted, and without
    the steps that end a release phase; per round, so that 3 rounds can be read against 5."""
    if "load" not in server:
        return ""
    rows = []
    sources = [("load table", {r["sessions"]: r for r in server["load"]["table"]}.get(64))]
    sources += [(f"what-if: {r['variant']}", r) for r in server.get("variants", {}).get("table", [])]
    for label, row in sources:
        if not row or "p99_resets_ratio" not in row:
            continue
        for what, key, ms, pooled in (
            ("steps only (the goal's)", "p99_ratio", "p99_ms", "pooled_p99_ratio"),
            ("resets counted", "p99_resets_ratio", "p99_with_resets_ms", "pooled_p99_resets_ratio"),
            ("steps ending no phase", "p99_no_phase_ends_ratio", "p99_without_phase_ends_ms", None),
        ):
            by_round = row[f"{key}_by_round"]
            rows.append(
                [
                    label,
                    what,
                    f"{f2(row[f'ours_{ms}'])} / {f2(row[f'text_echo_{ms}'])}",
                    f"**{f2(row[key])}x**",
                    f"{f2(sorted(by_round[:3])[1])}x" if len(by_round) >= 3 else "",
                    f"{f2(row[pooled])}x" if pooled and pooled in row else "",
                    f"{f2(row[pooled + '_first3'])}x" if pooled and pooled + "_first3" in row else "",
                    _by_round(by_round),
                ]
            )
    if not rows:
        return ""
    l64 = {r["sessions"]: r for r in server["load"]["table"]}[64]
    return (
        "### The tail at 64 sessions\n\n"
        "The p99 round trip, ours / text echo, three ways: steps only (what the goal and the load table count), "
        "with the reset round trips counted in the same distribution (what a trainer waits on; an independent "
        "harness counted them), and without the steps that end a release phase or the episode (the engine's "
        "dearer steps). Per-round ratios in run order, their median, the median of the first 3 rounds "
        "alone, and the ratio of p99s taken over the samples of all rounds (or of the first 3) pooled, as a "
        "harness that keeps one distribution per server reports it. Resets at 64 sessions (load table): ours p50 / p99 "
        f"{f2(l64['ours_reset_p50_ms'])} / {f2(l64['ours_reset_p99_ms'])} ms, text echo "
        f"{f2(l64['text_echo_reset_p50_ms'])} / {f2(l64['text_echo_reset_p99_ms'])} ms; steps that end a phase, "
        f"p99 ours {f2(l64['ours_phase_end_p99_ms'])} ms, text echo {f2(l64['text_echo_phase_end_p99_ms'])} ms."
        "\n\n"
        + table(
            *drop_empty_columns(
                [
                    "run",
                    "p99 of",
                    "ours / text echo ms (medians)",
                    "ratio (median of rounds)",
                    "median, first 3 rounds",
                    "pooled",
                    "pooled, first 3 rounds",
                    "per round",
                ],
                rows,
            )
        )
    )


def workers_section(server: dict) -> str:
    if "workers" not in server:
        return ""
    wk = server["workers"]
    rows = [
        [
            row["workers"],
            f0(row["throughput"]),
            f"{f2(row['p50_ms'])} / {f2(row['p99_ms'])}",
            f0(row["server_cpu_us_per_step"]),
            f2(row["server_cpu"]),
            " + ".join(f2(c) for c in row["server_cpu_by_process"]),
            f2(row["client_cpu"]),
            f2(row["server_cpu"] + row["client_cpu"]),
            row["mismatches"],
        ]
        for row in wk["table"]
    ]
    return (
        f"### Workers at {wk['sessions']} sessions\n\n"
        f"Ours under `uvicorn server.app:app --workers N` with server/limits.py's flags (what `releaseops-serve "
        f"--workers N` runs; `--log-level info --no-access-log` so the bench sees every worker's \"Application "
        f'startup complete" before loading it), N = 1 and 2, both alive for the whole piece and driven in turns, '
        f"{wk['rounds']} rounds of {wk['window_s']:g} s; medians. The servers and the load client are all on CPUs "
        f"{wk['cpus']}, sharing them as a trainer on the same machine would. Server CPU is summed over "
        f"the supervisor and every worker "
        "(psutil, the server's process tree); the per-process split lists the busiest first.\n\n"
        + table(
            [
                "workers",
                "steps/s",
                "p50 / p99 ms",
                "server CPU us/step",
                "server CPU (cores)",
                "per process (cores)",
                "client CPU (cores)",
                "total (cores)",
                "wrong replies",
            ],
            rows,
        )
        + f"\n\n2 workers / 1: **{f2(wk['speedup'])}x** (range over rounds "
        f"{f2(wk['speedup_range'][0])} - {f2(wk['speedup_range'][1])})."
    )


TIMED = ("env.step", "env.reset", "deserialize_action", "serialize_observation", "response.model_dump_json")


def timers_section(server: dict) -> str:
    if "timers" not in server:
        return ""
    tm = server["timers"]
    o, t, e = tm["ours"], tm["text_echo"], tm["echo"]
    rows = [
        [f"`{k}`", *(f1(x["us_per_step"][k]) for x in (o, t, e)), f1(o["us_per_step"][k] - t["us_per_step"][k])]
        for k in TIMED
        if all(k in x["us_per_step"] for x in (o, t, e))
    ]
    rows.append(
        [
            "rest of the server",
            f1(o["rest_us_per_step"]),
            f1(t["rest_us_per_step"]),
            f1(e["rest_us_per_step"]),
            f1(o["rest_us_per_step"] - t["rest_us_per_step"]),
        ]
    )
    rows.append(
        [
            "**server CPU per step**",
            *(f"**{f1(x['server_cpu_us_per_step'])}**" for x in (o, t, e)),
            f"**{f1(o['server_cpu_us_per_step'] - t['server_cpu_us_per_step'])}**",
        ]
    )
    rows.append(
        ["mean reply bytes", f0(o["mean_reply_bytes"]), f0(t["mean_reply_bytes"]), f0(e["mean_reply_bytes"]), ""]
    )
    text = (
        f"### Where a server step's CPU goes ({tm['sessions']} sessions, in-situ timers)\n\n"
        "Thread CPU time of each piece, read inside the running servers (two clock reads per call, no "
        "profiler; all servers with `gc.freeze()` so collection pauses do not land in a timed piece), per "
        "step; `env.reset` is amortized over the steps of its episode. The rest is uvicorn, websockets "
        "(framing; no compression, as served), asyncio, the session guard, "
        "the per-session executor hop (the floors'; ours steps on the "
        "event loop) and OpenEnv's handler.\n\n"
        + table(["piece (us per step)", "ours", "text echo", "bare echo", "ours - text echo"], rows)
    )
    pl = server.get("pipeline")
    if pl and "text_echo" in pl:

        def trio(key: str, fmt=f1) -> str:
            return " / ".join(fmt(pl[n][key]) for n in NAMES)

        text += (
            f"\n\nIn-process, hot (no network, no executor hop; `tools/bench/cpu.py:pipeline`), ours / "
            f"text echo / bare "
            f"echo: parse {trio('parse_us')} us, `env.step` {trio('env_step_us')} us (the engine's own step "
            f"{f1(pl['engine_step_us'])} us), `serialize_observation` {trio('serialize_us')} us, response JSON "
            f"{trio('response_json_us')} us; total {trio('total_us')} us per step, responses of "
            f"{trio('mean_response_bytes', f0)} bytes (mean)."
        )
    return text


def memory_section(server: dict) -> str:
    parts = []
    if "memory" in server:
        mem = server["memory"]
        rows = [
            [
                name,
                f1(x["rss0_mb"]),
                f1(x["rss16_mb"]),
                f1(x["rss64_mb"]),
                f1(x["rss_after_close_mb"]),
                f"{x['per_session_16_mb']:.3f}",
                f"**{x['per_session_64_mb']:.3f}**",
                x["threads_at_64"],
            ]
            for name, x in ((n, mem[n]) for n in ("ours", "echo"))
        ]
        parts += [
            "RSS (psutil) of a fresh server of each kind after a warm-up (4 sessions playing, then closed): with no "
            "session open, with 16 and with 64 live sessions that have each reset an episode, and after they close.",
            table(
                [
                    "server",
                    "RSS 0 sessions MB",
                    "16 sessions",
                    "64 sessions",
                    "after close",
                    "MB/session (16)",
                    "MB/session (64)",
                    "threads at 64",
                ],
                rows,
            ),
        ]
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
        table(["t (s)", "RSS MB", "episodes"], [[f0(t), f1(r), f"{e:,}"] for t, r, e in picks]),
    ]


def server_profile(server: dict) -> str:
    sp, se = server["profile"], server.get("profile_text_echo")
    cats = sorted(
        set(sp["category_us_per_step"]) | set(se["category_us_per_step"] if se else {}),
        key=lambda k: -sp["category_us_per_step"].get(k, 0.0),
    )
    rows = [
        [
            c,
            f1(sp["categories"].get(c, 0.0) * 100),
            f1(se["categories"].get(c, 0.0) * 100) if se else "",
            f0(sp["category_us_per_step"].get(c, 0.0)),
            f0(se["category_us_per_step"].get(c, 0.0)) if se else "",
        ]
        for c in cats
    ]
    echo = f", text echo {f0(se['cpu_us_per_step'])}" if se else ""
    return (
        f"### Server step (cProfile per thread, CPU clock; {sp['sessions']} sessions)\n\n"
        "The event loop thread and every session's executor thread, merged. Profiling multiplies the "
        f"per-step CPU (ours {f0(sp['cpu_us_per_step'])} us/step profiled{echo}), inflating Python-heavy code "
        "(the engine, pydantic wrappers, asyncio) far more than C code: use the in-situ timers above for "
        "costs, this for what is hot.\n\n"
        + table(
            *drop_empty_columns(
                [
                    "category",
                    "ours share %",
                    "text echo share %",
                    "ours us/step (profiled)",
                    "text echo us/step (profiled)",
                ],
                rows,
            )
        )
    )
