"""Any frame, any time: a live server answers every frame and the session plays on.

A hypothesis-driven fuzzer sends at least 10,000 generated frames over one
WebSocket session: valid and invalid steps mirrored on an in-process engine,
junk that must never reach it (non-object JSON, binary, truncated, deeply
nested, huge and wrongly typed messages), and MCP over `/ws` (junk JSON-RPC and
`tools/list`). Checked: no error frame of the
session kind, the socket never closes, every step matches the in-process
engine, and the server log stays clean. MCP over `/mcp` gets the same junk.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from releaseops_arena import ALL_FAMILIES, DIFFICULTIES, TOOL_NAMES, ReleaseOpsToolEnv
from releaseops_arena.catalog import HOLD_REASONS, QUESTION_TYPES, RULE_IDS, WORKERS
from tests.live_server import run_live_server
from tests.scenarios import call_args, visible_ids

FRAMES_AT_LEAST = 10_000
HANDLED_CODES = {"INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR"}

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
non_objects = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=8)
junk = st.one_of(
    non_objects.map(json.dumps),  # valid JSON, not an object
    st.binary(max_size=64),  # a binary frame
    st.text(max_size=40),  # anything at all (mostly not JSON)
    st.sampled_from([10, 1_000, 30_000]).map(lambda d: "[" * d + "]" * d),  # nested deeper than a parser allows
    # an object around them, and an object holding an int past Python's 4,300-digit limit: both open
    # like a valid message, so the guard's quick path for short objects must not let them through
    st.sampled_from([1_000, 30_000]).map(lambda d: '{"type": "step", "data": ' + "[" * d + "]" * d + "}"),
    st.sampled_from([300, 5_000]).map(lambda d: '{"type": "step", "data": ' + '{"a":' * d + "1" + "}" * d + "}"),
    st.just('{"type": "step", "data": {"tool_name": ' + "7" * 5_000 + "}}"),
    st.integers(1, 60).map(
        lambda k: json.dumps(
            {"type": "step", "data": {"tool_name": "hold_release", "arguments": {"reason_code": "x"}}}
        )[:k]
    ),
    # just under the frame limit, and no action (a larger frame is closed with 1009: tests/server/test_abuse.py)
    st.just('{"type": "step", "data": "' + "x" * (60 * 1024) + '"}'),
    # half a surrogate pair, which no reply could encode
    st.sampled_from(["\\ud800", "\\uDFFF"]).map(lambda e: '{"type": "step", "data": {"tool_name": "' + e + '"}}'),
    st.fixed_dictionaries(
        {"type": st.text(max_size=8).filter(lambda t: t not in {"reset", "step", "state", "close", "mcp"})},
        optional={"data": non_objects},
    ).map(json.dumps),  # an unknown type
    st.sampled_from(["step", "reset"]).flatmap(lambda t: non_objects.map(lambda d: json.dumps({"type": t, "data": d}))),
)
# MCP over /ws: junk JSON-RPC inside an `mcp` message, and a valid `tools/list` (never a
# `tools/call`, which would step the mirrored episode).
mcp = st.one_of(
    non_objects.map(lambda d: {"type": "mcp", "data": d}),
    st.dictionaries(st.text(max_size=8), json_scalars, max_size=3).map(lambda d: {"type": "mcp", "data": d}),
    st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "id": st.integers(0, 99),
            "method": st.sampled_from(["tools/list", "tools/nope", "resources/list"]),
        }
    ).map(lambda d: {"type": "mcp", "data": d}),
).map(json.dumps)
# A step reaches the engine: a real or made-up tool, ids from the board or junk, any argument values.
steps = st.tuples(
    st.sampled_from(TOOL_NAMES + ("merge_pr",)),
    st.integers(0, 40),
    st.sampled_from(RULE_IDS + QUESTION_TYPES + HOLD_REASONS + tuple(WORKERS)),
    st.one_of(st.none(), json_scalars, non_objects),
)
frames = st.lists(
    st.one_of(junk.map(lambda j: ("junk", j)), steps.map(lambda s: ("step", s)), mcp.map(lambda m: ("mcp", m))),
    min_size=40,
    max_size=60,
)
scenarios = st.fixed_dictionaries(
    {
        "family": st.sampled_from(ALL_FAMILIES),
        "seed": st.integers(0, 10_000),
        "difficulty": st.sampled_from(DIFFICULTIES),
    }
)


def step_args(env: ReleaseOpsToolEnv, tool: str, index: int, choice: str, odd) -> dict:
    ids = visible_ids(env)
    return call_args(tool, ids[index % len(ids)] if odd is None else odd, choice)


def local_text(env: ReleaseOpsToolEnv, tool: str, args: dict) -> str:
    try:
        return env._call_tool(tool, **args)
    except ValueError as exc:
        return str(exc)


def test_ten_thousand_generated_frames_never_break_a_session(tmp_path):
    log = tmp_path / "server.log"
    sent = [0]
    with run_live_server(log_path=log) as base:
        socket = [None]  # one session per example: hypothesis replays an example alone, so none may lean on another

        def exchange(frame) -> dict:
            socket[0].send(frame)
            sent[0] += 1
            return json.loads(socket[0].recv(timeout=30))

        @settings(
            max_examples=220,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(scenario=scenarios, sequence=frames)
        def run(scenario, sequence):
            with connect(base.replace("http://", "ws://") + "/ws", max_size=2**24) as ws:
                socket[0] = ws
                play(scenario, sequence)

        def play(scenario, sequence):
            env = ReleaseOpsToolEnv()
            local = env.reset(**scenario)
            reply = exchange(json.dumps({"type": "reset", "data": scenario}))
            assert reply["data"]["observation"]["text"] == local
            for kind, item in sequence:
                if kind == "mcp":
                    reply = exchange(item)
                    if reply["type"] == "error":
                        assert reply["data"]["code"] in HANDLED_CODES, reply
                    else:
                        assert reply["type"] == "mcp", reply
                        body = reply["data"]
                        if "result" in body:  # tools/list: exactly the seven tools
                            assert {t["name"] for t in body["result"]["tools"]} == set(TOOL_NAMES)
                        else:
                            assert "error" in body, body
                    continue
                if kind == "junk":
                    reply = exchange(item)
                    assert reply["type"] == "error" and reply["data"]["code"] in HANDLED_CODES, reply
                    continue
                if env.done:  # a finished episode starts again on both sides
                    local = env.reset(**scenario)
                    assert (
                        exchange(json.dumps({"type": "reset", "data": scenario}))["data"]["observation"]["text"]
                        == local
                    )
                tool, index, choice, odd = item
                args = step_args(env, tool, index, choice, odd)
                want = local_text(env, tool, args)
                reply = exchange(json.dumps({"type": "step", "data": {"tool_name": tool, "arguments": args}}))
                assert reply["type"] == "observation", reply
                assert reply["data"]["observation"]["text"] == want
                assert reply["data"]["done"] == env.done

        try:
            run()
        except Exception as exc:  # the server's side of a failure is in its log
            raise AssertionError(f"{exc!r}\nserver log:\n{log.read_text(errors='replace')[-3000:]}") from exc
    print(f"\n[fuzz] {sent[0]} frames sent")
    assert sent[0] >= FRAMES_AT_LEAST, sent[0]
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]


def test_mcp_over_websocket_answers_junk_and_keeps_serving(tmp_path):
    log = tmp_path / "server.log"
    with run_live_server(log_path=log) as base:
        with connect(base.replace("http://", "ws://") + "/mcp", max_size=2**24) as ws:

            @settings(
                max_examples=60,
                deadline=None,
                derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            )
            @given(st.lists(junk, min_size=5, max_size=10))
            def run(items):
                for item in items:
                    ws.send(item)
                    reply = json.loads(ws.recv(timeout=30))
                    assert reply.get("jsonrpc") == "2.0" and "error" in reply, reply
                ws.send(json.dumps({"jsonrpc": "2.0", "method": "tools/list", "id": 7}))
                listing = json.loads(ws.recv(timeout=30))
                assert {t["name"] for t in listing["result"]["tools"]} >= set(TOOL_NAMES)

            run()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]
