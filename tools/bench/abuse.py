"""Our server under the attacks of tests/server/test_abuse.py, measured: memory, fairness, HTTP bodies.

    PYTHONPATH=. .venv/bin/python -m tools.bench.abuse [--quick] [--json out.json]

Ours (`python -m uvicorn server.app:app` with server/limits.py's flags, as every benchmarked
server) pinned to one core, the attackers and the polite client on the other.

* Memory: 64 clients at once, in `WAVES` waves, each a raw socket that offers permessage-deflate (declined) and
  then sends one frame: half declare 16 MiB (refused from the header: 1009), half send a
  compressed frame of 16 MiB of text that deflates to 16 KB although compression was declined
  (1002). The server's RSS (psutil) is sampled every 20 ms from before the first wave's
  connections until every socket of the last wave has its close, and held against the manifest's declared memory
  (openenv.yaml, `validation.resources.memory_mb`).
* Fairness: a polite client plays recorded `rule` episodes lock-step (reset, then every step,
  each reply read before the next call) and times every round trip, resets included; alone,
  and beside a flooding client, a separate process that resets once and then pipelines junk
  steps without reading a reply (the test's flooder). Rounds of alone then flooded windows;
  the medians over rounds of each window's p50 and p99.
* HTTP bodies: a POST /mcp that declares a 256 MiB body (headers only): seconds until the
  413 answer, and RSS before and after.

The earlier measurements of the server before its limits and session guard (RSS 279 -> 2,336 MB
under the frame attack; the polite client's median 258-305 ms and a 5.3 s maximum beside the
flooder) are quoted, not re-measured (that server no longer exists).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import psutil
from websockets.asyncio.client import connect

from tools.bench.common import (
    REPO_ROOT,
    allowed_cpus,
    bench_server,
    med,
    percentile,
    pin,
    record,
    workload_scenarios,
    write_json,
)
from tools.bench.markdown import f0, f1, f2, table
from tools.bench.replay import OURS, Replay, encode, ws_url

ATTACKERS = 64
# The attack is refused within tens of milliseconds, a handful of 20 ms samples: it is repeated in waves
# so that the peak is read over enough samples.
WAVES = 8
FRAME_BYTES = 16 << 20
BODY_BYTES = 256 << 20
SAMPLE_S = 0.02
# The polite client's p99 beside the flood may be at most this many times its p99 alone, or FLOOR_MS,
# whichever is larger (see `POLITE_BOUND_WHY`).
POLITE_P99_RATIO = 2.0
POLITE_P99_FLOOR_MS = 10.0
POLITE_BOUND_WHY = (
    "the bound is 2x the polite client's p99 alone or 10 ms, whichever is larger. It comes from measurements "
    "on this shared 2-core machine: on a quiet machine the polite p99 is about 0.4 ms alone and 0.5 ms beside "
    "the flooder, but while another tenant runs, its p50 stays about 0.2 ms and its p99 becomes one lost "
    "scheduler slice, 5-6 ms (a quick run measured 5.0 and 5.7 ms alone, 5.1 and 12.4 ms beside the flooder, "
    "which itself takes part of the client's core); 10 ms is two such slices and 1/25th of the earlier "
    "before-median, so a regression to anything like the old starvation fails it"
)
ISSUE_BEFORE = {
    "rss_mb": [279, 2336],
    "flooded_median_ms": [258, 305],
    "flooded_max_ms": 5300,
}
JUNK_STEP = json.dumps({"type": "step", "data": {"tool_name": "inspect_ci_run", "arguments": {"run_id": "nope"}}})

# A client pipelining steps without reading a reply, in its own process (tests/server/test_abuse.py's);
# prints how many frames it sent.
FLOODER = """
import asyncio, sys, time
from websockets.asyncio.client import connect
url, seconds, reset, step = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
sent = 0
async def run():
    global sent
    ws = await connect(url, proxy=None)
    await ws.send(reset)
    await ws.recv()
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            for _ in range(100):  # TCP pushes back once the server stops reading: the send then waits
                await asyncio.wait_for(ws.send(step), max(end - time.monotonic(), 0.01))
                sent += 1
            await asyncio.sleep(0)
    except (asyncio.TimeoutError, OSError):
        pass
    ws.transport.abort()
try:
    asyncio.run(run())
finally:
    print(sent, flush=True)
"""


def declared_memory_mb() -> int:
    """openenv.yaml's `validation.resources.memory_mb` (the manifest's declared memory)."""
    import yaml

    manifest = yaml.safe_load((REPO_ROOT / "openenv.yaml").read_text())
    return int(manifest["validation"]["resources"]["memory_mb"])


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


class Sampler:
    """RSS of `pid` every SAMPLE_S in a thread, from start to stop."""

    def __init__(self, pid: int):
        self.pid, self.samples, self._stop = pid, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(rss_mb(self.pid))
            time.sleep(SAMPLE_S)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


# ------------------------------------------------------------------ memory


def deflate_handshake(port: int) -> tuple[socket.socket, bool]:
    """A raw WebSocket that offers permessage-deflate; (socket, whether the server agreed to it)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed during the handshake")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"handshake refused: {head[:80]!r}")
    return sock, b"permessage-deflate" in head.lower()


def _frame_header(length: int, rsv1: bool = False) -> bytes:
    first = 0x81 | (0x40 if rsv1 else 0)  # FIN, text
    return struct.pack("!BBQ", first, 0x80 | 127, length) + b"\0\0\0\0"  # masked, 64-bit length, zero mask


def _close_code(sock: socket.socket) -> int | None:
    data = b""
    try:
        while len(data) < 4:
            chunk = sock.recv(64)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    if len(data) >= 4 and data[0] & 0x0F == 0x8:
        return struct.unpack("!H", data[2:4])[0]
    return None


def _attack_one(port: int, i: int, payload: bytes, go: threading.Barrier) -> tuple[int | None, bool]:
    sock, agreed = deflate_handshake(port)
    try:
        go.wait(timeout=60)  # every attacker connected: the frames arrive together
        try:
            if i % 2:  # declares 16 MiB: refused from the header, before a byte is read
                sock.sendall(_frame_header(FRAME_BYTES) + b"a" * 16384)
            else:  # a compressed frame although compression was declined
                sock.sendall(_frame_header(len(payload), rsv1=True) + payload)
        except OSError:
            pass
        return _close_code(sock), agreed
    finally:
        sock.close()


def frame_attack(pid: int, port: int) -> dict:
    compressor = zlib.compressobj(wbits=-15)
    payload = compressor.compress(b"a" * FRAME_BYTES) + compressor.flush(zlib.Z_SYNC_FLUSH)[:-4]
    time.sleep(0.5)
    before = med([rss_mb(pid) for _ in range(5)])
    results = []
    t0 = time.perf_counter()
    with Sampler(pid) as sampler, ThreadPoolExecutor(ATTACKERS) as pool:
        for _ in range(WAVES):
            go = threading.Barrier(ATTACKERS)
            results += pool.map(lambda i, go=go: _attack_one(port, i, payload, go), range(ATTACKERS))
    seconds = time.perf_counter() - t0
    time.sleep(1.0)
    codes = [c for c, _ in results]
    return {
        "attackers": ATTACKERS,
        "waves": WAVES,
        "declared_frame_bytes": FRAME_BYTES,
        "compressed_payload_bytes": len(payload),
        "rss_before_mb": before,
        "rss_peak_mb": max(sampler.samples),
        "rss_after_mb": med([rss_mb(pid) for _ in range(5)]),
        "samples": len(sampler.samples),
        "seconds": seconds,
        "close_codes": {str(c): codes.count(c) for c in sorted(set(codes), key=str)},
        "deflate_agreed": sum(agreed for _, agreed in results),
        "declared_mb": declared_memory_mb(),
    }


# ------------------------------------------------------------------ fairness


async def polite(base: str, replays: list[Replay], seconds: float) -> dict:
    """Lock-step play for `seconds`: every round trip (resets and steps) timed."""
    times, errors = [], 0
    pc = time.perf_counter
    async with connect(ws_url(base), proxy=None, max_size=2**24) as ws:
        end, i = pc() + seconds, 0
        while pc() < end:
            rep = replays[i % len(replays)]
            i += 1
            for message in (rep.reset, *rep.steps):
                t0 = pc()
                await ws.send(message)
                reply = json.loads(await ws.recv())
                times.append(pc() - t0)
                errors += reply.get("type") != "observation"
                if pc() >= end:
                    break
    return {
        "round_trips": len(times),
        "p50_ms": percentile(times, 50) * 1e3,
        "p99_ms": percentile(times, 99) * 1e3,
        "max_ms": max(times) * 1e3,
        "errors": errors,
    }


def start_flooder(base: str, seconds: float, reset: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", FLOODER, ws_url(base), str(seconds), reset, JUNK_STEP],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def fairness(base: str, pid: int, replays: list[Replay], rounds: int, window_s: float) -> dict:
    asyncio.run(polite(base, replays, 1.0))  # warm
    alone, flooded, sent, flooder_cpu = [], [], [], []
    for r in range(rounds):
        alone.append(asyncio.run(polite(base, replays, window_s)))
        flooder = start_flooder(base, 1.0 + window_s + 0.5, replays[0].reset)
        try:
            time.sleep(1.0)
            t0, c0 = time.perf_counter(), psutil.Process(flooder.pid).cpu_times()
            flooded.append(asyncio.run(polite(base, replays, window_s)))
            c1 = psutil.Process(flooder.pid).cpu_times()
            flooder_cpu.append((c1.user + c1.system - c0.user - c0.system) / (time.perf_counter() - t0))
        finally:
            out, _ = flooder.communicate(timeout=30)
        sent.append(int(out.split()[-1]) if out.strip() else 0)
        print(
            f"  round {r + 1}: alone p50 {alone[-1]['p50_ms']:.2f} p99 {alone[-1]['p99_ms']:.2f} ms; beside the "
            f"flooder ({sent[-1]:,} frames sent) p50 {flooded[-1]['p50_ms']:.2f} p99 {flooded[-1]['p99_ms']:.2f} "
            f"max {flooded[-1]['max_ms']:.1f} ms",
            flush=True,
        )
        time.sleep(0.5)

    def medians(xs: list[dict]) -> dict:
        return {k: med([x[k] for x in xs]) for k in ("round_trips", "p50_ms", "p99_ms", "max_ms")} | {
            "errors": sum(x["errors"] for x in xs)
        }

    return {
        "rounds": rounds,
        "window_s": window_s,
        "alone": medians(alone),
        "flooded": medians(flooded),
        "by_round": {"alone": alone, "flooded": flooded},
        "flooder_frames_sent": sent,
        "flooder_cpu": med(flooder_cpu),
        "bound_ratio": POLITE_P99_RATIO,
        "bound_floor_ms": POLITE_P99_FLOOR_MS,
    }


# ------------------------------------------------------------------ HTTP bodies


def refuse_body(pid: int, port: int, tries: int) -> dict:
    """POST /mcp declaring a 256 MiB body, headers only: seconds to the 413."""
    before = med([rss_mb(pid) for _ in range(5)])
    times, statuses = [], []
    for _ in range(tries):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            t0 = time.perf_counter()
            sock.sendall(
                (
                    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {BODY_BYTES}\r\n\r\n"
                ).encode()
            )
            head = b""
            while b"\r\n" not in head:
                chunk = sock.recv(256)
                if not chunk:
                    break
                head += chunk
            times.append(time.perf_counter() - t0)
            statuses.append(head.split(b"\r\n", 1)[0].decode(errors="replace"))
    return {
        "declared_bytes": BODY_BYTES,
        "tries": tries,
        "median_ms": med(times) * 1e3,
        "max_ms": max(times) * 1e3,
        "statuses": sorted(set(statuses)),
        "rss_before_mb": before,
        "rss_after_mb": med([rss_mb(pid) for _ in range(5)]),
    }


# ------------------------------------------------------------------ run


def run(quick: bool) -> dict:
    cpus = allowed_cpus()
    server_cpus, client_cpus = ({cpus[-1]}, {cpus[0]}) if len(cpus) >= 2 else (set(cpus), set(cpus))
    pinned = pin(client_cpus)
    replays = encode(record("rule", workload_scenarios(2 if quick else 4)))
    out: dict = {"server_cpus": sorted(server_cpus), "client_cpus": pinned}
    with bench_server(OURS, cpus=server_cpus) as (url, pid):
        port = int(url.rsplit(":", 1)[1])
        print("abuse: 64 clients sending 16 MiB and compressed frames at once", flush=True)
        m = out["memory"] = frame_attack(pid, port)
        print(
            f"  RSS before {m['rss_before_mb']:.0f} MB, peak {m['rss_peak_mb']:.0f} MB, after "
            f"{m['rss_after_mb']:.0f} MB; closes {m['close_codes']}",
            flush=True,
        )
        print("abuse: a polite client alone and beside a flooding client", flush=True)
        out["fairness"] = fairness(url, pid, replays, rounds=2 if quick else 3, window_s=2.0 if quick else 5.0)
        print("abuse: HTTP body declared at 256 MiB", flush=True)
        h = out["http_body"] = refuse_body(pid, port, 5 if quick else 20)
        print(f"  {h['statuses']} in {h['median_ms']:.2f} ms (median)", flush=True)
    out["issue_before"] = ISSUE_BEFORE
    return out


def polite_bound_ms(abuse: dict) -> float:
    f = abuse["fairness"]
    return max(f["bound_ratio"] * f["alone"]["p99_ms"], f["bound_floor_ms"])


def section(abuse: dict, meta: dict | None = None) -> str:
    parts = ["## 6. Abuse (`tools/bench/abuse.py`)", __doc__.split("\n\n", 2)[2].split("\n\nThe earlier")[0]]
    when = _separate_run(abuse, meta or {})
    if when:
        parts.append(
            f"These numbers come from a separate run of `python -m tools.bench.abuse` on {when}, after the run "
            "the header describes, on the same machine and code."
        )
    m = abuse.get("memory")
    if m:
        codes = ", ".join(f"{n} x {c}" for c, n in m["close_codes"].items())
        parts.append(
            f"**Frames.** {m['attackers']} clients at once, {m.get('waves', 1)} waves "
            f"({m['declared_frame_bytes'] >> 20} MiB declared, or a "
            f"{m['compressed_payload_bytes']:,}-byte compressed frame of {m['declared_frame_bytes'] >> 20} MiB; "
            f"permessage-deflate agreed in {m['deflate_agreed']} handshakes), {m['seconds']:.2f} s from the first "
            f"connection to the last close. Close codes: {codes}. RSS before {f1(m['rss_before_mb'])} MB, "
            f"**peak {f1(m['rss_peak_mb'])} MB** ({m['samples']} samples 20 ms apart), after "
            f"{f1(m['rss_after_mb'])} MB, against the {m['declared_mb']} MB the manifest declares."
        )
    f = abuse.get("fairness")
    if f:
        rows = [
            [
                "alone" if kind == "alone" else "beside the flooder",
                f0(f[kind]["round_trips"]),
                f2(f[kind]["p50_ms"]),
                f"**{f2(f[kind]['p99_ms'])}**",
                f1(f[kind]["max_ms"]),
                f[kind]["errors"],
            ]
            for kind in ("alone", "flooded")
        ]
        parts.append(
            f"**Fairness.** {f['rounds']} rounds of {f['window_s']:g} s alone, then {f['window_s']:g} s beside "
            f"the flooder (started 1 s before the window); medians over rounds. The flooder sent "
            f"{', '.join(f'{n:,}' for n in f['flooder_frames_sent'])} frames per round (TCP pushes back once "
            f"the server stops reading it) and used {f2(f['flooder_cpu'])} of a core.\n\n"
            + table(["polite client", "round trips", "p50 ms", "p99 ms", "max ms", "errors"], rows)
            + f"\n\nBeside the flood the polite p99 is {f2(f['flooded']['p99_ms'] / f['alone']['p99_ms'])}x its "
            f"p99 alone; {POLITE_BOUND_WHY} (here {f2(polite_bound_ms(abuse))} ms)."
        )
    h = abuse.get("http_body")
    if h:
        parts.append(
            f"**HTTP body.** POST /mcp declaring {h['declared_bytes'] >> 20} MiB (headers only), {h['tries']} "
            f"times: {', '.join(h['statuses'])} in {f2(h['median_ms'])} ms (median; max {f2(h['max_ms'])} ms); "
            f"RSS {f1(h['rss_before_mb'])} -> {f1(h['rss_after_mb'])} MB."
        )
    b = abuse.get("issue_before") or ISSUE_BEFORE
    parts.append(
        f"Before the limits and the session guard (earlier measurements, quoted, not re-measured: that server "
        f"no longer exists), the frame attack took RSS from {b['rss_mb'][0]:,} to {b['rss_mb'][1]:,} MB, and "
        f"beside the flooder the polite client waited a median {b['flooded_median_ms'][0]}-"
        f"{b['flooded_median_ms'][1]} ms, {b['flooded_max_ms'] / 1000:g} s at most."
    )
    return "\n\n".join(parts)


def _separate_run(abuse: dict, meta: dict) -> str | None:
    """The date of the abuse measurement when it falls outside the run the report's header describes."""
    date, start = abuse.get("date"), meta.get("date")
    if not date or not start:
        return None
    try:
        began = dt.datetime.strptime(start, "%Y-%m-%d %H:%M")
        measured = dt.datetime.strptime(date, "%Y-%m-%d %H:%M")
    except ValueError:
        return None
    wall_min = float(meta.get("wall_s", 0) or 0) / 60 if "wall_s" in meta else float(meta.get("wall_min", 0) or 0)
    return date if measured > began + dt.timedelta(minutes=wall_min + 1) else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Our server under the abuse tests' attacks, measured.")
    parser.add_argument("--quick", action="store_true", help="shorter windows, fewer rounds (~30 s)")
    parser.add_argument("--json", help="write the results here (default: stdout)")
    args = parser.parse_args(argv)
    write_json(args.json, {**run(args.quick), "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M")})


if __name__ == "__main__":
    main()
