"""OpenEnv's harness doors on a live server and in process: `client.harness` sessions under `CollectRunner` and
`build_harness_rollout_func`, scored with the verified return, equal to `ReleaseOpsToolEnv().get_reward()`; the
README's harness snippet run as written; cut episodes refused, never scored; the board replaying the results."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import pickle
import re

import pytest
from openenv.core.harness import HarnessRunLimits, MCPHarnessAdapter, ModelStepResult
from openenv.core.harness.collect import CollectRunner, RolloutSerializer
from openenv.core.harness.rollout import build_harness_rollout_func
from openenv.core.llm_client import LLMResponse, ToolCall

from client.harness import EpisodeCutError, ReleaseOpsSessionFactory, reference_model_step
from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.brief import BOARD_LEAD, BRIEF
from releaseops_arena.policies import POLICIES, play
from releaseops_arena.rendering import View
from releaseops_arena.rewards import MAX_TOOL_CALLS, OPENING_REWARD
from releaseops_arena.tools import TOOL_NAMES
from server import web_replay
from tests.live_server import REPO_ROOT

LIMITS = ReleaseOpsSessionFactory.limits  # OpenEnv's default, 10 turns, cuts many episodes
BAD_CALL = ("block_proposal", {"proposal_id": "p1", "rule_id": "S9"})  # refused by the engine: -0.25

# (task, policy, calls before the model stops: None plays to the end, a bad call first)
PLAN = [
    ({"split": "train", "index": 0}, "rule", None, False),
    ({"split": "heldout_seeds", "index": 5, "difficulty": "hard"}, "planner", None, True),
    ({"split": "unseen_mix", "index": 2}, "naive", None, False),
    ({"split": "train", "index": 7}, "rule", 2, True),  # abandoned: the harness must end it
    ({"split": "unseen_family", "index": 1}, "planner", 0, False),  # stops before any call
]


def policy_step(plans):
    """A `ModelStep` that plays each plan's reference policy from the transcript alone (as `play` does)."""
    state = {"episode": -1}

    def model_step(messages, tools, sampling):
        if len(messages) == 2:  # a new episode: the brief and the board
            state["episode"] += 1
            _, name, state["stop"], state["bad"] = plans[state["episode"]]
            board = messages[1]["content"].removeprefix(BOARD_LEAD)
            state["policy"], state["view"], state["calls"] = POLICIES[name](), View(json.loads(board)), 0
            state["policy"].begin(board)
        else:
            text = messages[-1]["content"]
            try:
                state["view"].update(json.loads(text))
                state["policy"].observe(text)
            except json.JSONDecodeError:  # an invalid call's message
                state["policy"].observe(str({"error": text}))
        assert messages[0] == {"role": "system", "content": BRIEF} and [t.name for t in tools] == list(TOOL_NAMES)
        call = None
        if state["bad"] and state["calls"] == 0:
            call = BAD_CALL
        elif state["stop"] is None or state["calls"] < state["stop"]:
            call = state["policy"].act(state["view"])
        state["calls"] += 1
        calls = [] if call is None else [ToolCall(id=f"c{state['calls']}", name=call[0], args=dict(call[1]))]
        return ModelStepResult(response=LLMResponse(content="", tool_calls=calls))

    return model_step


def in_process_return(task: dict, tool_trace: list[dict]) -> float:
    """The same calls on the in-process TRL env, scored by its `get_reward()`."""
    env = ReleaseOpsToolEnv()
    env.reset(**task)
    for entry in tool_trace:
        try:
            getattr(env, entry["tool_name"])(**entry["arguments"])
        except ValueError:
            pass
    return env.get_reward()


@pytest.mark.parametrize("where, limits", [("remote", LIMITS), ("in_process", LIMITS)], ids=["remote", "in_process"])
def test_collect_runner_scores_each_episode_with_the_in_process_return_and_ends_abandoned_ones(
    live_server, where, limits, tmp_path
):
    factory = ReleaseOpsSessionFactory(live_server if where == "remote" else None)
    runner = CollectRunner(
        session_factory=factory,
        harness_adapter=MCPHarnessAdapter(),
        serializer=RolloutSerializer(tmp_path),
        tasks=[task for task, *_ in PLAN],
        limits=limits,
    )
    try:
        result = runner.run(model_step=policy_step(PLAN), num_episodes=len(PLAN))
    finally:
        factory.close()
    assert (result.num_collected, result.num_failed) == (len(PLAN), 0)
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    for record, (task, name, stop, bad) in zip(records, PLAN):
        assert record["task"] == task
        assert record["reward"] == pytest.approx(in_process_return(task, record["tool_trace"]), abs=1e-9)
        assert record["verify_metrics"]["episode_return"] == pytest.approx(record["reward"], abs=1e-9)
        assert record["done"] is True
        assert record["messages"][1]["content"].startswith(BOARD_LEAD)
        ended = record["verify_metrics"]["terminal_reason"] != "abandoned"
        if stop is None and not bad and ended:  # played to the end: the reference policy's own return
            assert record["reward"] == pytest.approx(play(POLICIES[name](), task)["return"], abs=1e-9)
        assert ended or stop is not None  # the factory's limits never cut a played episode
        if stop is not None:  # ended by verify(): on the server with `end_episode`, as the remote env does
            assert record["verify_metrics"]["terminal_reason"] == "abandoned"
            assert record["verify_metrics"]["truncated"] is True
        if bad:
            assert record["tool_trace"][0]["result"]["error"] == "invalid rule_id 'S9'; valid: S1, S2, S3"
        # Each result reports the running return, so the harness's last-result reward is the episode's.
        rewards = [entry["result"]["metadata"]["reward"] for entry in record["tool_trace"]]
        assert not rewards or rewards[-1] == pytest.approx(record["reward"], abs=1e-9)


def readme_harness_snippet() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    return next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "CollectRunner(" in b)


def test_the_readme_harness_snippet_runs_as_written_and_scores_each_task_as_play_does(live_server, tmp_path):
    code = readme_harness_snippet()
    assert "http://127.0.0.1:8000" in code and '"data/harness"' in code
    code = code.replace("http://127.0.0.1:8000", live_server).replace('"data/harness"', repr(str(tmp_path)))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    assert printed.getvalue().split()[-3:-1] == ["8", "0"]  # eight collected, none failed
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["task"] for r in records] == [{"split": "heldout_seeds", "index": i} for i in range(8)]
    for record in records:
        expected = play(POLICIES["planner"](), record["task"])
        assert record["verify_metrics"]["terminal_reason"] != "abandoned"  # played to its end, never cut
        assert record["reward"] == pytest.approx(expected["return"], abs=1e-9)
        assert [e["tool_name"] for e in record["tool_trace"]] == [s["tool"] for s in expected["steps"]]
    # The board's Replay reads the same file: the engine gives the answers the file holds, and the same return.
    for record in web_replay.read_records(tmp_path / "results.jsonl"):
        column = web_replay.replay_run(record)
        assert column["matches"] and column["return"] == pytest.approx(record["reward"], abs=1e-9)
        assert column["policy"] == "harness model"


def test_openenvs_default_limits_cut_an_episode_which_is_refused_never_scored(live_server, tmp_path, capsys):
    task = {"split": "heldout_seeds", "index": 1}  # the planner needs more than 10 calls here
    assert len(play(POLICIES["planner"](), task)["steps"]) > HarnessRunLimits().max_turns
    factory = ReleaseOpsSessionFactory(live_server)
    runner = CollectRunner(
        session_factory=factory,
        harness_adapter=MCPHarnessAdapter(),
        serializer=RolloutSerializer(tmp_path),
        tasks=[task],
    )  # no limits: OpenEnv's 10 turns
    try:
        result = runner.run(model_step=reference_model_step("planner"), num_episodes=1)
        assert (result.num_collected, result.num_failed) == (0, 1)
        assert not (tmp_path / "results.jsonl").exists() or not (tmp_path / "results.jsonl").read_text().strip()
        assert "EpisodeCutError" in capsys.readouterr().out
        session = factory.create(task)  # the same, step by step: verify() names the cure
        rollout = MCPHarnessAdapter().run_white_box(reference_model_step("planner"), session, HarnessRunLimits())
        with pytest.raises(EpisodeCutError, match=r"pass limits=factory.limits"):
            session.verify(rollout.messages, {"done": rollout.done, "metrics": dict(rollout.metrics)})
        session.close()
        assert session.env.done  # the cut episode was still ended on the server
    finally:
        assert factory.close() == 0  # nothing left open
    # A trainer that caps turns on purpose asks for cut episodes to be scored: as abandoned, and marked.
    scoring = ReleaseOpsSessionFactory(score_cut=True)
    session = scoring.create(task)
    rollout = MCPHarnessAdapter().run_white_box(reference_model_step("planner"), session, HarnessRunLimits())
    verified = session.verify(rollout.messages, {"done": rollout.done, "metrics": dict(rollout.metrics)})
    assert verified.metrics["cut_by_harness"] is True and verified.metrics["terminal_reason"] == "abandoned"
    calls = [{"tool_name": e.tool_name, "arguments": e.arguments} for e in rollout.tool_trace]
    assert verified.env_reward == pytest.approx(in_process_return(task, calls), abs=1e-9)


def test_unknown_tools_spend_the_episodes_calls_so_the_factorys_limits_never_cut(tmp_path):
    def unknown_tool(messages, tools, sampling):
        return ModelStepResult(response=LLMResponse(content="", tool_calls=[ToolCall(id="x", name="peek", args={})]))

    factory = ReleaseOpsSessionFactory()
    runner = CollectRunner(
        session_factory=factory,
        harness_adapter=MCPHarnessAdapter(),
        serializer=RolloutSerializer(tmp_path),
        tasks=[{"split": "train", "index": 2}],
        limits=factory.limits,
    )
    assert runner.run(model_step=unknown_tool, num_episodes=1).num_collected == 1
    (record,) = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(record["tool_trace"]) == MAX_TOOL_CALLS and record["tool_trace"][-1]["result"]["done"] is True
    assert record["verify_metrics"]["terminal_reason"] == "abandoned"
    assert record["reward"] == pytest.approx(in_process_return({"split": "train", "index": 2}, []), abs=1e-9)
    column = web_replay.replay_run(web_replay.check_record(record, 1))
    assert column["matches"] and column["return"] == pytest.approx(record["reward"], abs=1e-9)


def test_reference_model_step_refuses_names_it_cannot_play():
    with pytest.raises(ValueError, match="unknown policy 'nope'; valid: .*planner"):
        reference_model_step("nope")
    with pytest.raises(ValueError, match="reads the hidden world"):
        reference_model_step("oracle")


def test_an_unknown_tool_is_answered_without_a_charge_and_close_ends_the_episode(live_server):
    factory = ReleaseOpsSessionFactory(live_server)
    try:
        session = factory.create({"split": "train", "index": 3})
        opening = session.env.reward
        result = session.call_tool("reset_world", {})
        assert result.error.startswith("unknown tool 'reset_world'") and result.metadata["reward"] == opening
        assert session.call_tool("approve_proposal", {"pr": "p1"}).error  # a wrong argument name: TypeError's text
        session.close()  # never verified: closing ends the episode on the server (end_episode)
        assert session.env.done and session.env.reward == in_process_return({"split": "train", "index": 3}, [])
    finally:
        factory.close()


def test_a_chat_prompt_takes_the_factorys_tasks_one_per_group_and_seed_picks_a_train_task():
    tasks = [{"split": "train", "index": i} for i in range(3)]
    factory = ReleaseOpsSessionFactory(tasks=tasks, group_size=2)
    prompt = [{"role": "system", "content": BRIEF}, {"role": "user", "content": BOARD_LEAD}]
    picked = [factory._task(prompt, None) for _ in range(6)]
    assert picked == [tasks[0], tasks[0], tasks[1], tasks[1], tasks[2], tasks[2]]
    assert ReleaseOpsSessionFactory()._task(prompt, 41) == {"split": "train", "index": 41}
    assert factory._task({"split": "unseen_mix", "index": 4, "prompt": prompt}, None)["index"] == 4
    # TRL's async harness worker pickles a callable that makes the factory, then passes the group id as `seed`.
    make = pickle.loads(pickle.dumps(functools.partial(ReleaseOpsSessionFactory, "http://127.0.0.1:1")))
    assert make()._task(prompt, 7) == {"split": "train", "index": 7}


def test_a_refused_task_raises_and_leaves_no_session_open(live_server):
    factory = ReleaseOpsSessionFactory(live_server)
    with pytest.raises(ValueError, match="valid: train, heldout_seeds"):
        factory.create({"split": "nope", "index": 0})
    assert factory.close() == 0  # nothing was left open


def test_the_harness_rollout_function_returns_the_verified_returns(live_server):
    plans = [PLAN[0], PLAN[3]]
    factory = ReleaseOpsSessionFactory(live_server, tasks=[task for task, *_ in plans])
    step = policy_step(plans)
    rollout = build_harness_rollout_func(
        session_factory=factory,
        harness_adapter=MCPHarnessAdapter(),
        model_step_builder=lambda trainer, s: step,
        limits=LIMITS,
    )
    prompt = [{"role": "system", "content": BRIEF}, {"role": "user", "content": BOARD_LEAD}]
    try:
        out = rollout([prompt, prompt], None)
    finally:
        factory.close()
    expected = [play(POLICIES["rule"](), PLAN[0][0])["return"]]
    expected.append(out["verify_metrics"][1]["episode_return"])
    assert out["env_reward"] == pytest.approx(expected, abs=1e-9)
    assert out["verify_metrics"][1]["terminal_reason"] == "abandoned"


# ---- verifiers' OpenEnv taskset (verifiers 0.4, `verifiers/v1/tasksets/openenv/taskset.py`). It does not install
# beside openenv 0.10 (it pins openai<3; its `openenv` extra resolves openenv back to 0.4.1), so this plays the
# server exactly as its `OpenEnvEnv.run` does: GET /schema, list the tools when the action's title is one it
# knows, reset, then step each model reply parsed as a JSON action, adding up the step rewards.
VERIFIERS_TITLES = {"Action", "CallToolAction", "ListToolsAction"}


def test_verifiers_taskset_sees_the_seven_tools_with_their_arguments_and_plays_an_episode(live_server):
    import asyncio

    import httpx
    from openenv import GenericEnvClient
    from openenv.core import CallToolAction

    from releaseops_arena.tools import tool_schemas

    task = {"split": "heldout_seeds", "index": 5, "difficulty": "hard"}

    async def run():
        client = GenericEnvClient(base_url=live_server)
        async with client:
            base_url = client._base_url.replace("ws://", "http://", 1)
            async with httpx.AsyncClient(timeout=10) as http:
                action_schema = (await http.get(f"{base_url}/schema")).json()["action"]
            assert action_schema.get("title") in VERIFIERS_TITLES
            result = await client.step({"type": "list_tools"})  # before reset, as the taskset does
            action_schema = CallToolAction.model_json_schema() | {"available_tools": result.observation["tools"]}
            # As the taskset resets: its own seed (the task's position), then the configured reset.
            result = await client.reset(**({"seed": 0} | task))
            policy, board = POLICIES["planner"](), result.observation["text"]
            view, total, calls = View(json.loads(board)), 0.0, []
            policy.begin(board)
            while not result.done:
                tool, args = policy.act(view)
                reply = json.dumps({"type": "call_tool", "tool_name": tool, "arguments": args})  # the model's turn
                result = await client.step(json.loads(reply))
                total += result.reward or 0.0
                calls.append({"tool_name": tool, "arguments": args})
                text = result.observation["text"]
                view.update(json.loads(text))
                policy.observe(text)
            return action_schema, total, calls, result.observation

    action_schema, total, calls, last = asyncio.run(run())
    listed = {tool["name"]: tool["input_schema"] for tool in action_schema["available_tools"]}
    assert list(listed) == list(TOOL_NAMES)
    for schema in tool_schemas():  # argument names, types and enums, as TRL shows them
        assert listed[schema["function"]["name"]] == schema["function"]["parameters"]
    assert listed["block_proposal"]["properties"]["rule_id"]["enum"] == ["S1", "S2", "S3"]
    verified = in_process_return(task, calls)
    assert last["episode_return"] == pytest.approx(verified, abs=1e-9)
    # The taskset adds up the step rewards and never the reset's: the verified return minus the opening reward.
    assert total == pytest.approx(verified - OPENING_REWARD, abs=1e-9)


def test_the_schema_names_each_tools_arguments_and_old_actions_still_work(live_server):
    import httpx
    from openenv import GenericEnvClient

    action = httpx.get(live_server + "/schema", timeout=10).json()["action"]
    assert action["title"] == "CallToolAction"
    assert "block_proposal(proposal_id, rule_id)" in action["properties"]["arguments"]["description"]
    with GenericEnvClient(base_url=live_server).sync() as env:
        env.reset(split="train", index=3)
        listed = env.step({"type": "list_tools"})  # mid-episode: changes nothing
        assert listed.reward is None and listed.observation["episode_return"] == OPENING_REWARD
        assert [tool["name"] for tool in listed.observation["tools"]] == list(TOOL_NAMES)
        with pytest.raises(Exception, match="VALIDATION_ERROR"):  # a call without a tool: the schema refuses it
            env.step({"arguments": {}})
        plain = env.step({"tool_name": "hold_release", "arguments": {"reason_code": "bogus"}})  # the session plays on
        assert plain.reward == -0.25 and plain.observation["error"].startswith("invalid reason_code")
        assert plain.observation["episode_return"] == pytest.approx(OPENING_REWARD - 0.25)


# ---- Inspect AI through OpenEnv's `InspectAIHarness` (openenv/core/evals/inspect_harness.py): the `inspect` extra.
def test_inspect_ai_evaluates_a_reference_policy_on_a_split_and_writes_its_log(live_server, tmp_path):
    pytest.importorskip(
        "inspect_ai",
        reason='inspect-ai is not installed: pip install -e ".[inspect]"',
    )
    import os

    from inspect_ai.log import list_eval_logs, read_eval_log
    from openenv.core.evals.inspect_harness import InspectAIHarness

    from tests.live_server import REPO_ROOT
    from training.inspect_task import reference_policy

    n = 3
    scores = InspectAIHarness(log_dir=str(tmp_path)).run(
        harness_version="0.3",
        library_versions={},
        dataset=os.path.relpath(REPO_ROOT / "training" / "inspect_task.py"),  # Inspect takes relative task paths
        eval_parameters={
            "model": "mockllm/model",
            "model_args": {"custom_outputs": reference_policy("rule")},
            "task_args": {"split": "heldout_seeds", "n": n, "base_url": live_server},
            "max_connections": 2,
        },
    )
    (log_file,) = list_eval_logs(str(tmp_path))
    log = read_eval_log(log_file)
    assert log.status == "success" and len(log.samples) == n
    expected = {
        f"heldout_seeds/{i}": play(POLICIES["rule"](), {"split": "heldout_seeds", "index": i}) for i in range(n)
    }
    for sample in log.samples:
        (score,) = sample.scores.values()
        assert score.value == pytest.approx(expected[sample.id]["return"], abs=1e-9)
        assert score.answer == expected[sample.id]["metrics"]["outcome"]
    assert scores["mean"] == pytest.approx(sum(e["return"] for e in expected.values()) / n, abs=1e-9)


@pytest.mark.parametrize(
    ("task", "says"),
    [
        ({"split": "nope", "index": 0}, "line 1: unknown split 'nope'; valid: train"),
        ({"split": "train", "index": "3"}, "line 1: its task needs a split name and an integer index"),
        ({"index": 3}, "line 1: its task needs a split name and an integer index"),
    ],
)
def test_the_board_refuses_a_harness_record_whose_task_it_cannot_resolve(tmp_path, task, says):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"task": task, "tool_trace": [], "messages": []}) + "\n")
    with pytest.raises(web_replay.ReplayError, match=re.escape(says)):
        web_replay.read_records(path)
