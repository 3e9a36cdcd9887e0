"""The reference policies: simple baselines, the rule, the reference planner, the trained policy, the oracle.

They play through the same tools a model does (`play` runs one episode), and
they are the yardsticks every benchmark number is read against. `POLICIES`
maps each policy's name to its class.
"""

from __future__ import annotations

from .base import Policy
from .baselines import (
    AlwaysApprove,
    AlwaysHold,
    AttentionOracle,
    BlockEverything,
    EvidenceFirst,
    FixedOrder,
    Naive,
    Oracle,
    RandomPolicy,
    TruthReader,
)
from .blind_bayes import BlindBayes
from .planner import InspectEverything, ReferencePlanner, Rule
from .runner import play
from .trained import TrainedPolicy

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (
        RandomPolicy,
        Naive,
        Rule,
        Oracle,
        AlwaysHold,
        AlwaysApprove,
        InspectEverything,
        BlockEverything,
        ReferencePlanner,
        TrainedPolicy,
        EvidenceFirst,
        FixedOrder,
        AttentionOracle,
        BlindBayes,
    )
}

__all__ = [
    "POLICIES",
    "Policy",
    "play",
    "TruthReader",
    "RandomPolicy",
    "Naive",
    "Rule",
    "Oracle",
    "AlwaysHold",
    "AlwaysApprove",
    "InspectEverything",
    "BlockEverything",
    "ReferencePlanner",
    "TrainedPolicy",
    "EvidenceFirst",
    "FixedOrder",
    "AttentionOracle",
    "BlindBayes",
]
