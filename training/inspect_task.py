"""ReleaseOps Arena as an Inspect AI task, for `inspect eval` and OpenEnv's `InspectAIHarness`.

Each sample is one task of a split, played through a `client.harness` session (a server with
`base_url`, else in process): the brief and the board as the conversation, the seven tools
as Inspect tools, the verified episode return as the score (an episode the model leaves
unfinished is ended as the remote env ends it, and scored)::

    inspect eval training/inspect_task.py --model openai/gpt-4o -T split=heldout_seeds -T n=20 \\
        -T base_url=http://127.0.0.1:8000

    from openenv.core.evals.inspect_harness import InspectAIHarness
    InspectAIHarness(log_dir="logs").run("0.3", {}, "training/inspect_task.py", {
        "model": "mockllm/model", "model_args": {"custom_outputs": reference_policy("rule")},
        "task_args": {"split": "heldout_seeds", "n": 4}})

`reference_policy(name)` plays one of the engine's reference policies as Inspect's mock model,
from the conversation alone. Needs `inspect-ai` (not a dependency of this package).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Optional

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ModelOutput, ModelUsage
from inspect_ai.scorer import Score, mean, scorer, stderr
from inspect_ai.solver import solver
from inspect_ai.tool import ToolDef, ToolParams

from releaseops_arena.brief import BOARD_LEAD
from releaseops_arena.policies import POLICIES
from releaseops_arena.rendering import View

try:
    from releaseops_arena.client.harness import ReleaseOpsSessionFactory  # installed
except ImportError:  # from a checkout's root
    from client.harness import ReleaseOpsSessionFactory  # type: ignore[no-redef]


@task
def releaseops(
    split: str = "heldout_seeds",
    n: int = 8,
    difficulty: Optional[str] = None,
    base_url: Optional[str] = None,
    max_turns: int = 80,
) -> Task:
    """Tasks 0..n-1 of `split`, scored by the verified episode return."""
    extra = {"difficulty": difficulty} if difficulty else {}
    samples = [
        Sample(input="", id=f"{split}/{i}", metadata={"task": {"split": split, "index": i, **extra}}) for i in range(n)
    ]
    return Task(dataset=MemoryDataset(samples), solver=play_episode(base_url, max_turns), scorer=episode_return())


def _tool(session: Any, spec: Any) -> ToolDef:
    async def call(**arguments: Any) -> str:
        return (await asyncio.to_thread(session.call_tool, spec.name, arguments)).data

    return ToolDef(call, name=spec.name, description=spec.description, parameters=ToolParams(**spec.input_schema))


@solver
def play_episode(base_url: Optional[str] = None, max_turns: int = 80):
    factory = ReleaseOpsSessionFactory(base_url)

    async def solve(state, generate):
        session = await asyncio.to_thread(factory.create, state.metadata["task"])
        try:
            system, user = session.initial_messages()
            state.messages = [ChatMessageSystem(content=system["content"]), ChatMessageUser(content=user["content"])]
            state.tools = [_tool(session, spec).as_tool() for spec in session.list_tools()]
            for _ in range(max_turns):
                state = await generate(state, tool_calls="single")
                if not state.output.message.tool_calls or session.env.done:
                    break
            verified = await asyncio.to_thread(session.verify, [])
            state.store.set("episode_return", verified.env_reward)
            state.metadata["metrics"] = verified.metrics
        finally:
            await asyncio.to_thread(session.close)
        return state

    return solve


@scorer(metrics=[mean(), stderr()])
def episode_return():
    async def score(state, target) -> Score:
        metrics = state.metadata.get("metrics", {})
        return Score(value=state.store.get("episode_return"), answer=metrics.get("outcome"), metadata=metrics)

    return score


def reference_policy(name: str):
    """A reference policy as `mockllm/model`'s `custom_outputs`: each turn replays the conversation through the
    policy (the board, then each call it made and the result it got) and answers its next call, or stops."""

    def outputs(messages, tools, tool_choice, config) -> ModelOutput:
        board = messages[1].text.removeprefix(BOARD_LEAD)
        policy, view = POLICIES[name](), View(json.loads(board))
        policy.begin(board)
        for message in messages[2:]:
            if message.role == "assistant":
                policy.act(view)  # the call it made then (its state moves as it did)
            elif message.role == "tool":
                try:
                    view.update(json.loads(message.text))
                    policy.observe(message.text)
                except json.JSONDecodeError:
                    policy.observe(str({"error": message.text}))
        call = policy.act(view)
        if call is None:
            output = ModelOutput.from_content("mockllm/model", "Done.")
        else:
            output = ModelOutput.for_tool_call("mockllm/model", call[0], dict(call[1]))
        output.usage = ModelUsage()  # no tokens (else the mock model counts them with tiktoken, a download)
        return output

    return outputs
