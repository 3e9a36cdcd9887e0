"""Hold under abuse: no client takes the slots, starves others, blows up memory or kills a session.

Each attack runs against a live server on 127.0.0.1 with short bounds
(`SESSION_CLAIM_TIMEOUT_S=2`, `SESSION_IDLE_TIMEOUT_S=3`), bounded in time and
count, and asserts the published bound (docs/server.md, "Limits"). That server
lets one address hold every slot (`MAX_SESSIONS_PER_CLIENT=0`, the operator's
setting for a trainer behind one address), so each attack is measured alone;
the default per-address share and a bare `uvicorn server.app:app` have servers
of their own. Nothing waits on a fixed timer of a second or more: each test
waits for the condition it needs, in a loop bounded in count and time. The web
board's attacks are in test_web_abuse.py; bad input and the Task API in
test_bad_input.py and test_hidden_truth_api.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from server import limits, session_guard
from tools.bench.abuse import FLOODER, deflate_handshake, rss_mb
from tools.bench.abuse import _close_code as close_code
from tools.bench.abuse import _frame_header as frame_header
from tools.bench.launch import free_port, uvicorn_process, wait_for_health
from tools.bench.launch import stop as stop_server

REPO_ROOT = Path(__file__).resolve().parents[2]
CLAIM_S, IDLE_S, SLOTS = 2.0, 3.0, 4
BOUNDS = {"SESSION_CLAIM_TIMEOUT_S": str(CLAIM_S), "SESSION_IDLE_TIMEOUT_S": str(IDLE_S)}
# What the guard adds to a bound: the watchdog wakes at the deadline, the reaper looks every second.
SLACK_S = limits.REAP_INTERVAL_S + 1.0
RESET = json.dumps({"type": "reset", "data": {"seed": 1}})
ASK = json.dumps(
    {"type": "step", "data": {"tool_name": "ask_worker", "arguments": {"worker_id": "qa_triage", "question_type": "x"}}}
)
ASK_ARGS = {"worker_id": "qa_triage", "question_type": "policy_basis"}
JUNK_STEP = json.dumps({"type": "step", "data": {"tool_name": "inspect_ci_run", "arguments": {"run_id": "nope"}}})


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(base_url, pid, log path): four slots, short claim and idle bounds, one address may hold them all."""
    log = tmp_path_factory.mktemp("abuse") / "server.log"
    env = {**BOUNDS, "MAX_CONCURRENT_ENVS": str(SLOTS), "MAX_SESSIONS_PER_CLIENT": "0", "ENABLE_WEB_INTERFACE": "false"}
    with uvicorn_process("server.app:app", env=env, log_path=log) as (base, pid):
        yield base, pid, log


def ws_url(base: str, path: str = "/ws") -> str:
    return base.replace("http://", "ws://") + path


def wait_until(condition, timeout: float, what: str, every: float = 0.05):
    """Poll `condition()` until it returns a true value (returned), at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(every)


async def wait_closed(ws, timeout: float) -> tuple[float, list[dict]]:
    """Read frames until the server closes the socket; (seconds it took, the frames read)."""
    start, frames = time.monotonic(), []
    try:
        async with asyncio.timeout(timeout):
            while True:
                frames.append(json.loads(await ws.recv()))
    except ConnectionClosed:
        return time.monotonic() - start, frames


async def free_slots(base: str, timeout: float) -> float:
    """Seconds until SLOTS sockets can all reset at once (the slots are free)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        sockets = [await connect(ws_url(base)) for _ in range(SLOTS)]
        try:
            replies = []
            for ws in sockets:
                await ws.send(RESET)
                replies.append(json.loads(await ws.recv()))
            if all(r["type"] == "observation" for r in replies):
                return time.monotonic() - start
        except ConnectionClosed:
            pass
        finally:
            for ws in sockets:
                await ws.close()
        await asyncio.sleep(0.25)
    raise AssertionError(f"the slots were not free within {timeout} s")


# ------------------------------------------------------------------ slots


def _rpc(base: str, method: str, params: dict) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(base + "/mcp", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def test_sockets_that_never_reset_lose_their_slots_within_the_claim_bound(server):
    base, _, _ = server

    async def main():
        holders = [await connect(ws_url(base)) for _ in range(SLOTS)]
        await asyncio.sleep(0.2)
        async with connect(ws_url(base)) as late:  # the 65th client, here the fifth: refused on arrival
            refusal = json.loads(await late.recv())
        closes = await asyncio.gather(*(wait_closed(ws, CLAIM_S + SLACK_S + 2) for ws in holders))
        return refusal, closes

    refusal, closes = asyncio.run(main())
    assert refusal["data"]["code"] == "CAPACITY_REACHED"
    # The refusal names when to retry: a slot frees by the claim bound at the latest.
    assert 1 <= refusal["data"]["retry_after_s"] <= CLAIM_S + SLACK_S
    assert f"retry in {refusal['data']['retry_after_s']} s" in refusal["data"]["message"]
    for seconds, frames in closes:
        assert seconds <= CLAIM_S + SLACK_S
        assert frames and frames[-1]["data"]["code"] == "SESSION_CLOSED"
        assert "SESSION_CLAIM_TIMEOUT_S" in frames[-1]["data"]["message"]
    assert asyncio.run(free_slots(base, timeout=5)) < 5


def test_junk_state_and_refused_frames_do_not_keep_a_slot(server):
    base, _, _ = server

    async def main():
        async with connect(ws_url(base)) as ws:
            await ws.send(RESET)
            assert json.loads(await ws.recv())["type"] == "observation"
            played = time.monotonic()
            junk = [
                {"type": "state"},
                {"type": "step", "data": {}},  # fails validation
                {"type": "step", "data": {"type": "list_tools"}},  # changes nothing
                {"type": "nope"},
                [1, 2, 3],  # answered by the frame guard
            ]
            try:
                async with asyncio.timeout(IDLE_S + SLACK_S + 3):
                    for i in range(1000):
                        await ws.send(json.dumps(junk[i % len(junk)]))
                        reply = json.loads(await ws.recv())
                        if reply["type"] == "error" and reply["data"]["code"] == "SESSION_CLOSED":
                            return time.monotonic() - played, reply
                        await asyncio.sleep(0.2)
            except ConnectionClosed:
                return time.monotonic() - played, None
        raise AssertionError("junk kept the session open")

    seconds, reply = asyncio.run(main())
    assert IDLE_S <= seconds <= IDLE_S + SLACK_S
    assert reply is None or "SESSION_IDLE_TIMEOUT_S" in reply["data"]["message"]


def test_real_play_keeps_a_slot_past_the_idle_bound(server):
    base, _, _ = server

    async def main():
        async with connect(ws_url(base)) as ws:
            end = time.monotonic() + IDLE_S * 2
            while time.monotonic() < end:  # a reset or a counted call every 0.3 of the bound, for twice the bound
                for message in (RESET, ASK):
                    await ws.send(message)
                    assert json.loads(await ws.recv())["type"] == "observation"
                await asyncio.sleep(IDLE_S * 0.3)

    asyncio.run(main())


def test_http_mcp_sessions_are_held_to_the_same_bound(server):
    base, _, _ = server

    def rpc(method: str, params: dict) -> dict:
        return _rpc(base, method, params)

    sessions = [rpc("openenv/session/create", {})["result"]["session_id"] for _ in range(SLOTS)]
    assert "error" in rpc("openenv/session/create", {})  # all four slots are taken
    start = time.monotonic()
    # Calls on those sessions are not play: they keep nothing alive.
    while time.monotonic() - start < CLAIM_S + SLACK_S:
        for sid in sessions:
            rpc("tools/list", {"session_id": sid})
        time.sleep(0.3)
    assert asyncio.run(free_slots(base, timeout=SLACK_S + 2)) < SLACK_S + 2
    reply = rpc("tools/list", {"session_id": sessions[0]})
    assert "Unknown session_id" in reply["error"]["message"]


def test_play_over_http_keeps_the_socket_of_an_attached_session(server):
    # OpenEnv's MCP client in production mode: a session over HTTP, a socket attached for reset,
    # then the tools called over HTTP `/mcp`. That play counts for the socket too.
    base, _, _ = server
    asyncio.run(free_slots(base, timeout=CLAIM_S + SLACK_S + 2))
    sid = _rpc(base, "openenv/session/create", {})["result"]["session_id"]

    async def main():
        async with connect(ws_url(base) + f"?session_id={sid}") as ws:
            await ws.send(RESET)
            assert json.loads(await ws.recv())["type"] == "observation"
            end = time.monotonic() + IDLE_S * 2
            while time.monotonic() < end:
                reply = await asyncio.to_thread(
                    _rpc, base, "tools/call", {"session_id": sid, "name": "ask_worker", "arguments": ASK_ARGS}
                )
                assert "result" in reply, reply
                await asyncio.sleep(IDLE_S * 0.3)
            await ws.send(json.dumps({"type": "state"}))
            return json.loads(await ws.recv())

    state = asyncio.run(main())
    assert state["type"] == "state" and state["data"]["step_count"] >= 4


@pytest.fixture(scope="module")
def capped_server():
    env = {"MAX_SESSIONS_PER_CLIENT": "2", "ENABLE_WEB_INTERFACE": "false"}
    with uvicorn_process("server.app:app", env=env) as (base, _):
        yield base


def test_a_per_client_cap_refuses_one_address_beyond_it(capped_server):
    async def main():
        first, second = [await connect(ws_url(capped_server)) for _ in range(2)]
        async with connect(ws_url(capped_server)) as third:
            refusal = json.loads(await third.recv())
            seconds, _ = await wait_closed(third, 5)
        await first.close()
        await asyncio.sleep(0.2)
        async with connect(ws_url(capped_server)) as fourth:
            await fourth.send(RESET)
            after = json.loads(await fourth.recv())
        await second.close()
        return refusal, third.close_code, after

    refusal, code, after = asyncio.run(main())
    assert refusal["data"]["code"] == "CAPACITY_REACHED" and "MAX_SESSIONS_PER_CLIENT" in refusal["data"]["message"]
    assert code == 1013  # "try again later"
    assert after["type"] == "observation"


def test_http_sessions_count_against_the_per_client_cap(capped_server):
    first, second = (_rpc(capped_server, "openenv/session/create", {}) for _ in range(2))
    assert "result" in first and "result" in second
    third = _rpc(capped_server, "openenv/session/create", {})
    assert "MAX_SESSIONS_PER_CLIENT" in third["error"]["message"]

    async def socket_refused():
        async with connect(ws_url(capped_server)) as ws:
            return json.loads(await ws.recv())

    assert asyncio.run(socket_refused())["data"]["code"] == "CAPACITY_REACHED"
    for reply in (first, second):
        _rpc(capped_server, "openenv/session/close", {"session_id": reply["result"]["session_id"]})
    assert "result" in _rpc(capped_server, "openenv/session/create", {})


@pytest.fixture(scope="module")
def default_server():
    """The default slots (64) and the default per-address share (half of them), nothing set by the operator."""
    env = {"MAX_CONCURRENT_ENVS": None, "MAX_SESSIONS_PER_CLIENT": None, "ENABLE_WEB_INTERFACE": "false"}
    with uvicorn_process("server.app:app", env=env) as (base, _):
        yield base


# Another client address on this host: Linux routes all of 127.0.0.0/8 to loopback, and uvicorn trusts
# X-Forwarded-For from 127.0.0.1 only, so a socket bound to 127.0.0.2 is another address to the server.
OTHER_ADDRESS = ("127.0.0.2", 0)


def test_one_address_creating_every_http_session_leaves_the_other_half_of_the_slots(default_server):
    """64 HTTP `openenv/session/create` from one address (they need no socket, and a client re-creating them
    every claim bound would hold them for good) get half the slots; another address plays in the rest."""
    base = default_server
    share = limits.DEFAULT_SESSIONS_PER_CLIENT
    assert share == 32 and limits.MAX_CONCURRENT_ENVS == 64  # the published share: half of 64
    meta = json.loads(urllib.request.urlopen(base + "/metadata", timeout=10).read())
    assert meta["max_sessions_per_client"] == meta["limits"]["max_sessions_per_client"] == share
    replies = [_rpc(base, "openenv/session/create", {}) for _ in range(64)]
    created = [r["result"]["session_id"] for r in replies if "result" in r]
    refused = [r["error"]["message"] for r in replies if "error" in r]
    assert len(created) == share and len(refused) == 64 - share
    assert "CAPACITY_REACHED" in refused[0] and "MAX_SESSIONS_PER_CLIENT" in refused[0], refused[0]

    async def main():
        async with connect(ws_url(base)) as same:  # the same address: refused on arrival, a socket too
            mine = json.loads(await same.recv())
        others = [await connect(ws_url(base), local_addr=OTHER_ADDRESS) for _ in range(share)]
        try:
            boards = []
            for ws in others:  # every one of the other half plays
                await ws.send(RESET)
                boards.append(json.loads(await ws.recv()))
            return mine, boards
        finally:
            for ws in others:
                await ws.close()

    mine, boards = asyncio.run(main())
    assert mine["data"]["code"] == "CAPACITY_REACHED" and "MAX_SESSIONS_PER_CLIENT" in mine["data"]["message"]
    assert [b["type"] for b in boards] == ["observation"] * share
    for sid in created:
        assert _rpc(base, "openenv/session/close", {"session_id": sid})["result"]["closed"] is True


def test_a_socket_attached_to_an_http_session_takes_no_second_share(capped_server):
    """OpenEnv's MCP client in production mode: a session over HTTP and a socket attached to it hold one slot.
    The address fills its cap with HTTP sessions, then attaches a socket to each: none is refused."""
    replies = [_rpc(capped_server, "openenv/session/create", {}) for _ in range(3)]
    sids = [r["result"]["session_id"] for r in replies if "result" in r]
    assert sids and "MAX_SESSIONS_PER_CLIENT" in replies[-1]["error"]["message"]  # the cap (2) is reached

    async def main():
        attached = [await connect(ws_url(capped_server) + f"?session_id={sid}") for sid in sids]
        try:
            boards = []
            for ws in attached:
                await ws.send(RESET)
                boards.append(json.loads(await ws.recv()))
            return boards
        finally:
            for ws in attached:
                await ws.close()

    assert [b["type"] for b in asyncio.run(main())] == ["observation"] * len(sids)
    for sid in sids:
        _rpc(capped_server, "openenv/session/close", {"session_id": sid})


def test_an_address_has_a_bounded_number_of_http_requests_in_flight(server):
    base, _, _ = server
    port = int(base.rsplit(":", 1)[1])
    held = []
    try:
        for _ in range(limits.HTTP_REQUESTS_PER_CLIENT):  # requests whose bodies never finish: in flight
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n")
            held.append(sock)
        refused = wait_until(lambda: _health_error(base), 5, "the fifth request refused")  # all four in flight
        assert refused.code == 429 and b"at most" in refused.read()
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: _health_error(base) is None, 5, "/health answering once the four are gone")


def _health_error(base: str) -> urllib.error.HTTPError | None:
    try:
        with urllib.request.urlopen(base + "/health", timeout=5):
            return None
    except urllib.error.HTTPError as exc:
        return exc


def test_a_careless_client_leaves_no_error_in_the_log(server):
    base, _, log = server
    before = log.read_text().count("ERROR")

    async def send_and_leave():
        async with connect(ws_url(base)) as ws:
            await ws.send(RESET)  # and close without reading the reply

    for _ in range(20):
        asyncio.run(send_and_leave())
    # Every one of those sessions is over (its reply sent or dropped) once all the slots are free again.
    asyncio.run(free_slots(base, timeout=CLAIM_S + SLACK_S + 2))
    assert log.read_text().count("ERROR") == before


# ------------------------------------------------------------------ fairness


# The test's flooder says when it floods (it has reset, so it holds a slot); its last line is still its count.
READY_FLOODER = FLOODER.replace("    await ws.recv()\n", "    await ws.recv()\n    print('flooding', flush=True)\n", 1)
assert READY_FLOODER != FLOODER


def start_flooder(base: str, seconds: float) -> subprocess.Popen:
    """The flooding client, returned once it floods: it has reset, holds a slot and pipelines junk steps."""
    flooder = subprocess.Popen(
        [sys.executable, "-c", READY_FLOODER, ws_url(base), str(seconds), RESET, JUNK_STEP],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    with selectors.DefaultSelector() as ready:
        ready.register(flooder.stdout, selectors.EVENT_READ)
        said = flooder.stdout.readline().strip() if ready.select(timeout=60) else ""
    if said != "flooding":
        flooder.kill()
        flooder.communicate()
        raise AssertionError(f"the flooder did not start flooding within 60 s (it said {said!r})")
    return flooder


def polite_round_trips(base: str, seconds: float) -> list[float]:
    async def run():
        times = []
        async with connect(ws_url(base)) as ws:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for message in (RESET, ASK, ASK, ASK):
                    start = time.perf_counter()
                    await ws.send(message)
                    await ws.recv()
                    times.append(time.perf_counter() - start)
        return sorted(times)

    return asyncio.run(run())


def p99(times: list[float]) -> float:
    return times[int(len(times) * 0.99)]


def test_a_flooding_client_does_not_delay_a_polite_one(server):
    base, _, _ = server
    asyncio.run(free_slots(base, timeout=CLAIM_S + SLACK_S + 2))
    quiet = polite_round_trips(base, 2.0)
    flooder = start_flooder(base, 4.0)
    try:
        flooded = polite_round_trips(base, 2.0)
    finally:
        out, _ = flooder.communicate(timeout=15)
    assert int(out.split()[-1]) > 1000  # it did flood
    # Before the guard: median 258-305 ms and a 5.3 s maximum. Now the polite client barely notices
    # (measured: median 0.25 ms, p99 0.65 ms, against 0.22 and 0.57 ms without the flooder).
    assert statistics.median(flooded) < 0.02 and p99(flooded) < 0.1, (statistics.median(flooded), p99(flooded))
    assert len(flooded) > len(quiet) / 10


def test_a_client_that_sends_and_never_reads_loses_its_slot(server):
    base, _, _ = server
    asyncio.run(free_slots(base, timeout=CLAIM_S + SLACK_S + 2))
    flooder = start_flooder(base, 30.0)  # stalls once the server stops reading it, and stays connected
    try:
        bound = IDLE_S + session_guard.STUCK_SEND_S + SLACK_S
        assert asyncio.run(free_slots(base, timeout=bound + 3)) <= bound + 3
        assert flooder.poll() is None  # the client is still there: the server let go of it
    finally:
        flooder.kill()
        flooder.communicate()


def test_a_client_that_aborts_mid_flood_leaves_at_most_one_log_line(server):
    base, _, log = server
    before = log.read_text().count("socket.send() raised exception")

    async def flood_and_abort():
        ws = await connect(ws_url(base))
        await ws.send(RESET)
        for _ in range(2000):
            await ws.send(JUNK_STEP)
        ws.transport.abort()  # gone without a close: the server's replies have nowhere to go

    for _ in range(3):
        asyncio.run(flood_and_abort())
    # Their replies have all been tried (and the sessions ended) once every slot is free again.
    asyncio.run(free_slots(base, timeout=CLAIM_S + SLACK_S + 2))
    assert log.read_text().count("socket.send() raised exception") - before <= 3


def test_no_reply_quotes_a_long_input_back(server):
    base, _, _ = server
    big = "x" * 60_000
    frames = [
        {"type": "step", "data": {"tool_name": "ask_worker", "arguments": {}, "junk": big}},  # fails validation
        {"type": big},  # an unknown type
        {"type": "reset", "data": big},
        {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": big, "params": {}}},
        {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": big}}},
    ]

    async def main():
        async with connect(ws_url(base)) as ws:
            replies = []
            for frame in frames:
                await ws.send(json.dumps(frame))
                replies.append(await ws.recv())
            await ws.send(RESET)
            return replies, json.loads(await ws.recv())

    replies, after = asyncio.run(main())
    assert all(len(reply) < 2048 for reply in replies), [len(r) for r in replies]
    assert after["type"] == "observation"
    for body in (
        {"jsonrpc": "2.0", "id": 1, "method": big, "params": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"session_id": big, "name": "ask_worker"}},
    ):
        assert len(json.dumps(_rpc_body(base, body))) < 300


def _rpc_body(base: str, body: dict) -> dict:
    request = urllib.request.Request(base + "/mcp", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


# ------------------------------------------------------------------ connections


def test_half_open_connections_are_closed_and_resource_errors_stay_one_line(tmp_path):
    """Sockets that never finish a request head, more than the process has descriptors for: the server
    closes them after the head timeout, answers again, and logs the shortage in one line, not a traceback
    per retry (51,082 tracebacks in 7 s before). Served as releaseops-serve serves (`python -m server.app`)."""
    port, log = free_port(), tmp_path / "server.log"
    env = {**os.environ, "ENABLE_WEB_INTERFACE": "false"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["sh", "-c", f"ulimit -n 256 && exec {sys.executable} -m server.app --port {port}"],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_health(f"http://127.0.0.1:{port}", alive=lambda: proc.poll() is None)
        socks = []
        for _ in range(400):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\n")  # half a head, never finished
            socks.append(sock)
        closed = _closed_by_peer(socks[:50], timeout=limits.HTTP_HEAD_TIMEOUT_S + 10)
        for sock in socks:
            sock.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            assert response.status == 200
    finally:
        proc.terminate()
        proc.wait(10)
    text = log.read_text()
    assert closed == 50  # the server closed every one it had accepted
    assert text.count("Traceback") == 0
    assert text.count("socket.accept() out of system resource") <= 3


def _closed_by_peer(socks: list[socket.socket], timeout: float) -> int:
    """How many of `socks` the server closed, waiting until it closed all of them or `timeout` passed."""
    closed, deadline = 0, time.monotonic() + timeout
    with selectors.DefaultSelector() as waiting:
        for sock in socks:
            waiting.register(sock, selectors.EVENT_READ)
        while closed < len(socks) and time.monotonic() < deadline:
            for key, _ in waiting.select(timeout=min(1.0, max(deadline - time.monotonic(), 0))):
                try:
                    gone = key.fileobj.recv(1) == b""
                except OSError:
                    gone = True
                if gone:
                    waiting.unregister(key.fileobj)
                    closed += 1
    return closed


# ------------------------------------------------------------------ memory


def _handshake(port: int, extensions: str = "permessage-deflate; client_max_window_bits") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: {extensions}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head[:200]
    assert b"permessage-deflate" not in head.lower()  # compression is never negotiated
    return sock


def test_oversized_and_compressed_frames_from_64_clients_leave_memory_flat(server):
    base, pid, _ = server
    port = int(base.rsplit(":", 1)[1])
    peak, stop = [rss_mb(pid)], threading.Event()
    start_rss = peak[0]

    def sample():
        while not stop.is_set():
            peak.append(rss_mb(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    codes = []
    try:
        # The attack that took RSS from 279 MB to 2,336 MB: 16 MiB frames that deflate to 16 KB.
        compressed = zlib.compressobj(wbits=-15)
        payload = compressed.compress(b"a" * (16 << 20)) + compressed.flush(zlib.Z_SYNC_FLUSH)[:-4]
        for i in range(64):
            sock = _handshake(port)
            try:
                if i % 2:  # declares 16 MiB: refused from the header, before a byte is read
                    sock.sendall(frame_header(16 << 20) + b"a" * 16384)
                else:  # a compressed frame although compression was declined
                    sock.sendall(frame_header(len(payload), rsv1=True) + payload)
                codes.append(close_code(sock))
            finally:
                sock.close()
    finally:
        stop.set()
        sampler.join()
    assert set(codes) <= {1009, 1002}, codes  # protocol closes: message too big, protocol error
    assert codes.count(1009) == 32 and codes.count(1002) == 32
    assert max(peak) < 512, f"peak RSS {max(peak):.0f} MB (the manifest declares 512)"
    assert max(peak) - start_rss < 64, (start_rss, max(peak))
    asyncio.run(free_slots(base, timeout=CLAIM_S + SLACK_S + 2))  # and the server plays on


def vm_hwm_mb(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), in MB: a peak no sampling can miss."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def test_a_bare_uvicorn_serves_the_same_wire_and_a_deflate_bomb_leaves_memory_bounded(tmp_path):
    """`python -m uvicorn server.app:app`, none of releaseops-serve's flags: uvicorn's own defaults would agree
    to permessage-deflate and read 16 MiB messages (16 such bombs took RSS from 214 to 742 MB). The app sets
    its wire on the uvicorn serving it, so compression is declined, the bombs are closed unread, and the
    server's peak memory stays under the manifest's 512 MB."""
    port, log = free_port(), tmp_path / "bare.log"
    env = {**os.environ, "ENABLE_WEB_INTERFACE": "false", "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(base, alive=lambda: proc.poll() is None)
        # 16 MiB less a little of text, deflated to ~16 KB: under uvicorn's default 16 MiB message limit.
        compressor = zlib.compressobj(wbits=-15)
        bomb = compressor.compress(b"a" * ((16 << 20) - 4096)) + compressor.flush(zlib.Z_SYNC_FLUSH)[:-4]
        attackers = [deflate_handshake(port) for _ in range(16)]
        oversized = [deflate_handshake(port) for _ in range(4)]
        try:
            for sock, _ in attackers:  # all at once: the frames are in flight together
                sock.sendall(frame_header(len(bomb), rsv1=True) + bomb)
            for sock, _ in oversized:  # declares 16 MiB uncompressed: refused from the header
                sock.sendall(frame_header(16 << 20) + b"a" * 16384)
            codes = [close_code(sock) for sock, _ in attackers + oversized]
        finally:
            for sock, _ in attackers + oversized:
                sock.close()
        peak = vm_hwm_mb(proc.pid)

        async def plays():
            async with connect(ws_url(base)) as ws:
                await ws.send(RESET)
                return json.loads(await ws.recv())

        after = asyncio.run(plays())
        with urllib.request.urlopen(base + "/health", timeout=10) as response:
            healthy = response.status == 200
    finally:
        stop_server(proc)
    assert peak < 512, f"peak RSS {peak:.0f} MB under a bare uvicorn (the manifest declares 512)"
    assert after["type"] == "observation" and healthy  # and the server plays on
    assert not any(agreed for _, agreed in attackers + oversized)  # compression was never negotiated
    assert codes == [1002] * 16 + [1009] * 4, codes  # protocol error (RSV1 unagreed), message too big
    assert "ws_per_message_deflate True -> False" in log.read_text()  # the app said what it set


@pytest.mark.parametrize(
    "path",
    ["/mcp", "/releaseops_arena/tasks", "/releaseops_arena/task", "/reset", "/step", limits.WEB_UPLOAD_PATH],
)
def test_http_bodies_over_the_limit_are_refused_with_413_before_they_are_read(server, path):
    base, pid, _ = server
    limit = limits.WEB_UPLOAD_MAX_BODY_BYTES if path == limits.WEB_UPLOAD_PATH else limits.HTTP_MAX_BODY_BYTES
    before = rss_mb(pid)
    body = b"[" + b"{}," * ((limit + 1024) // 3) + b"{}]"
    request = urllib.request.Request(base + path, body, {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 413
    detail = refused.value.read()
    assert len(detail) < 200 and b"{}" not in detail and str(limit).encode() in detail  # never echoed
    if path == limits.WEB_UPLOAD_PATH:
        return  # not mounted on this server, so nothing reads a streamed body: 404
    # A body streamed without Content-Length is cut off at the limit.
    with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"{}," * 20000
        answer = b""
        try:
            for _ in range(200):
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        except OSError:
            pass
        sock.settimeout(5)
        try:
            answer = sock.recv(200)
        except OSError:
            pass
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert rss_mb(pid) - before < 64


def test_a_body_under_the_limit_passes(server):
    base, _, _ = server
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}).encode()
    request = urllib.request.Request(base + "/mcp", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        assert len(json.loads(response.read())["result"]["tools"]) == 7


# ------------------------------------------------------------------ frames


@pytest.mark.parametrize(
    "frame",
    [
        '{"type": "step", "data": {"tool_name": "\\ud800", "arguments": {}}}',
        '{"type": "reset", "data": {"family": "\\udfff"}}',
        '{"type": "step", "data": {"tool_name": "approve_proposal", "arguments": {"\\ud800": 1}}}',
    ],
)
def test_half_a_surrogate_pair_gets_an_error_and_the_episode_plays_on(server, frame):
    base, _, _ = server

    async def main():
        async with connect(ws_url(base)) as ws:
            await ws.send(RESET)
            board = json.loads(await ws.recv())
            await ws.send(frame)
            refused = json.loads(await ws.recv())
            await ws.send(ASK)
            after = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "state"}))
            state = json.loads(await ws.recv())
            return board, refused, after, state

    board, refused, after, state = asyncio.run(main())
    assert refused["type"] == "error" and refused["data"]["code"] == "INVALID_JSON"
    assert "surrogate" in refused["data"]["message"]
    assert after["type"] == "observation" and state["data"]["step_count"] == 1  # the same episode, one call on


def test_a_frame_over_the_limit_is_closed_with_1009_and_others_play_on(server):
    base, _, _ = server

    async def main():
        async with connect(ws_url(base)) as other:
            await other.send(RESET)
            await other.recv()
            async with connect(ws_url(base)) as ws:
                await ws.send("x" * (limits.WS_MAX_MESSAGE_BYTES + 1))
                with pytest.raises(ConnectionClosed):
                    await ws.recv()
                code = ws.close_code
            await other.send(ASK)
            return code, json.loads(await other.recv())

    code, reply = asyncio.run(main())
    assert code == 1009 and reply["type"] == "observation"
