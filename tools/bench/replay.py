"""Drive a running server over `/ws` with recorded episodes: sessions, replay workers, one measured window.

A session is one WebSocket: `{"type":"reset","data":scenario}`, then one
`{"type":"step","data":{"tool_name":..., "arguments":...}}` per recorded call.
Every reply is checked: ours and the text echo must return exactly the text the
in-process run saw, the bare echo the tool name. `drive` opens N sessions, replays through a warm-up
and a window, and reports what completed inside the window: step latencies (the figures the goals use),
and beside them the reset round trips and the steps that end a release phase (or the episode), kept apart
so that the tail can be read with and without them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from dataclasses import dataclass, field

import psutil
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tools.bench.common import percentile

OURS = "server.app:app"
ECHO = "tools.bench.echo_app:app"
TEXT_ECHO = "tools.bench.text_echo_app:app"


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/ws"


@dataclass
class Replay:
    """Pre-encoded messages of one recorded episode."""

    reset: str
    steps: list[str]
    tools: list[str]
    expected: list[str | None]
    # steps whose result ends a release phase or the episode (`"phase_end":true` or an `outcome`):
    # the engine's dearer steps, about 4 ordinary ones each
    phase_end: list[bool] = field(default_factory=list)


def ends_phase(text: str | None) -> bool:
    return bool(text) and ('"phase_end":true' in text or '"outcome":' in text)


def encode(episodes: list[dict]) -> list[Replay]:
    out = []
    for ep in episodes:
        expected = [r if r is not None else e for r, e in zip(ep["results"], ep["errors"])]
        out.append(
            Replay(
                reset=json.dumps({"type": "reset", "data": ep["scenario"]}),
                steps=[json.dumps({"type": "step", "data": {"tool_name": t, "arguments": a}}) for t, a in ep["calls"]],
                tools=[t for t, _ in ep["calls"]],
                expected=expected,
                phase_end=[ends_phase(x) for x in expected],
            )
        )
    return out


@dataclass
class Clock:
    t_start: float = float("inf")
    t_end: float = float("inf")
    stop_at: float = float("inf")


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)  # steps, inside the window
    ends_phase: list[bool] = field(default_factory=list)  # beside `latencies`: that step ended a phase
    reset_latencies: list[float] = field(default_factory=list)  # reset round trips, inside the window
    steps_in_window: int = 0
    resets_in_window: int = 0
    steps: int = 0
    episodes: int = 0
    mismatches: int = 0
    errors: int = 0
    reply_bytes: int = 0
    replies: int = 0
    window_reply_bytes: list[int] = field(default_factory=list)  # each step reply inside the window


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


async def open_sessions(
    base: str, replays: list[Replay], n: int, offset: int = 0, compression: str | None = "deflate"
) -> list:
    """`n` sessions, session i reset with the episode worker i starts from (`first_episode`)."""
    return list(
        await asyncio.gather(
            *(
                open_session(base, replays[first_episode(offset + i, replays)].reset, compression=compression)
                for i in range(n)
            )
        )
    )


def first_episode(idx: int, replays: list[Replay]) -> int:
    """Workers start at spread-out episodes so that concurrent sessions do not play in lockstep."""
    return (idx * 7) % len(replays)


async def close_session(ws) -> None:
    with contextlib.suppress(Exception):
        await ws.send('{"type":"close"}')
    with contextlib.suppress(Exception):
        await ws.close()


async def worker(
    idx: int,
    base: str,
    ws,
    replays: list[Replay],
    clock: Clock,
    tally: Tally,
    echo: bool,
    reconnect_every: int | None = None,
    compression: str | None = "deflate",
) -> None:
    """Replay episodes on `ws` (already reset with this worker's first episode) until `clock.stop_at`."""
    pc = time.perf_counter
    cursor = first_episode(idx, replays)
    played = 0
    reset_done = True
    try:
        while pc() < clock.stop_at:
            rep = replays[cursor % len(replays)]
            cursor += 1
            if reconnect_every and played and played % reconnect_every == 0:
                await close_session(ws)
                ws = await open_session(base, rep.reset, compression=compression)
                reset_done = True
            if not reset_done:
                t0 = pc()
                await ws.send(rep.reset)
                reply = json.loads(await ws.recv())
                if reply.get("type") != "observation":
                    tally.errors += 1
                t = pc()
                if clock.t_start <= t <= clock.t_end:
                    tally.resets_in_window += 1
                    if t0 >= clock.t_start:
                        tally.reset_latencies.append(t - t0)
            reset_done = False
            if await _play_steps(ws, rep, clock, tally, echo):
                played += 1
                tally.episodes += 1
    finally:
        await close_session(ws)


async def _play_steps(ws, rep: Replay, clock: Clock, tally: Tally, echo: bool) -> bool:
    """Send one episode's steps, timing and checking each reply; False if the clock stopped it."""
    pc = time.perf_counter
    for msg, tool, expected, phase_end in zip(rep.steps, rep.tools, rep.expected, rep.phase_end):
        if pc() >= clock.stop_at:
            return False
        t0 = pc()
        await ws.send(msg)
        raw = await ws.recv(decode=False)  # bytes: the frame's size as sent, before permessage-deflate
        t1 = pc()
        tally.steps += 1
        tally.replies += 1
        tally.reply_bytes += len(raw)
        if clock.t_start <= t1 <= clock.t_end:
            tally.steps_in_window += 1
            tally.window_reply_bytes.append(len(raw))
            if t0 >= clock.t_start:
                tally.latencies.append(t1 - t0)
                tally.ends_phase.append(phase_end)
        reply = json.loads(raw)
        if reply.get("type") != "observation":
            tally.errors += 1
            continue
        if reply["data"]["observation"].get("text") != (tool if echo else expected):
            tally.mismatches += 1
    return True


def server_processes(pid: int) -> list[psutil.Process]:
    """The server and every process under it (uvicorn's workers when it runs several)."""
    proc = psutil.Process(pid)
    return [proc, *proc.children(recursive=True)]


def cpu_seconds(pid: int) -> float:
    """CPU time of `pid` itself (the load client: never the servers it started)."""
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def cpu_by_process(pid: int) -> dict[int, float]:
    out = {}
    for proc in server_processes(pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
    return out


def extensions(ws) -> str | None:
    """The WebSocket extensions the server agreed to (None: none, e.g. no permessage-deflate)."""
    return ws.response.headers.get("Sec-WebSocket-Extensions")


async def drive(
    base: str,
    pid: int,
    sessions: int,
    replays: list[Replay],
    warmup_s: float,
    window_s: float,
    echo: bool,
    compression: str | None = "deflate",
    deflate: bool = False,
) -> dict:
    """Open `sessions` sessions, replay for warm-up + window, close them; measure the window.

    The client offers permessage-deflate (`compression`, as OpenEnv's client does); the served stack
    declines it, and the run stops if a server agrees to it unless `deflate` says it was turned on."""
    sockets = await open_sessions(base, replays, sessions, compression=compression)
    clock, tally = Clock(), Tally()
    clock.t_start = time.perf_counter() + warmup_s
    clock.t_end = clock.t_start + window_s
    clock.stop_at = clock.t_end + 0.05
    agreed = {extensions(ws) for ws in sockets}
    if not deflate and agreed != {None}:
        raise RuntimeError(f"the served stack declines permessage-deflate, but the server agreed to {agreed}")
    if deflate and (compression is None or None in agreed):
        raise RuntimeError(f"permessage-deflate was turned on, but the handshakes agreed to {agreed}")
    me = os.getpid()
    cpu = {}

    async def sample():
        await asyncio.sleep(max(0.0, clock.t_start - time.perf_counter()))
        cpu["server0"], cpu["client0"], cpu["t0"], cpu["wall0"] = (
            cpu_by_process(pid),
            cpu_seconds(me),
            time.perf_counter(),
            time.time(),
        )
        await asyncio.sleep(max(0.0, clock.t_end - time.perf_counter()))
        cpu["server1"], cpu["client1"], cpu["t1"], cpu["wall1"] = (
            cpu_by_process(pid),
            cpu_seconds(me),
            time.perf_counter(),
            time.time(),
        )

    await asyncio.gather(
        sample(),
        *(worker(i, base, ws, replays, clock, tally, echo, compression=compression) for i, ws in enumerate(sockets)),
    )
    span = cpu["t1"] - cpu["t0"]
    by_pid = {p: (cpu["server1"][p] - cpu["server0"].get(p, 0.0)) / span for p in cpu["server1"]}
    server_cpu_s = sum(by_pid.values()) * span
    lat, resets = tally.latencies, tally.reset_latencies
    plain = [x for x, ends in zip(lat, tally.ends_phase) if not ends]
    heavy = [x for x, ends in zip(lat, tally.ends_phase) if ends]
    sizes = tally.window_reply_bytes

    def ms(xs: list[float], q: float) -> float:
        return percentile(xs, q) * 1e3 if xs else float("nan")

    return {
        "sessions": sessions,
        "steps_in_window": tally.steps_in_window,
        "throughput": tally.steps_in_window / window_s,
        "resets_per_s": tally.resets_in_window / window_s,
        "p50_ms": percentile(lat, 50) * 1e3 if lat else float("nan"),
        "p99_ms": percentile(lat, 99) * 1e3 if lat else float("nan"),
        "latency_samples": len(lat),
        # the tail read other ways: every round trip (resets counted), steps that end no phase, resets alone
        "p99_with_resets_ms": ms(lat + resets, 99),
        "p99_without_phase_ends_ms": ms(plain, 99),
        "reset_p50_ms": ms(resets, 50),
        "reset_p99_ms": ms(resets, 99),
        "reset_samples": len(resets),
        "phase_end_p50_ms": ms(heavy, 50),
        "phase_end_p99_ms": ms(heavy, 99),
        "phase_end_samples": len(heavy),
        # raw samples for pooled percentiles over rounds (`tools/bench/load.py:compare` reads and drops them)
        "_steps": lat,
        "_round_trips": lat + resets,
        "server_cpu": server_cpu_s / span,
        "server_cpu_us_per_step": server_cpu_s / max(1, tally.steps_in_window) * 1e6,
        # cores used by each server process, the busiest first (one entry per uvicorn worker, and the supervisor)
        "server_cpu_by_process": sorted(by_pid.values(), reverse=True),
        "extensions": sorted(agreed, key=str),
        "window_wall": [cpu["wall0"], cpu["wall1"]],
        "client_cpu": (cpu["client1"] - cpu["client0"]) / span,
        "mismatches": tally.mismatches,
        "errors": tally.errors,
        "mean_reply_bytes": tally.reply_bytes / max(1, tally.replies),
        "reply_bytes_p50": percentile(sizes, 50),
        "reply_bytes_p99": percentile(sizes, 99),
    }


async def warm_up(
    servers: dict[str, tuple[str, int]],
    replays: list[Replay],
    window_s: float = 0.8,
    compression: str | None = "deflate",
    deflate: bool = False,
) -> None:
    """4 sessions on each server for a moment (imports, first sessions, caches), not measured."""
    for name, (url, pid) in servers.items():
        await drive(url, pid, 4, replays, 0.2, window_s, echo=name == "echo", compression=compression, deflate=deflate)
