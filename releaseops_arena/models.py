"""Structured world state: proposals, artifacts, workers, latent violations.

Fields marked *hidden* are the ground truth the reward is verified from; the
renderer never copies them into anything a policy sees.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class Proposal:
    """The atomic unit: one worker asking the supervisor to approve one action."""

    id: str
    worker: str
    request: str
    claim: str
    refs: list[str]
    risk: list[str]
    confidence: str
    stage: int
    # hidden
    label: str = "correct"  # correct | shortcut | overcautious
    violation: str | None = None  # latent violation id behind a shortcut
    introduces: bool = False  # approving opens `violation` (else it is already open)
    fixes: str | None = None  # latent violation id that approval closes
    critical: bool = False  # the stage cannot advance until this is approved
    ships: bool = False  # approving it ships the release
    effect: str | None = None  # world side effect of approval (see episode)
    kind: str = ""  # template key, used for revisions and worker answers
    status: str = "pending"  # pending | approved | blocked
    blocked_rule: str | None = None


@dataclass(slots=True)
class Artifact:
    """Something inspectable: a PR diff, a CI or deploy-check run, a ticket."""

    id: str
    kind: str  # pr | ci_run | ticket
    evidence: dict[str, object]
    reveals: str | None = None  # hidden: latent violation id the evidence shows


@dataclass(slots=True)
class Violation:
    """A latent safety violation: present in the world, or one approval away."""

    id: str
    rule: str
    owner: str  # worker who would submit the fix
    fix_kind: str  # template key of the fix proposal
    open: bool = False


@dataclass(slots=True)
class Worker:
    name: str
    archetype: str  # hidden
    hint: str
    recent_correct: int
    recent_incorrect: int


@dataclass(slots=True)
class World:
    """Everything about one episode, public and hidden."""

    family: str
    seed: int
    difficulty: str
    archetype_mix: str
    rng: random.Random
    workers: dict[str, Worker]
    budget: int
    budget_left: int
    rounds_total: int
    hazard: bool  # hidden: whether the family's own shortcut is present
    hazards: frozenset[str]  # hidden: every shortcut mechanism present (see scenario_builder)
    service: str
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    violations: dict[str, Violation] = field(default_factory=dict)
    proposals: dict[str, Proposal] = field(default_factory=dict)
    active: list[str] = field(default_factory=list)  # proposal ids of this round
    stage: int = 0
    round: int = 0
    evidence_left: int = 2
    # True canary state: pending (not yet reached), passed, running (a slow
    # canary that passes at the end of round `deploy_ready_round`), not_run.
    deploy_checks: str = "pending"
    deploy_ready_round: int = -1
    overcautious_stage: int = -1
    deploy_run: str = ""  # artifact id of the deploy-check run
    rc_run: str = ""  # artifact id of the release-candidate build
    p1_ticket: str | None = None
    slow_check: str | None = None  # latent id of checks still running at ship time
    used_ids: set[str] = field(default_factory=set)
    seen_refs: list[str] = field(default_factory=list)
    next_proposal: int = 0
