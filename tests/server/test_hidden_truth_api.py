"""The Task API never tells an evaluation task's family, archetype mix or seed, on any server.

Every route OpenEnv serves under the "Task API" tag is found in `/openapi.json`
(so a route added later is scanned too, or the test says it cannot call it) and
called over every split, on a server with an evaluation secret and on a public
one. The truth to look for comes from the in-process `ReleaseTasks`; the names
searched for are every family and mix in the catalogue. The train split stays
open: its specs are the in-process ones, whole.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest

from releaseops_arena.catalog import ALL_FAMILIES, ALL_MIXES, HELDOUT_FAMILIES, HELDOUT_MIXES
from releaseops_arena.splits import EVALUATION_SPLITS, LIST_PREVIEW, SECRET_ENV, SPLITS, TASKS_PER_SPLIT, ReleaseTasks
from tests.live_server import run_live_server

SECRET = "hidden-truth-secret-5521"
ENV_NAME = "releaseops_arena"
TAG = "Task API"
INDICES = (0, 1, 12, 123_456, TASKS_PER_SPLIT - 1)
RANGES = ({"start": 0, "stop": 60}, {"start": TASKS_PER_SPLIT - 7}, {"stop": 5}, {"start": -3, "stop": None})
HIDDEN_KEYS = {"family", "seed", "archetype_mix"}
PLAYABLE_KEYS = {"id", "split", "index", "difficulty", "benchmark_version"}
KNOWN_FIELDS = {"split", "index", "start", "stop"}  # request fields this test knows how to fill


@pytest.fixture(scope="module", params=["private", "public"])
def server(request):
    secret = SECRET if request.param == "private" else ""
    with run_live_server(env={SECRET_ENV: secret or None}) as base:
        yield base, ReleaseTasks(secret=secret)


def task_routes(base: str) -> list[tuple[str, str, set[str]]]:
    """(method, path, body fields) of every operation tagged Task API."""
    spec = httpx.get(base + "/openapi.json", timeout=10).json()
    routes = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if TAG not in operation.get("tags", ()):
                continue
            fields: set[str] = set()
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                ref = body.get("$ref", "")
                schema = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else body
                fields = set(schema.get("properties", {}))
            routes.append((method.upper(), path, fields))
    return routes


def requests_for(path: str, fields: set[str]) -> list[tuple[str | None, dict | None, list[int]]]:
    """(split, body, indices covered) for each call of one route; a split-free route is called once."""
    unknown = fields - KNOWN_FIELDS
    assert not unknown, f"{path} takes {sorted(unknown)}: teach this test to call it, so that it is scanned"
    if "split" not in fields:
        assert not fields, path
        return [(None, None, [])]
    calls = []
    for split in SPLITS:
        if "index" in fields:
            calls += [(split, {"split": split, "index": i}, [i]) for i in INDICES]
        elif {"start", "stop"} & fields:
            for r in RANGES:
                covered = list(range(TASKS_PER_SPLIT)[slice(r.get("start"), r.get("stop"))])
                calls.append((split, {"split": split, **r}, covered))
        elif path.endswith("/tasks"):  # the preview
            calls.append((split, {"split": split}, list(range(LIST_PREVIEW))))
        else:
            calls.append((split, {"split": split}, []))
    return calls


def task_specs(value) -> list[dict]:
    """Every dict in a reply that carries a task id."""
    found, stack = [], [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "id" in node and "split" in node:
                found.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def test_no_task_api_route_tells_an_evaluation_task_s_family_mix_or_seed(server):
    base, truth = server
    routes = task_routes(base)
    paths = {path for _, path, _ in routes}
    # The routes OpenEnv 0.10 serves; a new one is scanned as well (or refused above, naming it).
    assert {"/list_environments", "/{env_name}/splits", "/{env_name}/tasks", "/{env_name}/task"} <= paths
    assert {"/{env_name}/num_tasks", "/{env_name}/task_range"} <= paths
    calls = 0
    for method, path, fields in routes:
        url = base + path.replace("{env_name}", ENV_NAME)
        assert "{" not in url, f"{path}: a path parameter this test cannot fill"
        for split, body, covered in requests_for(path, fields):
            reply = httpx.request(method, url, json=body, timeout=30)
            calls += 1
            assert reply.status_code == 200, (path, body, reply.text[:300])
            text = reply.text
            # Held-out families and mixes are in no train task either: never anywhere.
            named = [name for name in (*HELDOUT_FAMILIES, *HELDOUT_MIXES) if name in text]
            assert not named, (path, body, named)
            specs = task_specs(reply.json())
            if split is None or split in EVALUATION_SPLITS:
                named = [name for name in (*ALL_FAMILIES, *ALL_MIXES) if name in text]
                assert not named, (path, body, named)
                seeds = {truth.get_task(split, i)["seed"] for i in covered} if split else set()
                numbers = {int(n) for n in re.findall(r"\d+", text)}
                assert not numbers & seeds, (path, body, sorted(numbers & seeds)[:5])
                for spec in specs:
                    assert not HIDDEN_KEYS & spec.keys(), (path, body, spec)
                    full = truth.get_task(spec["split"], spec["index"])
                    assert spec == {key: full[key] for key in PLAYABLE_KEYS}  # what a client plays it by
            else:  # train stays open: the in-process spec, whole
                assert all(spec == truth.get_task(spec["split"], spec["index"]) for spec in specs)
            if covered:
                assert sorted(spec["index"] for spec in specs) == sorted(covered), (path, body)
    assert calls >= 2 + len(SPLITS) * (len(INDICES) + len(RANGES) + 2)


def test_a_task_from_the_api_still_plays_by_what_it_tells(server):
    """The hidden keys were never needed to play: split, index, difficulty (and the operator's token)."""
    from websockets.sync.client import connect

    from releaseops_arena.splits import task_token

    base, truth = server
    spec = httpx.post(base + f"/{ENV_NAME}/task", json={"split": "unseen_mix", "index": 21}, timeout=10).json()["task"]
    reset = {key: spec[key] for key in ("split", "index", "difficulty")}
    if truth.private:
        reset["token"] = task_token(SECRET, "unseen_mix", 21, spec["difficulty"])
    with connect(base.replace("http://", "ws://") + "/ws", max_size=2**22) as ws:
        ws.send(json.dumps({"type": "reset", "data": reset}))
        reply = json.loads(ws.recv(timeout=30))
        assert reply["type"] == "observation", reply
        ws.send(json.dumps({"type": "state"}))
        state = json.loads(ws.recv(timeout=30))["data"]
    assert state["difficulty"] == spec["difficulty"] and state["family"] is None  # hidden until done, as here
