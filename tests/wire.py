"""Test helpers for the WebSocket wire: record in-process transcripts, replay them remotely."""

from __future__ import annotations

import json

from websockets.asyncio.client import connect

from releaseops_arena.policies import POLICIES, play


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/ws"


def local_transcript(policy: str, scenario: dict, rng_seed: int) -> dict:
    """Play in-process; every step's text is the tool result or the ValueError message."""
    run = play(POLICIES[policy](), scenario, rng_seed)
    return {
        "scenario": scenario,
        "observation": run["observation"],
        "calls": [(s["tool"], s["arguments"]) for s in run["steps"]],
        "texts": [s.get("result") or s["error"] for s in run["steps"]],
        "return": run["return"],
        "metrics": run["metrics"],
    }


async def send(ws, message: dict | str) -> dict:
    await ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(await ws.recv())


async def remote_replay(ws, local: dict) -> dict:
    """Replay a local transcript's calls over one socket; return what came back."""
    reset = await send(ws, {"type": "reset", "data": local["scenario"]})
    obs = reset["data"]["observation"]
    texts, rewards, messages = [], [], [reset]
    for tool, args in local["calls"]:
        reply = await send(ws, {"type": "step", "data": {"tool_name": tool, "arguments": args}})
        messages.append(reply)
        data = reply["data"]
        texts.append(data["observation"]["text"])
        rewards.append(data["reward"])
        last = data
    return {
        "observation": obs["text"],
        "opening": reset["data"]["reward"],
        "texts": texts,
        "rewards": rewards,
        "last": last,
        "messages": messages,
    }


def open_socket(base: str, **kwargs):
    return connect(ws_url(base), max_size=2**22, **kwargs)


async def wait_for_free_slots(base: str, n: int, timeout: float = 15.0) -> None:
    """Poll until `n` sessions can be opened at once: the server frees a closed session's slot
    asynchronously, so a test waits for the condition itself, not for a fixed time."""
    import asyncio

    from websockets.exceptions import ConnectionClosed

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        sockets, ok = [], True
        try:
            for _ in range(n):
                sockets.append(await open_socket(base).__aenter__())
                reply = await send(sockets[-1], {"type": "reset", "data": {"seed": 1}})
                if reply["type"] != "observation":
                    ok = False
                    break
        except ConnectionClosed:
            ok = False
        finally:
            for ws in sockets:
                await ws.close()
        if ok:
            return
        assert loop.time() < deadline, f"{n} session slots did not come free within {timeout} s"
        await asyncio.sleep(0.05)
