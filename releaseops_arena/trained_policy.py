"""The trained structured policy without torch: its features, its candidate calls, and a greedy scorer.

Each turn, every valid tool call on the board is a candidate (approve or block
each pending proposal under each relevant rule, inspect each of its artifacts,
ask its worker each question, hold); `features` describes a candidate from
visible information only. `training/structured_policy.py` trains an MLP over
these features with torch; its export writes the weights as JSON
(`trained_policy.json`, beside this module), and `TrainedPolicy` replays them here in plain
Python, so the engine, the web board and the Space image play the trained
policy without torch:

    python -m training.structured_policy --export runs/structured_v2.pt releaseops_arena/trained_policy.json
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from .catalog import ARTIFACT_KINDS, PHASES, QUESTION_TYPES, RULE_IDS, inspect_call
from .policy import Policy, evidence_violation, rules_for
from .rendering import View
from .tool_env import ReleaseOpsToolEnv

ACTIONS = ["approve", "block", *[a.tool for a in ARTIFACT_KINDS], *[f"ask:{q}" for q in QUESTION_TYPES], "hold"]
# Requests by what they do, not by name: the policy judges behaviour, not identities, so
# that what it learns about one worker's shortcuts can transfer to another's.
REQUEST_KIND = {"ship_release_candidate": "ship", "delay_release": "delay", "escalate_ticket_p1": "delay",
                "update_ticket": "paperwork", "close_ticket": "paperwork"}
REQUESTS = ["ship", "delay", "paperwork", "change"]
RISKS = ["payments", "checkout", "severity", "deploy", "ship", "docs", "observability", "ci"]
HINTS = ["veteran", "on_call", "new_agent", "recently_promoted", "returning_from_leave"]
VOICES = ["Certain:", "Per runbook", "should be fine"]
PHRASES = ["disabl", "flaky", "though", "exempt", "in flight", "test cleanup", "few reports", "hotfix process",
           "Canary deployed", "Canary green", "Canary started", "Real fix", "Fix for P1", "full canary", "cosmetic",
           "re-run", "first run", "quiet since", "verified", "fixed for real"]
REVEALING_ANSWERS = ["disabl", "Runbook v1 (2023)", "filed it P3", "was not run", "stalled", "until a re-run",
                     "never reached", "errors continue"]
RULES = list(RULE_IDS)

WEIGHTS = Path(__file__).with_name("trained_policy.json")
EXPORT_COMMAND = ("python -m training.structured_policy --export runs/structured_v2.pt "
                  "releaseops_arena/trained_policy.json")
FORMAT = "releaseops-arena/trained-policy/1"


def onehot(value, options) -> list[float]:
    return [1.0 if value == o else 0.0 for o in options]


# Length of the target-proposal part of a feature vector (zeros for a hold).
TARGET_DIM = (len(REQUESTS) + len(RISKS) + 3 + 3 + 1 + len(HINTS) + len(VOICES) + len(PHRASES)
              + 1 + 1 + len(RULES) + 1 + 1 + 1 + len(RULES) + 1 + 3)


def features(view: View, action: str, p: dict | None, rule: str | None = None, ref: str | None = None) -> list[float]:
    """The candidate's feature vector: global clock and budget, the action, the target proposal."""
    b = view.board
    spare = view.spare_phases()
    g = [*onehot(b["phase"], PHASES), b["hours_to_deadline"] / 60, *onehot(min(max(spare, 0), 3), range(4)),
         *onehot(min(b["review_budget_remaining"], 4), range(5)), *onehot(b["evidence_actions_remaining"], range(3)),
         len(view.pending()) / 5]
    a = onehot(action, ACTIONS)
    if p is None:
        return g + a + [0.0] * TARGET_DIM
    stats = {w["worker"]: w for w in b.get("worker_stats", [])}.get(p["worker"])
    recent = stats["recent"] if stats else {"correct": 0, "incorrect": 0}
    claim = p["claim"]
    evidence = [view.evidence[r] for r in p["refs"] if r in view.evidence]
    found = [evidence_violation(e) for e in evidence]
    answer = view.answers.get(p["id"], "")
    t = [*onehot(REQUEST_KIND.get(p["request"], "change"), REQUESTS), *[1.0 if r in p["risk"] else 0.0 for r in RISKS],
         *onehot(p["confidence"], ["low", "medium", "high"]), *onehot(min(len(p["refs"]), 2), range(3)),
         recent["incorrect"] / max(1, recent["correct"] + recent["incorrect"]),
         *onehot(stats["hint"] if stats else None, HINTS),
         *[1.0 if v in claim else 0.0 for v in VOICES], *[1.0 if w.lower() in claim.lower() else 0.0 for w in PHRASES],
         1.0 if (p["worker"], p["request"], claim) in view.blocked_claims else 0.0,
         1.0 if evidence else 0.0, *[1.0 if r in found else 0.0 for r in RULES],
         1.0 if any(e.get("kind") == "deploy_checks" and e.get("status") == "passed" for e in evidence) else 0.0,
         1.0 if answer else 0.0, 1.0 if any(w in answer for w in REVEALING_ANSWERS) else 0.0,
         *onehot(rule, RULES), 1.0 if rule and rule in found else 0.0,
         *ref_features(view, p, ref)]
    return g + a + t


def ref_features(view: View, p: dict, ref: str | None) -> list[float]:
    """Which artifact an inspection would open: without this, a ship's release-candidate run
    and its deploy run look the same, and a greedy policy opens whichever comes first."""
    if ref is None:
        return [0.0, 0.0, 0.0]
    cited_elsewhere = any(ref in q["refs"] for q in view.proposals.values() if q["id"] != p["id"])
    return [1.0 if ref in view.evidence else 0.0, 1.0 if ref == p["refs"][-1] else 0.0,
            1.0 if cited_elsewhere else 0.0]


def candidates(view: View) -> list[tuple[str, dict, list[float]]]:
    """Every valid call on the board with its features."""
    out = []
    pending = view.pending()
    can_look = view.can_look()
    asked = set()
    for p in pending:
        out.append(("approve_proposal", {"proposal_id": p["id"]}, features(view, "approve", p)))
        for r in rules_for(p):
            out.append(("block_proposal", {"proposal_id": p["id"], "rule_id": r}, features(view, "block", p, rule=r)))
        if can_look:
            for ref in p["refs"]:
                if ref not in view.inspected_this_phase:
                    tool, args = inspect_call(ref)
                    out.append((tool, args, features(view, tool, p, ref=ref)))
            if p["worker"] not in asked:
                asked.add(p["worker"])
                for q in QUESTION_TYPES:
                    out.append(("ask_worker", {"worker_id": p["worker"], "question_type": q},
                                features(view, f"ask:{q}", p)))
    out.append(("hold_release", {"reason_code": "risk_too_high"}, features(view, "hold", None)))
    return out


@lru_cache(maxsize=1)
def feature_dim() -> int:
    view = View(json.loads(ReleaseOpsToolEnv().reset(seed=0)))
    return len(candidates(view)[0][2])


class Scorer:
    """The MLP of `training.structured_policy.Scorer` (linear, tanh, linear, tanh, linear) in plain Python.

    `layers` is [(weight rows, bias), ...] as torch stores them (out x in). The first layer is kept
    by input column, because a feature vector is mostly zeros (one-hots) and only its nonzero
    entries need a multiply.
    """

    def __init__(self, layers: list[tuple[list[list[float]], list[float]]]):
        (w1, self.b1), *rest = layers
        self.columns = [list(col) for col in zip(*w1)]
        self.rest = rest

    def score(self, x: list[float]) -> float:
        h = list(self.b1)
        for xi, col in zip(x, self.columns):
            if xi:
                h = [hj + xi * cj for hj, cj in zip(h, col)]
        for w, b in self.rest:
            h = [math.tanh(v) for v in h]
            h = [bj + sum(wi * hi for wi, hi in zip(row, h)) for row, bj in zip(w, b)]
        return h[0]

    def best(self, xs: list[list[float]]) -> int:
        """Index of the highest score; the first on a tie, as torch.argmax."""
        scores = [self.score(x) for x in xs]
        return scores.index(max(scores))


def load_weights(path: str | Path = WEIGHTS) -> Scorer:
    """A `Scorer` from an exported weights file; refuses one whose features no longer match."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a trained-policy weights file (format {data.get('format')!r}, "
                         f"expected {FORMAT!r}); write one with: {EXPORT_COMMAND}")
    if data["dim"] != feature_dim():
        raise ValueError(f"{path}: weights for {data['dim']} features, but the features now have "
                         f"{feature_dim()}; retrain, then re-export with: {EXPORT_COMMAND}")
    return Scorer([(layer["weight"], layer["bias"]) for layer in data["layers"]])


@lru_cache(maxsize=4)
def _shipped(path: str) -> Scorer:
    return load_weights(path)


class TrainedPolicy(Policy):
    """The trained structured policy, greedy, from exported weights. It sees only the board."""

    name = "trained"

    def __init__(self, path: str | Path = WEIGHTS):
        self.scorer = _shipped(str(path))

    def begin(self, observation: str) -> None:
        self.view = View(json.loads(observation))  # its own reader: it also remembers this policy's calls

    def observe(self, text: str) -> None:
        if text.startswith("{\""):  # a result; errors cannot happen (only valid calls are candidates)
            self.view.update(json.loads(text))

    def act(self, view):
        cands = candidates(self.view)
        tool, args, _ = cands[self.scorer.best([c[2] for c in cands])]
        self.view.note_call(tool, args)
        return tool, args
