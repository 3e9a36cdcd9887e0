"""ReleaseOps Arena: train a supervisor that decides when specialist release agents should be trusted.

The engine is a pure library: `build_scenario` makes a deterministic world,
`Episode` runs the supervisor's tool calls against it, `render_observation`
is the one serializer, and `ReleaseOpsToolEnv` is what TRL instantiates.
"""

from .catalog import (
    ALL_FAMILIES,
    ALL_MIXES,
    ARCHETYPE_MIXES,
    DEFAULT_SCENARIO,
    DIFFICULTIES,
    FAMILIES,
    HELDOUT_FAMILIES,
    HELDOUT_MIXES,
    catalogue,
)
from .episode import Episode, EpisodeOver, StepResult, ToolError
from .rendering import render_observation
from .scenario_builder import build_scenario
from .tool_env import ReleaseOpsToolEnv
from .tools import TOOL_NAMES, SupervisorTools, tool_schemas

__all__ = [
    "ALL_FAMILIES",
    "ALL_MIXES",
    "ARCHETYPE_MIXES",
    "DEFAULT_SCENARIO",
    "DIFFICULTIES",
    "FAMILIES",
    "HELDOUT_FAMILIES",
    "HELDOUT_MIXES",
    "catalogue",
    "Episode",
    "EpisodeOver",
    "StepResult",
    "ToolError",
    "render_observation",
    "build_scenario",
    "ReleaseOpsToolEnv",
    "TOOL_NAMES",
    "SupervisorTools",
    "tool_schemas",
]
