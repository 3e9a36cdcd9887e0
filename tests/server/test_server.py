"""The OpenEnv server against a real uvicorn on 127.0.0.1: sessions, bad input, leaks, routes, MCP."""

import asyncio
import json
import re

import httpx
import pytest

from releaseops_arena import ALL_FAMILIES, ALL_MIXES, DIFFICULTIES, FAMILIES, HELDOUT_FAMILIES, tool_schemas
from releaseops_arena.catalog import ARCHETYPES, BENCHMARK_VERSION
from tests.live_server import make_live_server_fixture
from tests.wire import local_transcript, open_socket, remote_replay, send, wait_for_free_slots

# A trainer on one host plays every slot from one address: its operator lifts the per-address share
# (by default an address holds half the slots; docs/server.md, Limits).
trainer_server = make_live_server_fixture("trainer_server", scope="module", env={"MAX_SESSIONS_PER_CLIENT": "0"})

POLICY_CYCLE = ["random", "oracle", "naive", "random", "block_everything"]


def scenario(i: int) -> dict:
    return {
        "family": ALL_FAMILIES[i % len(ALL_FAMILIES)],
        "seed": 1000 + i,
        "difficulty": DIFFICULTIES[i % 3],
        "archetype_mix": ALL_MIXES[i % len(ALL_MIXES)],
    }


async def play_session(base, index, episodes=3):
    async with open_socket(base) as ws:
        for e in range(episodes):
            k = index * episodes + e
            local = local_transcript(POLICY_CYCLE[k % len(POLICY_CYCLE)], scenario(k), rng_seed=k)
            remote = await remote_replay(ws, local)
            assert remote["observation"] == local["observation"]
            assert remote["texts"] == local["texts"], (index, e)
            assert remote["last"]["done"] is True
            assert remote["last"]["observation"]["episode_return"] == pytest.approx(local["return"])
            # The reset's reward and the steps' sum to the return.
            assert remote["opening"] + sum(remote["rewards"]) == pytest.approx(local["return"])
            state = await send(ws, {"type": "state"})
            assert state["data"]["metrics"] == json.loads(json.dumps(local["metrics"]))


def test_64_concurrent_sessions_match_the_engine_and_the_65th_is_refused(trainer_server):
    async def main():
        sockets = [await open_socket(trainer_server).__aenter__() for _ in range(64)]
        try:
            extra = await open_socket(trainer_server).__aenter__()
            refused = json.loads(await extra.recv())
            assert refused["data"]["code"] == "CAPACITY_REACHED"
            await extra.close()
        finally:
            for ws in sockets:
                await ws.close()
        await wait_for_free_slots(trainer_server, 64)
        await asyncio.gather(*(play_session(trainer_server, i) for i in range(64)))

    asyncio.run(main())


def test_a_client_that_disconnects_mid_episode_frees_its_slot(trainer_server):
    async def main():
        sockets = [await open_socket(trainer_server).__aenter__() for _ in range(64)]
        await send(sockets[0], {"type": "reset", "data": {"seed": 1}})
        await sockets[0].close()  # mid-episode
        await wait_for_free_slots(trainer_server, 1)  # fails unless the freed slot comes back
        for ws in sockets[1:]:
            await ws.close()

    asyncio.run(main())


BAD_INPUT = [
    ("{not json", "INVALID_JSON"),
    ({"type": "teleport"}, "UNKNOWN_TYPE"),
    ({"type": "step", "data": {"tool_name": 7, "arguments": {}}}, "VALIDATION_ERROR"),
    ({"type": "step", "data": {"tool_name": "approve_proposal", "arguments": {}, "sudo": True}}, "VALIDATION_ERROR"),
    ({"type": "step", "data": {"arguments": {}}}, "VALIDATION_ERROR"),
    ({"type": "reset", "data": {"family": "nope"}}, "EXECUTION_ERROR"),
    ({"type": "reset", "data": {"difficulty": "brutal"}}, "EXECUTION_ERROR"),
    ({"type": "reset", "data": {"colour": "red"}}, "EXECUTION_ERROR"),
    # valid JSON the parser accepts, but too deep for the handler to echo back in its error
    ('{"type": "step", "data": ' + '{"a":' * 300 + "1" + "}" * 300 + "}", "INVALID_JSON"),
]
INVALID_CALLS = [
    {"tool_name": "merge_pr", "arguments": {"pr_id": "pr_1"}},
    {"tool_name": "approve_proposal", "arguments": {"proposal_id": 17}},
    {"tool_name": "approve_proposal", "arguments": {"proposal_id": "p99999"}},
    {"tool_name": "inspect_pr_diff", "arguments": {"pr_id": "x" * 50_000}},
    {"tool_name": "block_proposal", "arguments": {"proposal_id": "p1", "rule_id": "S9"}},
]


def test_bad_input_gets_clear_errors_and_the_session_plays_on(live_server):
    async def main():
        async with open_socket(live_server) as ws:
            local = local_transcript("oracle", scenario(3), rng_seed=3)
            await send(ws, {"type": "reset", "data": local["scenario"]})
            for message, code in BAD_INPUT:
                reply = await send(ws, message)
                assert reply["type"] == "error" and reply["data"]["code"] == code, reply
                assert reply["data"]["message"] and "Traceback" not in reply["data"]["message"]
                if "family" in str(message):
                    assert "green_ci_disabled_payment_test" in reply["data"]["message"]
            for action in INVALID_CALLS:
                reply = await send(ws, {"type": "step", "data": action})
                obs = reply["data"]["observation"]
                assert obs["error"] and obs["text"] == obs["error"] and len(obs["error"]) < 300
                assert reply["data"]["reward"] == -0.25 and reply["data"]["done"] is False
            # The episode goes on: a fresh reset then the same scripted line ends normally.
            remote = await remote_replay(ws, local)
            assert remote["texts"] == local["texts"]
            assert remote["last"]["observation"]["outcome"] == "safe_ship"
            after = await send(
                ws,
                {"type": "step", "data": {"tool_name": "hold_release", "arguments": {"reason_code": "awaiting_fix"}}},
            )
            assert "episode is over" in after["data"]["observation"]["error"]
            assert after["data"]["reward"] == 0.0
            # And a new episode starts cleanly.
            remote = await remote_replay(ws, local)
            assert remote["texts"] == local["texts"]

    asyncio.run(main())


FORBIDDEN = re.compile(
    "|".join(
        map(re.escape, [*ALL_FAMILIES, *ARCHETYPES, "lv_", "hazard", "latent", "truth", "archetype", "overcautious"])
    ),
    re.I,
)


def test_no_message_before_the_end_leaks_the_hidden_truth(live_server):
    async def main():
        async with open_socket(live_server) as ws:
            n = 0
            for i in range(len(ALL_FAMILIES) * len(ALL_MIXES) * 3):
                local = local_transcript(POLICY_CYCLE[i % 5], scenario(i), rng_seed=i)
                remote = await remote_replay(ws, local)
                for message in remote["messages"]:
                    data = message["data"]
                    if data.get("done"):
                        data = {k: v for k, v in data.items() if k != "metadata"}
                        data["observation"] = {k: v for k, v in data["observation"].items() if k != "metadata"}
                    assert not FORBIDDEN.search(json.dumps(data)), message
                    n += 1
                state = await send(ws, {"type": "state"})
                assert set(state["data"]) >= {"episode_id", "step_count", "seed", "difficulty"}
                # The state echoes the configuration the client chose (its mix names archetypes by
                # design); nothing else in it may.
                public = {k: v for k, v in state["data"].items() if k not in ("family", "archetype_mix")}
                assert not FORBIDDEN.search(json.dumps(public)), public
            assert n > 1000

    asyncio.run(main())


def test_info_routes_answer(live_server):
    assert httpx.get(f"{live_server}/health").json() == {"status": "healthy"}
    schema = httpx.get(f"{live_server}/schema").json()
    assert {"tool_name", "arguments"} <= set(schema["action"]["properties"])
    assert {"text", "error", "outcome", "episode_return"} <= set(schema["observation"]["properties"])
    assert "board" not in schema["observation"]["properties"] and "board" in schema["state"]["properties"]
    icon = httpx.get(f"{live_server}/favicon.ico")  # every browser asks; a 404 reads as a broken page
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    meta = httpx.get(f"{live_server}/metadata").json()
    assert meta["catalogue"]["benchmark_version"] == BENCHMARK_VERSION == "v3"  # which world these results are of
    assert meta["catalogue"]["families"] == list(FAMILIES)
    assert meta["catalogue"]["heldout_families"] == list(HELDOUT_FAMILIES)
    assert "stale_sre_waives_deploy_checks" in HELDOUT_FAMILIES and not set(FAMILIES) & set(HELDOUT_FAMILIES)
    assert meta["tools"] == tool_schemas()
    assert meta["max_concurrent_envs"] == 64


def mcp_schemas():
    return {s["function"]["name"]: s["function"]["parameters"] for s in tool_schemas()}


def test_mcp_lists_the_same_tools_over_http_and_ws_and_calls_them(live_server):
    listing = httpx.post(f"{live_server}/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 1}).json()
    assert {t["name"]: t["inputSchema"] for t in listing["result"]["tools"]} == mcp_schemas()

    async def main():
        async with open_socket(live_server) as ws:
            rpc = {"jsonrpc": "2.0", "method": "tools/list", "id": 2}
            tools = (await send(ws, {"type": "mcp", "data": rpc}))["data"]["result"]["tools"]
            assert {t["name"]: t["inputSchema"] for t in tools} == mcp_schemas()
            local = local_transcript("oracle", scenario(5), rng_seed=5)
            await send(ws, {"type": "reset", "data": local["scenario"]})
            for (tool, args), text in zip(local["calls"], local["texts"]):
                rpc = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": tool, "arguments": args}, "id": 3}
                result = (await send(ws, {"type": "mcp", "data": rpc}))["data"]["result"]
                assert result["text"] == text
            assert result["done"] and result["outcome"] == "safe_ship"

    asyncio.run(main())


def test_replies_carry_the_text_once_and_state_offers_the_current_board(live_server):
    """No reply repeats the board: a step reply is the model's text plus the envelope, and
    `state` gives the whole current board, equal to the engine's after every call."""
    from releaseops_arena.episode import Episode

    async def main():
        async with open_socket(live_server) as ws:
            for k in range(6):
                local = local_transcript(POLICY_CYCLE[k % len(POLICY_CYCLE)], scenario(k), rng_seed=k)
                episode = Episode(**scenario(k))
                reset = await send(ws, {"type": "reset", "data": local["scenario"]})
                # Null fields stay off the wire (the model's defaults restore them).
                assert set(reset["data"]["observation"]) == {"text", "episode_return", "metadata"}
                for tool, args in local["calls"]:
                    reply = await send(ws, {"type": "step", "data": {"tool_name": tool, "arguments": args}})
                    episode.step(tool, args)
                    observation = reply["data"]["observation"]
                    assert "board" not in observation
                    assert ("error" in observation) == (episode.audit[-1]["error"] is not None)
                    state = await send(ws, {"type": "state"})
                    assert state["data"]["board"] == json.loads(json.dumps(episode.board()))
                    if not reply["data"]["done"]:
                        assert observation["metadata"] == {} and state["data"]["audit"] == []
                # Once over: no reply carries metadata; metrics, breakdown, scenario and audit come on request.
                assert "metadata" not in reply["data"] and observation["metadata"] == {}
                assert state["data"]["metrics"] == json.loads(json.dumps(episode.metrics()))
                assert sum(state["data"]["reward_breakdown"].values()) == pytest.approx(episode.episode_return)
                assert observation["outcome"] == episode.outcome
                assert {key: state["data"][key] for key in episode.config} == episode.config
                assert state["data"]["audit"] == json.loads(json.dumps(episode.audit))

    asyncio.run(main())


def test_the_brief_is_served_by_metadata_and_over_mcp_http_and_websocket(live_server):
    from websockets.sync.client import connect

    from releaseops_arena.brief import BRIEF, PROMPT_VERSION

    meta = httpx.get(f"{live_server}/metadata").json()
    assert meta["brief"] == BRIEF and meta["prompt_version"] == PROMPT_VERSION
    rpc = {"jsonrpc": "2.0", "id": 1}
    init = httpx.post(
        f"{live_server}/mcp", json={**rpc, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    ).json()
    assert init["result"]["instructions"] == BRIEF and init["result"]["protocolVersion"] == "2025-06-18"
    assert (
        httpx.post(f"{live_server}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code
        == 202
    )
    listed = httpx.post(f"{live_server}/mcp", json={**rpc, "method": "prompts/list"}).json()["result"]["prompts"]
    assert [p["name"] for p in listed] == ["releaseops_brief"]
    got = httpx.post(
        f"{live_server}/mcp", json={**rpc, "method": "prompts/get", "params": {"name": "releaseops_brief"}}
    ).json()["result"]
    assert got["messages"][0]["content"]["text"] == BRIEF
    wrong = httpx.post(f"{live_server}/mcp", json={**rpc, "method": "prompts/get", "params": {"name": "x"}}).json()
    assert wrong["error"]["message"] == "unknown prompt 'x'; valid: releaseops_brief"
    # Everything else still reaches OpenEnv's handler.
    tools = httpx.post(f"{live_server}/mcp", json={**rpc, "method": "tools/list"}).json()["result"]["tools"]
    assert len(tools) == 7
    with connect(live_server.replace("http://", "ws://") + "/mcp") as ws:
        ws.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))  # no reply
        ws.send(json.dumps({**rpc, "method": "prompts/get", "params": {"name": "releaseops_brief"}}))
        assert json.loads(ws.recv(timeout=10))["result"]["messages"][0]["content"]["text"] == BRIEF
        ws.send(json.dumps({**rpc, "id": 2, "method": "tools/list"}))
        reply = json.loads(ws.recv(timeout=10))
        assert reply["id"] == 2 and len(reply["result"]["tools"]) == 7
