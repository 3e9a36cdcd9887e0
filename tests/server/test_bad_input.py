"""Bad input over every door gets a short error naming what is valid: no 500, no repr, no traceback.

Against a live server (127.0.0.1): HTTP `/reset`, `/step` and `/mcp`, and the
WebSocket `/ws` and `/mcp`, with the values that used to answer a bare 500 (and
a 5.6 KB traceback in the log), an internal repr (`functools.partial(<bound
method ... at 0x7f...>)`), an internal error (-32603), or an episode whose every
`state` then failed. A `/ws` session plays on after each. The server log holds
no traceback at the end. The last-resort handler (`server/http_errors.py`) is
checked in-process, on an app that raises.
"""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from websockets.sync.client import connect

from releaseops_arena.catalog import MAX_SEED, SEED_RANGE
from releaseops_arena.tools import TOOL_NAMES
from tests.live_server import run_live_server

MAX_MESSAGE_CHARS = 400
LEAKS = ("0x", "functools.partial", "Traceback", "object at", "bound method")
SURROGATE = "\\ud800"  # a JSON escape: the parsed string holds a lone surrogate
TOOLS = ", ".join(TOOL_NAMES)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("bad_input") / "server.log"
    with run_live_server(log_path=log) as base:
        yield base, log


def assert_clean(text: str) -> None:
    leaked = [leak for leak in LEAKS if leak in text]
    assert not leaked, (leaked, text[:400])


def assert_log_clean(log) -> None:
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "Exception in ASGI application" not in text, text[-3000:]
    assert not [line for line in text.splitlines() if line.startswith("ERROR")], text[-3000:]


def post(base: str, path: str, body) -> httpx.Response:
    if isinstance(body, str):  # raw JSON text (a lone surrogate escape, or not JSON at all)
        return httpx.post(base + path, content=body.encode(), headers={"content-type": "application/json"}, timeout=10)
    return httpx.post(base + path, json=body, timeout=10)


def rpc(params: dict | str, method: str = "tools/call", request_id=1) -> dict | str:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


@pytest.mark.parametrize(
    "body, status, valid",
    [
        ({"family": "nope"}, 400, "valid: green_ci_disabled_payment_test"),
        ({"difficulty": "brutal"}, 400, "valid: easy, medium, hard"),
        ({"archetype_mix": "evil"}, 400, "valid: "),
        # A seed is a whole number in 0..2147483647 on every door (catalog.check_seed). OpenEnv's request model
        # refuses a non-integer or a negative one first (422); the engine refuses the rest (400). JSON `true`
        # and `2.0`, which the model would read as 1 and 2, are refused before it (http_errors.ResetSeed).
        ({"seed": True}, 422, f"seed ({SEED_RANGE})"),
        ({"seed": 2.0}, 422, f"seed ({SEED_RANGE})"),
        ({"seed": "x"}, 422, f"seed ({SEED_RANGE})"),
        ({"seed": -1}, 422, f"seed ({SEED_RANGE})"),
        ({"seed": 2.5}, 422, f"seed ({SEED_RANGE})"),
        ({"seed": "2.5"}, 422, f"seed ({SEED_RANGE})"),
        ({"seed": ""}, 422, f"seed ({SEED_RANGE})"),
        ('{"seed": 1e30}', 422, f"seed ({SEED_RANGE})"),
        ({"seed": 2**70}, 400, f"seed must be {SEED_RANGE}"),
        ({"seed": 2**31}, 400, f"seed must be {SEED_RANGE}"),
        ({"episode_id": {"a": 1}}, 422, "episode_id (a string of at most 128"),
        ('{"episode_id": "' + SURROGATE + '"}', 422, "episode_id (a string of at most 128"),
        ({"episode_id": "x" * 200}, 400, "episode_id must be a string of at most 128 printable"),
        ({"split": [1], "index": 0}, 400, "valid: train, heldout_seeds"),
        ({"split": "train", "index": "x"}, 400, "an int in 0..999999"),
        ({"split": "nope", "index": 0}, 400, "valid: train, heldout_seeds"),
        ({"split": "heldout_seeds", "index": 3, "token": 5}, 400, "token must be the task's token"),
        ({"colour": "red"}, 400, "valid: seed, episode_id"),
        ('{"family": "' + SURROGATE + '"}', 400, "valid: green_ci_disabled_payment_test"),
        ("{not json", 422, "valid: seed"),
        ("[1, 2]", 422, "valid: seed"),
    ],
)
def test_a_bad_http_reset_is_a_4xx_naming_what_is_valid(server, body, status, valid):
    base, log = server
    reply = post(base, "/reset", body)
    assert reply.status_code == status, reply.text[:300]
    message = reply.json()["detail"]
    assert isinstance(message, str) and valid in message and len(message) <= MAX_MESSAGE_CHARS, message
    assert_clean(reply.text)
    assert post(base, "/reset", {"seed": 3}).status_code == 200
    assert_log_clean(log)


@pytest.mark.parametrize(
    "body",
    [
        {"action": {"tool_name": 7}},
        {"action": "x"},
        {"action": {"tool_name": "inspect_ci_run", "arguments": [1, 2]}},
        {"action": {"tool_name": "inspect_ci_run", "sudo": True}},
        {"action": {"tool_name": "inspect_ci_run"}, "timeout_s": "x"},
        {},
        "{not json",
    ],
)
def test_a_bad_http_step_is_a_422_naming_what_is_valid(server, body):
    base, log = server
    reply = post(base, "/step", body)
    assert reply.status_code == 422, reply.text[:300]
    message = reply.json()["detail"]
    assert isinstance(message, str) and f"tool_name one of {TOOLS}" in message, message
    assert len(message) <= MAX_MESSAGE_CHARS, message
    assert_clean(reply.text)
    assert_log_clean(log)


def test_a_step_with_lone_surrogates_is_answered_not_a_500(server):
    base, log = server
    body = '{"action": {"tool_name": "' + SURROGATE + '", "arguments": {"' + SURROGATE + '": "' + SURROGATE + '"}}}'
    reply = post(base, "/step", body)
    assert reply.status_code < 500, reply.text[:300]
    assert_clean(reply.text)
    assert_log_clean(log)


@pytest.mark.parametrize(
    "request_body, code, valid",
    [
        (
            rpc({"name": "inspect_ci_run", "arguments": [1, 2]}),
            -32602,
            "must be an object of inspect_ci_run's arguments",
        ),
        (rpc({"name": "inspect_ci_run", "arguments": "x"}), -32602, "by name (run_id)"),
        (rpc({"name": "inspect_ci_run", "arguments": None}), -32602, "by name (run_id)"),
        (rpc({"name": {"a": 1}, "arguments": {}}), -32602, f"valid: {TOOLS}"),
        ('{"jsonrpc": "2.0", "id": "' + SURROGATE + '", "method": "tools/list"}', -32600, "must be valid Unicode"),
        ('{"jsonrpc": "2.0", "id": 1, "method": "' + SURROGATE + '"}', -32600, "must be valid Unicode"),
        (
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "' + SURROGATE + '"}}',
            -32600,
            "must be valid Unicode",
        ),
    ],
)
def test_a_bad_http_mcp_call_is_a_json_rpc_error_naming_what_is_valid(server, request_body, code, valid):
    base, log = server
    reply = post(base, "/mcp", request_body)
    assert reply.status_code == 200, reply.text[:300]
    error = reply.json()["error"]
    assert error["code"] == code and valid in error["message"], error
    assert len(error["message"]) <= MAX_MESSAGE_CHARS
    assert_clean(reply.text)
    assert_log_clean(log)


def test_an_mcp_argument_named_tool_name_is_an_ordinary_argument(server):
    base, log = server
    reply = post(base, "/mcp", rpc({"name": "inspect_ci_run", "arguments": {"tool_name": "x"}})).json()
    assert "result" in reply, reply  # no episode on this request: the ordinary observation, not -32603
    assert "send reset first" in reply["result"]["error"]
    assert_clean(json.dumps(reply))
    assert_log_clean(log)


def recv(ws) -> dict:
    return json.loads(ws.recv(timeout=30))


def exchange(ws, message: dict | str) -> dict:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return recv(ws)


def assert_state_answers(ws) -> dict:
    reply = exchange(ws, {"type": "state"})
    assert reply["type"] == "state", reply
    return reply["data"]


BAD_WS_RESETS = [
    ({"episode_id": {"a": 1}}, "episode_id must be a string of at most 128 printable characters"),
    # refused by the frame guard before the handler parses it (INVALID_JSON), or by the reset itself
    ('{"type": "reset", "data": {"episode_id": "' + SURROGATE + '"}}', ("valid Unicode", "episode_id must be")),
    ({"episode_id": "x" * 129}, "episode_id must be a string"),
    ({"episode_id": 42}, "episode_id must be a string"),
    ({"episode_id": "tab\there"}, "printable"),
    ({"seed": "x"}, f"seed must be {SEED_RANGE}"),
    ({"seed": [1]}, f"seed must be {SEED_RANGE}"),
    *[({"seed": seed}, f"seed must be {SEED_RANGE}") for seed in (2.5, "2.5", -5, "", True, 2**70, 2**31)],
    ('{"type": "reset", "data": {"seed": 1e30}}', f"seed must be {SEED_RANGE}"),
    ({"family": "nope"}, "valid: green_ci_disabled_payment_test"),
    ({"family": ["x"] * 1000}, "valid: green_ci_disabled_payment_test"),
    ({"split": [1], "index": 0}, "valid: train, heldout_seeds"),
    ({"split": "train", "index": "x"}, "an int in 0..999999"),
    ({"split": "train", "index": [0] * 1000}, "an int in 0..999999"),
    ({"split": "heldout_seeds", "index": 3, "token": {"t": 1}}, "token must be the task's token"),
    ({"colour": "red"}, "valid: seed, episode_id"),
    ({"c" * 5000: 1}, "valid: seed, episode_id"),
]


def test_a_bad_ws_reset_is_refused_clearly_and_the_session_plays_on(server):
    base, log = server
    with connect(base.replace("http://", "ws://") + "/ws", max_size=2**22) as ws:
        for data, valid in BAD_WS_RESETS:
            message = data if isinstance(data, str) else {"type": "reset", "data": data}
            reply = exchange(ws, message)
            assert reply["type"] == "error" and reply["data"]["code"] in ("EXECUTION_ERROR", "INVALID_JSON"), reply
            text = reply["data"]["message"]
            assert any(v in text for v in (valid if isinstance(valid, tuple) else (valid,))), (data, text)
            assert len(text) <= MAX_MESSAGE_CHARS, (data, text)
            assert_clean(json.dumps(reply))
            state = assert_state_answers(ws)  # the refused reset left nothing behind
            assert state["episode_id"] is None
        reply = exchange(ws, {"type": "reset", "data": {"seed": 5, "episode_id": "run-7"}})
        assert reply["type"] == "observation", reply
        assert assert_state_answers(ws)["episode_id"] == "run-7"
        step = exchange(ws, {"type": "step", "data": {"tool_name": "inspect_ci_run", "arguments": {"run_id": "ci-1"}}})
        assert step["type"] == "observation", step
        assert assert_state_answers(ws)["step_count"] == 1
    assert_log_clean(log)


def test_a_seed_is_one_range_on_the_wire_and_a_refused_one_keeps_the_running_episode(server):
    """The issue: /ws and HTTP reset took 2**70 while the board capped seeds at 2147483647, and 1e30 came
    back quoted as a 31-digit integer. Both doors take the top seed, refuse the next one naming the range,
    and a refused reset over /ws leaves the running episode as it was."""
    base, log = server
    assert post(base, "/reset", {"seed": MAX_SEED}).status_code == 200
    for body in ({"seed": MAX_SEED + 1}, '{"seed": 1e30}'):
        reply = post(base, "/reset", body)
        assert reply.status_code in (400, 422) and SEED_RANGE in reply.json()["detail"], reply.text
        assert "0000000000" not in reply.text
    with connect(base.replace("http://", "ws://") + "/ws", max_size=2**22) as ws:
        assert exchange(ws, {"type": "reset", "data": {"seed": MAX_SEED, "episode_id": "top"}})["type"] == "observation"
        assert exchange(ws, {"type": "step", "data": {"tool_name": "hold_release", "arguments": {}}})["type"] == (
            "observation"
        )
        for seed in (2.5, 1e30, -5, 2**70, True, ""):
            reply = exchange(ws, {"type": "reset", "data": {"seed": seed}})
            assert reply["type"] == "error" and SEED_RANGE in reply["data"]["message"], (seed, reply)
            assert "0000000000" not in reply["data"]["message"], reply
        state = assert_state_answers(ws)
        assert state["episode_id"] == "top" and state["step_count"] == 1, state  # the episode is kept
        step = exchange(ws, {"type": "step", "data": {"tool_name": "hold_release", "arguments": {}}})
        assert step["type"] == "observation" and assert_state_answers(ws)["step_count"] == 2
    assert_log_clean(log)


def test_a_bad_mcp_call_over_the_ws_routes_gets_a_json_rpc_error_without_internals(server):
    base, log = server
    ws_base = base.replace("http://", "ws://")
    as_list = rpc({"name": "inspect_ci_run", "arguments": [1, 2]})
    with connect(ws_base + "/ws", max_size=2**22) as ws:
        assert exchange(ws, {"type": "reset", "data": {"seed": 9}})["type"] == "observation"
        reply = exchange(ws, {"type": "mcp", "data": as_list})
        assert reply["type"] == "mcp" and "error" in reply["data"], reply
        # The frame guard answers it with mcp_brief.refuse_mcp_call's error, naming the tool's arguments.
        assert reply["data"]["error"]["code"] == -32602 and "run_id" in reply["data"]["error"]["message"], reply
        assert_clean(json.dumps(reply))
        # An argument named like the step's own parameter is the engine's to judge: an invalid call, not -32603.
        reply = exchange(ws, {"type": "mcp", "data": rpc({"name": "inspect_ci_run", "arguments": {"tool_name": "x"}})})
        assert reply["type"] == "mcp" and "result" in reply["data"], reply
        assert reply["data"]["result"]["error"], reply
        assert_clean(json.dumps(reply))
        # The session plays on.
        step = exchange(ws, {"type": "step", "data": {"tool_name": "inspect_ci_run", "arguments": {"run_id": "ci-1"}}})
        assert step["type"] == "observation", step
        assert assert_state_answers(ws)["step_count"] == 2
    with connect(ws_base + "/mcp", max_size=2**22) as ws:
        reply = exchange(ws, as_list)
        assert reply["error"]["code"] == -32602, reply
        assert_clean(json.dumps(reply))
        tools = exchange(ws, rpc({}, method="tools/list", request_id=2))
        assert {t["name"] for t in tools["result"]["tools"]} == set(TOOL_NAMES)
    assert_log_clean(log)


def test_an_unexpected_exception_is_one_log_line_and_a_short_500(caplog):
    """The last resort, in-process: never reached by bad input, so an app that raises stands in."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from server import http_errors

    app = FastAPI()

    @app.get("/boom")
    def boom():
        raise RuntimeError(f"broken state in {object()!r}\nsecond line")

    http_errors.install(app)
    with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
        reply = TestClient(app, raise_server_exceptions=True).get("/boom")  # nothing re-raised
    assert reply.status_code == 500 and reply.json() == {
        "detail": "internal server error; the server log has a line about it"
    }
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.error"]
    assert len(lines) == 1 and "GET /boom: RuntimeError: broken state in" in lines[0], lines
    assert "\n" not in lines[0] and not any(r.exc_info for r in caplog.records)
