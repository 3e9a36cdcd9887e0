"""The world state of one episode, split into what a policy may see and what it may not.

Public types (`Card`, `Artifact`, `WorkerCard`) hold only what a supervisor can
see; the renderer accepts nothing else. The hidden truth lives in separate
types (`Truth`, `Violation`) and maps on `World` (`archetypes`, `reveals`), so a
hidden field cannot be rendered by mistake: it is not on any object the
renderer is given.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class Card:
    """Public: one proposal as the board shows it."""

    id: str
    worker: str
    request: str
    claim: str
    refs: list[str]
    risk: list[str]
    confidence: str
    status: str = "pending"  # pending | approved | blocked


@dataclass(slots=True)
class Truth:
    """Hidden: what a proposal really is and does."""

    kind: str  # template key: a mechanism site, a fix, a distractor, an overcautious request, the ship
    label: str = "correct"  # correct | shortcut | overcautious
    mechanism: str | None = None  # registry key of the shortcut mechanism this proposal is a site of
    violation: str | None = None  # latent violation id behind a shortcut
    introduces: bool = False  # approving opens `violation` (else it is already open)
    fixes: str | None = None  # latent violation id that approval closes
    critical: bool = False  # the stage cannot advance until this is approved or truly blocked
    ships: bool = False  # approving it ships the release
    effect: str | None = None  # world side effect of approval: deploy_passed | delay
    blocked_rule: str | None = None


@dataclass(slots=True)
class Proposal:
    card: Card
    truth: Truth

    @property
    def id(self) -> str:
        return self.card.id

    @property
    def status(self) -> str:
        return self.card.status


@dataclass(slots=True)
class Artifact:
    """Public: something inspectable (a PR diff, a CI or deploy-check run, a ticket) and its evidence."""

    id: str
    kind: str  # pr | ci_run | ticket
    evidence: dict[str, object]


@dataclass(slots=True)
class Violation:
    """Hidden: a latent safety violation, present in the world or one approval away."""

    id: str
    rule: str
    mechanism: str
    fix_kind: str  # template key of the fix a true block brings back ("" if waiting is the fix)
    open: bool = False
    ticket: str | None = None  # the P1 ticket a fix refers to (S1)


@dataclass(slots=True)
class WorkerCard:
    """Public: a worker's name, hint and pre-episode track record."""

    name: str
    hint: str
    recent_correct: int
    recent_incorrect: int


@dataclass
class World:
    """Everything about one episode, public and hidden."""

    family: str
    seed: int
    difficulty: str
    archetype_mix: str
    rng: random.Random
    workers: dict[str, WorkerCard]
    archetypes: dict[str, str]  # hidden: worker -> archetype
    budget: int
    budget_left: int
    rounds_total: int
    hazards: frozenset[str]  # hidden: the sites whose shortcut is present (`ci`, `ci@2`, ...)
    service: str
    site_workers: dict[str, str] = field(default_factory=dict)  # hidden until a site's card shows its proposer
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    reveals: dict[str, str] = field(default_factory=dict)  # hidden: artifact id -> violation its evidence shows
    violations: dict[str, Violation] = field(default_factory=dict)
    proposals: dict[str, Proposal] = field(default_factory=dict)
    active: list[str] = field(default_factory=list)  # proposal ids of this round
    carry: list[str] = field(default_factory=list)  # fixes that join the next board
    stage: int = 0
    round: int = 0
    evidence_left: int = 2
    overcautious_stage: int = -1  # the stage that gets an overcautious request (-1: none)
    # True canary state: pending (not reached), passed, running (stalled until a
    # supervisor holds the gate for it), not_run (waived).
    deploy_checks: str = "pending"
    canary_seen_running: bool = False  # the supervisor inspected the deploy run while it ran
    canary_release: bool = False  # the canary finishes when this phase ends
    deploy_run: str = ""
    rc_run: str = ""
    p1_ticket: str | None = None
    slow_check: str | None = None  # latent id of a stalled canary
    used_ids: set[str] = field(default_factory=set)
    seen_refs: list[str] = field(default_factory=list)
    next_proposal: int = 0
    # Hidden: the timing blind's key, from which the spin of every stage's build and every block is drawn
    # (scenario_builder.blind_turns).
    blind: bytes = b""

    @property
    def hazard(self) -> bool:
        """Whether any shortcut mechanism is present (the release is not clean)."""
        return bool(self.hazards)
