"""Typed wire models (OpenEnv Action / Observation / State): the contract server and client share.

They live beside the client, as echo_env keeps them beside its client, so that
the engine (`releaseops_arena`) stays free of openenv and pydantic.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from openenv.core import Action, Observation, State
from pydantic import ConfigDict, Field, model_validator

from releaseops_arena.tools import TOOL_NAMES, tool_schemas

# Each tool with its argument names, for the action schema: `/schema` is all a generic client reads.
_SIGNATURES = ", ".join(
    f"{s['function']['name']}({', '.join(s['function']['parameters']['properties'])})" for s in tool_schemas()
)


def _is_none(value: Any) -> bool:
    return value is None


class ReleaseOpsAction(Action):
    """One supervisor tool call, shaped as OpenEnv's MCP `CallToolAction`.

    `/schema` titles it `CallToolAction`, so that clients that play any OpenEnv server from its
    schema (verifiers' OpenEnv taskset) ask the server for its tools (`{"type": "list_tools"}`, a
    step that changes nothing) and show a model each tool's arguments, types and enums. `type`
    defaults to `call_tool`, so `{"tool_name": ..., "arguments": ...}` works as before.
    """

    model_config = ConfigDict(title="CallToolAction")

    type: Literal["call_tool", "list_tools"] = Field(
        default="call_tool", description="call_tool (the default), or list_tools: the tools and their schemas."
    )
    tool_name: str = Field(description=f"One of the supervisor tools: {', '.join(TOOL_NAMES)}.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description=f"The tool's keyword arguments, by name: {_SIGNATURES}."
    )

    @model_validator(mode="before")
    @classmethod
    def _listing_names_no_tool(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("type") == "list_tools" and "tool_name" not in data:
            return {**data, "tool_name": ""}
        return data


class ReleaseOpsObservation(Observation):
    """What the supervisor sees after reset or a tool call."""

    text: str = Field(
        default="",
        description="Exactly the string a model sees: the board after reset, "
        "the tool result after a step, or the error message. "
        "The structured board is in `state` (on request), not repeated here.",
    )
    # A null `error` or `outcome` is left out of the reply (the model's default restores it): nearly
    # every reply has both null, and every byte is framed and deflated on every step.
    error: Optional[str] = Field(
        default=None, exclude_if=_is_none, description="Short message of an invalid call; absent (null) otherwise."
    )
    outcome: Optional[str] = Field(
        default=None,
        exclude_if=_is_none,
        description="safe_ship, unsafe_ship or missed_deadline once done; absent before.",
    )
    episode_return: float = Field(default=0.0, description="Sum of rewards so far in this episode.")
    tools: Optional[list[dict[str, Any]]] = Field(
        default=None,
        exclude_if=_is_none,
        description="The tools (name, description, input_schema), only in reply to a list_tools action.",
    )


class ReleaseOpsState(State):
    """Public episode state: configuration and counters, never the hidden truth."""

    family: Optional[str] = Field(default=None, description="Scenario family requested at reset.")
    seed: Optional[int] = Field(default=None, description="Scenario seed.")
    difficulty: Optional[str] = Field(default=None, description="easy, medium or hard.")
    archetype_mix: Optional[str] = Field(default=None, description="Named worker archetype mix.")
    phase: Optional[str] = Field(default=None, description="Current phase.")
    review_budget_remaining: Optional[int] = Field(default=None, description="Review budget left.")
    board: dict[str, Any] = Field(
        default_factory=dict, description="The whole public board now, as JSON: the reset text, kept current."
    )
    audit: list[dict[str, Any]] = Field(
        default_factory=list, description="Every call of the episode (Episode.audit), once it is over."
    )
    metrics: dict[str, Any] = Field(
        default_factory=dict, description="The episode's metrics (Episode.metrics), once it is over."
    )
    reward_breakdown: dict[str, float] = Field(
        default_factory=dict,
        description="The return by part (the rubric tree's children: "
        "outcome, budget, invalid_calls, discoveries), once over.",
    )
    episode_return: float = Field(default=0.0, description="Sum of rewards so far.")
    done: bool = Field(default=False, description="Whether the episode has ended.")
    outcome: Optional[str] = Field(default=None, description="Terminal outcome once done.")
