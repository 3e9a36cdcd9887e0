"""Test helpers for the WebSocket wire: record in-process transcripts, replay them remotely."""

from __future__ import annotations

import json

from websockets.asyncio.client import connect

from releaseops_arena.baselines import POLICIES, play


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
    return {"observation": obs["text"], "texts": texts, "rewards": rewards, "last": last, "messages": messages}


def open_socket(base: str, **kwargs):
    return connect(ws_url(base), max_size=2**22, **kwargs)
