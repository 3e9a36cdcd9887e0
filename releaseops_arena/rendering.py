"""The one compact serializer of what a policy may see of the world, and its one reader.

The renderer accepts only public types (`Card`, `WorkerCard`): the hidden
truth lives on other objects, so a hidden field cannot be rendered by
mistake, and handing it anything else is a `TypeError`.

`View` is the inverse: it rebuilds the board from the observation and the
tool results a supervisor receives, and keeps what it has seen (evidence,
answers, refs). The baselines, the structured policy, the web board and the
tests all read observations through it; `tests/engine/test_structure.py` checks that
its board equals the engine's after every call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import catalog
from .scenario_builder import EVIDENCE_PER_ROUND, HOURS_PER_ROUND
from .world import Card, WorkerCard, World

RULE_NAMES = [rule.name for rule in catalog.RULES.values()]


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)
# Every step renders a small dict, so the per-call overhead matters more than the encoding:
# `JSONEncoder.encode` builds a fresh C encoder on every call (json/encoder.py, iterencode).
# This is that same C encoder, built once from the same options (rendered data is never
# cyclic); without the C speedups, the pure-Python path gives the same text.
_C_ENCODE = json.encoder.c_make_encoder and json.encoder.c_make_encoder(
    None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
)


def dumps(data: dict) -> str:
    """Compact, deterministic JSON: every character is a token paid per generation."""
    return "".join(_C_ENCODE(data, 0)) if _C_ENCODE else _ENCODER.encode(data)


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


# ----------------------------------------------------------------- reader

CLOCK_KEYS = ("phase", "phase_index", "hours_to_deadline", "review_budget_remaining", "evidence_actions_remaining")


@dataclass
class View:
    """What a supervisor has seen: the latest board, evidence, answers and refs, and its own calls.

    Built from the first observation (`View(json.loads(text))`) and fed every
    tool result (`update`); `note_call` records the supervisor's own calls
    before they are made.
    """

    board: dict
    proposals: dict[str, dict] = field(default_factory=dict)  # every proposal seen, with its latest status
    evidence: dict[str, dict] = field(default_factory=dict)  # artifact id -> its evidence
    answers: dict[str, str] = field(default_factory=dict)  # proposal id -> the worker's answer
    refs: list[str] = field(default_factory=list)  # every ref seen on a board, in order
    phases: int = 0  # phases that have ended
    blocked_claims: set[tuple] = field(default_factory=set)  # (worker, request, claim) this supervisor blocked
    inspected_this_phase: set[str] = field(default_factory=set)

    def __post_init__(self):
        self._absorb(self.board)

    def _absorb(self, part: dict) -> None:
        for key in CLOCK_KEYS:
            if key in part:
                self.board[key] = part[key]
        if "proposals" in part:
            self.board["proposals"] = part["proposals"]
            for p in part["proposals"]:
                self.proposals[p["id"]] = dict(p)
                self.refs.extend(r for r in p["refs"] if r not in self.refs)

    def note_call(self, tool: str, args: dict) -> None:
        if tool == "block_proposal" and args["proposal_id"] in self.proposals:
            p = self.proposals[args["proposal_id"]]
            self.blocked_claims.add((p["worker"], p["request"], p["claim"]))
        if tool in catalog.ARTIFACT_BY_TOOL:
            self.inspected_this_phase.add(args[catalog.ARTIFACT_BY_TOOL[tool].argument])

    def update(self, result: dict) -> None:
        """Read one tool result (a successful call's JSON)."""
        if "proposal" in result and "status" in result and result["proposal"] in self.proposals:
            self.proposals[result["proposal"]]["status"] = result["status"]
        if "evidence" in result:
            self.evidence[result[catalog.ARTIFACT_BY_TOOL[result["tool"]].result_key]] = result["evidence"]
            for key in ("review_budget_remaining", "evidence_actions_remaining"):
                self.board[key] = result[key]
        if "answer" in result and "proposal" in result:
            self.answers[result["proposal"]] = result["answer"]
        if result.get("tool") == "ask_worker":  # its result carries no clock: it costs what evidence costs
            self.board["review_budget_remaining"] -= 1
            self.board["evidence_actions_remaining"] -= 1
        if "next" in result:
            self.phases += 1
            self.inspected_this_phase = set()
            # A deploy-check run is a live process: what was seen last phase may be stale.
            self.evidence = {
                k: v
                for k, v in self.evidence.items()
                if v.get("kind") != "deploy_checks" or v.get("status") == "passed"
            }
            self._absorb(result["next"])

    def current(self) -> dict:
        """The board as the engine would render it now (each proposal with its latest status)."""
        return {**self.board, "proposals": [self.proposals[p["id"]] for p in self.board["proposals"]]}

    def pending(self) -> list[dict]:
        return [
            self.proposals[p["id"]]
            for p in self.board["proposals"]
            if self.proposals[p["id"]].get("status", "pending") == "pending"
        ]

    def can_look(self) -> bool:
        return self.board["evidence_actions_remaining"] > 0 and self.board["review_budget_remaining"] > 0

    def spare_phases(self) -> int:
        """Phases left beyond the ones the remaining stages need."""
        return self.board["hours_to_deadline"] // HOURS_PER_ROUND - (len(catalog.PHASES) - self.board["phase_index"])
