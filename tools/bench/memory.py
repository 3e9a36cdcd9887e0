"""Server memory: RSS per live session, and RSS over a soak of sessions playing back to back.

RSS is psutil's, of a fresh server of each kind after a warm-up: with no session
open, with 16 and with 64 live sessions that have each reset an episode, and after
they close. The soak plays episodes on 64 sessions of our server (each session
reconnecting every `RECONNECT_EVERY` episodes), sampling RSS every second.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import psutil

from tools.bench.common import bench_server, med
from tools.bench.replay import OURS, Clock, Replay, Tally, close_session, drive, open_sessions, worker

RECONNECT_EVERY = 20


def rss_mb(pid: int, samples: int = 5) -> float:
    """Median of a few RSS readings 50 ms apart (one reading catches allocator noise)."""
    proc = psutil.Process(pid)
    values = []
    for _ in range(samples):
        values.append(proc.memory_info().rss / 2**20)
        time.sleep(0.05)
    return med(values)


async def memory_of(app: str, replays: list[Replay], server_cpus: set[int], echo: bool) -> dict:
    with bench_server(app, cpus=server_cpus) as (url, pid):
        await drive(url, pid, 4, replays, 0.2, 1.0, echo=echo)  # every code path once, then nothing open
        await asyncio.sleep(1.0)
        rss0 = rss_mb(pid)
        held = await open_sessions(url, replays, 16)
        await asyncio.sleep(0.5)
        rss16 = rss_mb(pid)
        held += await open_sessions(url, replays, 48, offset=16)
        await asyncio.sleep(0.5)
        rss64 = rss_mb(pid)
        threads64 = psutil.Process(pid).num_threads()
        await asyncio.gather(*(close_session(ws) for ws in held))
        await asyncio.sleep(2.0)
        rss_closed = rss_mb(pid)
    return {
        "rss0_mb": rss0,
        "rss16_mb": rss16,
        "rss64_mb": rss64,
        "rss_after_close_mb": rss_closed,
        "per_session_16_mb": (rss16 - rss0) / 16,
        "per_session_64_mb": (rss64 - rss0) / 64,
        "threads_at_64": threads64,
    }


async def soak(replays: list[Replay], seconds: float, server_cpus: set[int], sessions: int = 64) -> dict:
    with bench_server(OURS, cpus=server_cpus) as (url, pid):
        proc = psutil.Process(pid)
        await drive(url, pid, 4, replays, 0.2, 1.0, echo=False)
        rss_idle = rss_mb(pid)
        sockets = await open_sessions(url, replays, sessions)
        clock, tally = Clock(), Tally()
        t0 = time.perf_counter()
        clock.stop_at = t0 + seconds
        samples: list[tuple[float, float, int]] = []

        async def sampler():
            while time.perf_counter() < clock.stop_at:
                samples.append((time.perf_counter() - t0, proc.memory_info().rss / 2**20, tally.episodes))
                await asyncio.sleep(1.0)

        await asyncio.gather(
            sampler(),
            *(
                worker(i, url, ws, replays, clock, tally, echo=False, reconnect_every=RECONNECT_EVERY)
                for i, ws in enumerate(sockets)
            ),
        )
        await asyncio.sleep(2.0)
        rss_after = rss_mb(pid)
    rs = [s[1] for s in samples]
    half = [s for s in samples if s[0] >= seconds / 2]
    return {
        "seconds": seconds,
        "sessions": sessions,
        "reconnect_every": RECONNECT_EVERY,
        "episodes": tally.episodes,
        "steps": tally.steps,
        "mismatches": tally.mismatches + tally.errors,
        "rss_idle_before_mb": rss_idle,
        "rss_start_mb": rs[0],
        "rss_end_mb": rs[-1],
        "rss_max_mb": max(rs),
        "rss_min_mb": min(rs),
        "rss_after_close_mb": rss_after,
        "second_half_growth_mb": half[-1][1] - half[0][1] if half else float("nan"),
        "second_half_slope_mb_per_min": slope_per_min([(t, r) for t, r, _ in half]),
        "samples": [[round(t, 1), round(r, 2), e] for t, r, e in samples],
    }


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points in MB per minute; NaN (unmeasured) below 3 points."""
    if len(points) < 3:
        return float("nan")
    return statistics.linear_regression([p[0] for p in points], [p[1] for p in points]).slope * 60
