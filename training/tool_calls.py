"""The tools as TRL shows them to a model: their names in TRL's order, their schemas, their callables.

TRL's GRPOTrainer exposes every public function of `ReleaseOpsToolEnv` except
`reset` and `get_reward`, in `inspect.getmembers` order (by name), and the chat
template renders tools in list order. So that order is part of the prompt's
tokens: the warm start, collected trajectories, `hf:`, `openai:` and GRPO all
take the tools from here, and see the same prompt.
"""

from __future__ import annotations

import inspect

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.tools import tool_schemas

# The assistant turn that closes a collected conversation once the episode has ended.
CLOSING_TURN = {"role": "assistant", "content": "Done."}


def trl_tool_names() -> list[str]:
    """The tools TRL's GRPOTrainer exposes for `environment_factory=ReleaseOpsToolEnv`, in its order."""
    return [
        name
        for name, _ in inspect.getmembers(ReleaseOpsToolEnv, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def tools_column() -> list[dict]:
    """The JSON schema of each tool, in TRL's order, each exactly as transformers' `get_json_schema`
    derives it from the method TRL passes (a collected dataset's `tools` column)."""
    by_name = {schema["function"]["name"]: schema for schema in tool_schemas()}
    return [by_name[name] for name in trl_tool_names()]


def tool_functions() -> list:
    """The tool callables as TRL's GRPO passes them to the chat template: bound methods, in its order."""
    env = ReleaseOpsToolEnv()
    return [getattr(env, name) for name in trl_tool_names()]
