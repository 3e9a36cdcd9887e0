"""The Task API on a live server: the routes, a task played by index over /ws, nothing leaked before the end."""

import asyncio
import json

import httpx
import pytest

from releaseops_arena import ALL_FAMILIES, ALL_MIXES, ReleaseOpsToolEnv
from releaseops_arena.catalog import ARCHETYPES, BENCHMARK_VERSION, END_EPISODE
from releaseops_arena.splits import EVALUATION_SPLITS, SPLITS, TASKS_PER_SPLIT, ReleaseTasks, task_scenario, task_token
from tests.live_server import (
    run_live_server,
)
from tests.wire import local_transcript, open_socket, remote_replay, send

TASK_ROUTES = "/releaseops_arena"


def post(base, route, body):
    return httpx.post(base + TASK_ROUTES + route, json=body, timeout=10)


def test_the_task_routes_list_the_splits_counts_and_tasks(live_server):
    splits = httpx.get(live_server + TASK_ROUTES + "/splits", timeout=10).json()
    assert [s["name"] for s in splits] == list(SPLITS)
    assert all(s["num_tasks"] == TASKS_PER_SPLIT for s in splits)
    assert post(live_server, "/num_tasks", {"split": "unseen_family"}).json() == {"num_tasks": TASKS_PER_SPLIT}
    task = post(live_server, "/task", {"split": "heldout_seeds", "index": 12}).json()["task"]
    # An evaluation task names no family, mix or seed (tests/server/test_hidden_truth_api.py); a train task does.
    assert task == {
        "id": "heldout_seeds/12",
        "split": "heldout_seeds",
        "index": 12,
        "difficulty": task_scenario("heldout_seeds", 12)["difficulty"],
        "benchmark_version": BENCHMARK_VERSION,
    }
    train = post(live_server, "/task", {"split": "train", "index": 12}).json()["task"]
    assert train == {
        "id": "train/12",
        "split": "train",
        "index": 12,
        **task_scenario("train", 12),
        "benchmark_version": BENCHMARK_VERSION,
    }
    tasks = post(live_server, "/task_range", {"split": "train", "start": 3, "stop": 6}).json()["tasks"]
    assert [t["index"] for t in tasks] == [3, 4, 5]
    listed = post(live_server, "/tasks", {"split": "train"}).json()["tasks"]
    assert len(listed) == 100
    assert {t["benchmark_version"] for t in tasks + listed} == {BENCHMARK_VERSION}  # every spec says its version


@pytest.mark.parametrize(
    "route, body, message",
    [
        ("/num_tasks", {"split": "test"}, "valid: train, heldout_seeds, unseen_family, unseen_mix"),
        ("/task", {"split": "train", "index": TASKS_PER_SPLIT}, "0..999999"),
        ("/task_range", {"split": "train", "start": 0, "stop": 5000}, "at most 1000 tasks"),
    ],
)
def test_bad_task_requests_get_a_400_naming_the_valid_values(live_server, route, body, message):
    reply = post(live_server, route, body)
    assert reply.status_code == 400 and message in reply.json()["detail"]
    assert httpx.get(live_server + "/health", timeout=5).status_code == 200


def test_a_task_chosen_by_index_plays_over_the_wire_as_in_process(live_server):
    scenario = task_scenario("unseen_mix", 21, "hard")
    local = local_transcript("planner", scenario, rng_seed=0)

    async def main():
        async with open_socket(live_server) as ws:
            by_task = dict(local, scenario={"split": "unseen_mix", "index": 21, "difficulty": "hard"})
            remote = await remote_replay(ws, by_task)
            state = (await send(ws, {"type": "state"}))["data"]
            bad = await send(ws, {"type": "reset", "data": {"split": "unseen_mix", "index": -1}})
            again = await send(ws, {"type": "reset", "data": {"split": "train", "index": 0}})
            return remote, state, bad, again

    remote, state, bad, again = asyncio.run(main())
    assert (
        remote["observation"]
        == local["observation"]
        == ReleaseOpsToolEnv().reset(split="unseen_mix", index=21, difficulty="hard")
    )
    assert remote["texts"] == local["texts"] and remote["last"]["done"]
    told = {key: state[key] for key in scenario}
    assert told == scenario  # the state tells the task's scenario once the episode is over
    assert bad["type"] == "error" and "0..999999" in json.dumps(bad)
    assert again["type"] == "observation"  # the session survived the bad reset


def hidden_words(scenario: dict) -> list[str]:
    return [*ALL_FAMILIES, *ALL_MIXES, *ARCHETYPES, str(scenario["seed"])]


def test_a_server_picked_task_leaks_nothing_before_done(live_server):
    """Observation, state, errors and metadata before the end name no family, mix, archetype or seed."""

    async def one(ws, split, index):
        scenario = task_scenario(split, index)
        local = local_transcript("planner", scenario, rng_seed=index)
        seen = [await send(ws, {"type": "reset", "data": {"split": split, "index": index}})]
        seen.append(await send(ws, {"type": "state"}))
        seen.append(await send(ws, {"type": "step", "data": {"tool_name": "inspect_pr_diff", "arguments": {}}}))
        seen.append(await send(ws, {"type": "step", "data": {"tool_name": "no_such_tool", "arguments": {}}}))
        for tool, args in local["calls"][:-1]:  # all but the call that ends it
            seen.append(await send(ws, {"type": "step", "data": {"tool_name": tool, "arguments": args}}))
            seen.append(await send(ws, {"type": "state"}))
        assert all(not m["data"].get("done") for m in seen)
        text = json.dumps(seen)
        leaked = [word for word in hidden_words(scenario) if word in text]
        assert not leaked, (split, index, leaked)
        return seen

    async def main():
        async with open_socket(live_server) as ws:
            for split in SPLITS:
                for index in (123_456, 234_567, 345_678, 456_789):  # seeds long enough to search for
                    await one(ws, split, index)

    asyncio.run(main())


def test_the_operator_secret_salts_evaluation_tasks_and_never_reaches_the_wire():
    secret = "operator-secret-4471"
    token = {split: task_token(secret, split, 2) for split in SPLITS}

    async def first_boards(base):
        async with open_socket(base) as ws:
            replies = [
                await send(ws, {"type": "reset", "data": {"split": split, "index": 2, "token": token[split]}})
                for split in SPLITS
            ]
            replies.append(await send(ws, {"type": "state"}))
            # Without its token an evaluation task is refused (a second session could replay it otherwise),
            # and the session plays on.
            refused = await send(ws, {"type": "reset", "data": {"split": "unseen_mix", "index": 2}})
            again = await send(ws, {"type": "reset", "data": {"split": "train", "index": 2}})
            # Once an evaluation task is over, `state` tells the scenario the secret drew for it.
            ended = {}
            for split in EVALUATION_SPLITS:
                await send(ws, {"type": "reset", "data": {"split": split, "index": 2, "token": token[split]}})
                await send(ws, {"type": "step", "data": {"tool_name": END_EPISODE, "arguments": {}}})
                ended[split] = (await send(ws, {"type": "state"}))["data"]
            return replies, refused, again, ended

    with run_live_server(env={"RELEASEOPS_EVAL_SECRET": secret}) as base:
        private, refused, again, ended = asyncio.run(first_boards(base))
        meta = httpx.get(base + "/metadata", timeout=10).json()
    for split, state in ended.items():
        drawn = ReleaseTasks(secret=secret).scenario(split, 2)
        assert state["done"] and {key: state[key] for key in drawn} == drawn
    assert any(  # the secret's draw, not the public arithmetic's
        ReleaseTasks(secret=secret).scenario(split, 2) != task_scenario(split, 2) for split in EVALUATION_SPLITS
    )
    public = [ReleaseOpsToolEnv().reset(split=split, index=2) for split in SPLITS]
    boards = [m["data"]["observation"]["text"] for m in private[:-1]]
    assert boards[0] == public[0]  # train: the same world on every host
    assert all(b != p for b, p in zip(boards[1:], public[1:]))
    assert refused["type"] == "error" and "needs its token" in json.dumps(refused)
    assert again["type"] == "observation"
    assert meta["evaluation_draw"] == "private"
    assert secret not in json.dumps(private) + json.dumps(meta) + json.dumps(refused)
    assert not any(t in json.dumps(private) for t in token.values())
