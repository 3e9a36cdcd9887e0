"""The one compact serializer: what a policy may see of the world.

The renderer accepts only public types (`Card`, `WorkerCard`): the hidden
truth lives on other objects, so a hidden field cannot be rendered by
mistake, and handing it anything else is a `TypeError`.
"""

from __future__ import annotations

import json

from . import catalog
from .world import Card, World, WorkerCard
from .scenario_builder import EVIDENCE_PER_ROUND, HOURS_PER_ROUND

RULE_NAMES = [name for name, _ in catalog.RULES.values()]


# Built once: json.dumps with options constructs a new encoder on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(data: dict) -> str:
    """Compact, deterministic JSON: every character is a token paid per generation."""
    return _ENCODER.encode(data)


def _public(value, kind):
    if type(value) is not kind:
        raise TypeError(f"the renderer takes a {kind.__name__}, not a {type(value).__name__}")
    return value


def card_view(card: Card) -> dict:
    p = _public(card, Card)
    view = {
        "id": p.id,
        "worker": p.worker,
        "claim": p.claim,
        "request": p.request,
        "refs": list(p.refs),
        "risk": list(p.risk),
        "confidence": p.confidence,
    }
    if p.status != "pending":  # only resolved proposals say so; saves tokens
        view["status"] = p.status
    return view


def worker_view(card: WorkerCard) -> dict:
    w = _public(card, WorkerCard)
    return {"worker": w.name, "hint": w.hint, "recent": {"correct": w.recent_correct, "incorrect": w.recent_incorrect}}


def proposal_view(world: World, pid: str) -> dict:
    return card_view(world.proposals[pid].card)


def clock(world: World, budget_left: int, evidence_left: int) -> dict:
    return {
        "phase": catalog.PHASES[world.stage],
        "phase_index": world.stage,
        "hours_to_deadline": HOURS_PER_ROUND * (world.rounds_total - world.round),
        "review_budget_remaining": budget_left,
        "evidence_actions_remaining": evidence_left,
    }


def board(world: World, budget_left: int, evidence_left: int = EVIDENCE_PER_ROUND) -> dict:
    """The full public observation, shaped like the design's template."""
    return {
        **clock(world, budget_left, evidence_left),
        "release": {"service": world.service, "stage": "candidate"},
        "rules": RULE_NAMES,
        "proposals": [proposal_view(world, pid) for pid in world.active],
        "worker_stats": [worker_view(w) for w in world.workers.values()],
    }


def next_phase(world: World, budget_left: int) -> dict:
    """What changed when a phase ends: the clock and the new proposals (static parts omitted)."""
    return {
        **clock(world, budget_left, EVIDENCE_PER_ROUND),
        "proposals": [proposal_view(world, pid) for pid in world.active],
    }


def render_observation(world: World, budget_left: int | None = None, evidence_left: int = EVIDENCE_PER_ROUND) -> str:
    """The initial observation string returned by `reset`."""
    return dumps(board(world, world.budget if budget_left is None else budget_left, evidence_left))
