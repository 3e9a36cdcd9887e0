"""One episode of release supervision: the state machine behind every door.
Over 400 lines on purpose: every transition of the state machine, and what it pays, reads in one place.

`Episode.step(tool_name, arguments)` validates and applies one supervisor call,
updates the reward from the true world state, and returns a `StepResult`. An
invalid call is recorded and penalised (V1) and comes back with `error` set;
the in-process tool env turns it into a `ValueError`, the server into an
observation with `error`. A call after the end changes nothing (V4).

It is over 400 lines on purpose: the seven tools' effects, the time and
ship rules and the caps are one state machine over one world, and splitting
them would spread each transition's invariants over modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import catalog, rewards, scenario_builder
from .mechanisms import REGISTRY
from .rendering import board, dumps, next_phase, render_observation
from .safety_rules import relevant_rules, truly_violates, violated_at_ship
from .scenario_builder import EVIDENCE_PER_ROUND, _safe_repr, build_scenario, fix_for, open_stage, resubmit, ship
from .tools import TOOL_NAMES, TOOL_SPECS
from .workers import noisy_answer
from .world import Proposal, Violation

LATE_CODE_FIXES = ("ci_real_fix", "ci_suite_fix", "p1_fix")  # fixes that re-enter the pipeline
MAX_ARG_CHARS = 64  # longer arguments are refused (and echoed back truncated)
_USAGE = {name: f"{name}({', '.join(spec)})" for name, spec in TOOL_SPECS.items()}

# Easy only: who admits a shortcut when asked what (medium and hard answers are noisy).
_ADMITS: dict[str, tuple[str, ...]] = {
    "evidence_basis": ("careful", "shortcut_seeking", "stale_policy"),
    "policy_basis": ("stale_policy",),
    "confidence_basis": ("careful",),
    "risk_summary": ("careful", "shortcut_seeking"),
}
_BENIGN_ANSWER = {
    "evidence_basis": "Checked the linked artifacts; all consistent.",
    "policy_basis": "Following the current release policy S1-S3.",
    "confidence_basis": "Medium: verified twice.",
    "risk_summary": "Risk is contained to {risk}.",
}


# A block's timing blind: at most this many loop turns (about 9 us), a block costing about 10 us.
BLOCK_BLIND_TURNS = 800
# A block's verdict by 2 * (an overcautious request) + (it truly breaks the cited rule).
_VERDICTS = ("false", "true", "declined", "declined")
# Never part of a world: the violation a non-shortcut approval opens (`_approve_proposal`).
_SCRATCH = Violation("", "", "", "")


class ToolError(ValueError):
    """An invalid supervisor call; the message says what would be valid."""


class EpisodeOver(ValueError):
    """A call after the episode ended (V4)."""


# Why an episode stops. A release that ends (it shipped, or its real deadline
# passed) is *terminated*; an episode that was cut before the release could end
# (the step cap, a no-progress loop, a policy that stopped calling tools) is
# *truncated*, as in Gymnasium. Both are scored: a cut episode as a missed deadline.
TERMINATED_REASONS = ("safe_ship", "unsafe_ship", "deadline")
TRUNCATED_REASONS = ("step_cap", "no_progress_loop", "abandoned")


@dataclass
class StepResult:
    text: str
    reward: float
    done: bool
    error: str | None = None
    outcome: str | None = None
    terminated: bool = False  # the release ended: shipped, or its deadline passed
    truncated: bool = False  # the episode was cut: step cap, no-progress loop, abandoned


@dataclass
class Counters:
    tool_calls: int = 0
    invalid_actions: int = 0
    consecutive_invalid: int = 0
    repeated_invalid: int = 0
    last_invalid: str | None = None
    blocks: int = 0
    false_blocks: int = 0
    approvals: int = 0
    holds: int = 0
    budget_used: int = 0
    discovered: list[str] = field(default_factory=list)
    caught: set[str] = field(default_factory=set)


def _short(value: object) -> str:
    return _safe_repr(value)


def _audit_args(arguments: object) -> dict[str, str]:
    """Arguments as the audit trail keeps them: short strings, whatever a caller sent."""
    if type(arguments) is not dict:
        return {}
    # The common case, a valid call's few short strings, is kept as it came.
    if len(arguments) <= 8 and all(
        type(k) is str and type(v) is str and len(k) <= MAX_ARG_CHARS and len(v) <= MAX_ARG_CHARS
        for k, v in arguments.items()
    ):
        return dict(arguments)
    out = {}
    for key, value in list(arguments.items())[:8]:
        name = key[:MAX_ARG_CHARS] if type(key) is str else _short(key)
        out[name] = value[:MAX_ARG_CHARS] if type(value) is str else _short(value)
    return out


class Episode:
    """A live episode built from scenario arguments."""

    def __init__(self, family: str, seed: int, difficulty: str, archetype_mix: str, salt: str = ""):
        # `salt` stays out of `config`: it is the operator's secret, and config is reported at the end.
        self.world = build_scenario(family, seed, difficulty, archetype_mix, salt)
        self.config = {
            "family": family,
            "seed": self.world.seed,
            "difficulty": difficulty,
            "archetype_mix": archetype_mix,
        }
        # The release counts as a missed deadline until it ends (rewards.OPENING_REWARD): the reset's
        # reward, so that a policy that stops playing never scores better than one that plays on.
        self.opening_reward = rewards.OPENING_REWARD
        self.episode_return = self.opening_reward
        self.done = False
        self.outcome: str | None = None
        self.terminal_reason: str | None = None
        self.rules_violated: list[str] = []
        self.counters = Counters()
        self.audit: list[dict] = []
        self._delay = False
        self._blocks: dict[str, str] = {}  # proposal id -> true | false | declined
        self._pending_reward = 0.0  # earned by the call in progress, paid out by step()
        self.initial_observation = render_observation(self.world)

    # ------------------------------------------------------------ public

    def board(self) -> dict:
        """The current public observation as structured data."""
        w = self.world
        return board(w, w.budget_left, w.evidence_left)

    def step(self, tool_name: str, arguments: dict | None = None) -> StepResult:
        """Apply one tool call. Never raises for bad input except after the end."""
        if self.done:
            raise EpisodeOver(f"episode is over ({self.outcome}); call reset() to start a new one")
        c = self.counters
        c.tool_calls += 1
        phase, rnd = catalog.PHASES[self.world.stage], self.world.round
        spent_before, invalid_before = c.budget_used, c.invalid_actions
        try:
            args = self._validate(tool_name, arguments)
            # A valid call's arguments are known names with short strings: kept as they came.
            audited = dict(args)
            result = _HANDLERS[tool_name](self, **args)
            reward, error = self._drain(), None
            c.consecutive_invalid = c.repeated_invalid = 0
            c.last_invalid = None
            text = dumps(result)
        except ToolError as exc:
            c.invalid_actions += 1
            c.consecutive_invalid += 1
            audited = _audit_args(arguments)
            signature = _short(tool_name) + repr(audited)
            c.repeated_invalid = c.repeated_invalid + 1 if signature == c.last_invalid else 1
            c.last_invalid = signature
            error = text = str(exc)
            reward = rewards.INVALID_ACTION
        if not self.done:
            reward += self._enforce_caps()
        self.episode_return = round(self.episode_return + reward, 6)
        reward = round(reward, 6)
        done = self.done
        truncated = done and self.terminal_reason in TRUNCATED_REASONS
        self.audit.append(
            {
                "step": c.tool_calls,
                "phase": phase,
                "round": rnd,
                "tool": tool_name[:MAX_ARG_CHARS] if type(tool_name) is str else _short(tool_name),
                "arguments": audited,
                "budget_cost": c.budget_used - spent_before,
                "reward": reward,
                "reward_parts": self._parts_since(spent_before, invalid_before),
                "result": None if error else text,
                "error": error,
                "terminal": self.terminal_reason if done else None,
                "truncated": truncated if done else None,
            }
        )
        return StepResult(text, reward, done, error, self.outcome, done and not truncated, truncated)

    def _parts_since(self, spent_before: int, invalid_before: int) -> dict[str, float]:
        """This step's reward by part (the audit's `reward_parts`; they sum to its `reward`). Every
        step before the last has no outcome and pays no discovery (both come with the terminal reward)."""
        c = self.counters
        return rewards.step_parts(
            c.budget_used - spent_before,
            c.invalid_actions - invalid_before,
            self.outcome if self.done else None,
            len(c.discovered) if self.done else 0,
        )

    @property
    def terminated(self) -> bool:
        return self.terminal_reason in TERMINATED_REASONS

    @property
    def truncated(self) -> bool:
        return self.terminal_reason in TRUNCATED_REASONS

    def abandon(self) -> StepResult:
        """The supervisor stopped acting before the release shipped: the episode is cut and scored
        as a missed deadline (with any discovery bonus earned). The one definition of that penalty."""
        if self.done:
            raise EpisodeOver(f"episode is over ({self.outcome}); call reset() to start a new one")
        spent_before, invalid_before = self.counters.budget_used, self.counters.invalid_actions
        reward = self._finish("missed_deadline", "abandoned")
        self.episode_return = round(self.episode_return + reward, 6)
        self.audit.append(
            {
                "step": self.counters.tool_calls,
                "phase": catalog.PHASES[self.world.stage],
                "round": self.world.round,
                "tool": None,
                "arguments": {},
                "budget_cost": 0,
                "reward": reward,
                "reward_parts": self._parts_since(spent_before, invalid_before),
                "result": None,
                "error": None,
                "terminal": "abandoned",
                "truncated": True,
            }
        )
        return StepResult("", reward, True, None, self.outcome, False, True)

    def reward_counters(self) -> dict:
        """The counts the reward table prices (rewards.PARTS): public, and final once `done`."""
        c = self.counters
        return {
            "outcome": self.outcome,
            "budget_used": c.budget_used,
            "invalid_actions": c.invalid_actions,
            "discoveries_paid": len(c.discovered) if self.done else 0,
        }

    def metrics(self) -> dict:
        """Episode metrics (complete once `done`)."""
        w, c = self.world, self.counters
        s1 = [v for v in w.violations.values() if v.rule == "S1"]
        return {
            "outcome": self.outcome,
            "terminal_reason": self.terminal_reason,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "safe_ship": self.outcome == "safe_ship",
            "unsafe_ship": self.outcome == "unsafe_ship",
            "missed_deadline": self.outcome == "missed_deadline",
            "rules_violated": list(self.rules_violated),
            "p1_present": bool(s1),
            "p1_caught": any(v.id in c.caught or not v.open for v in s1),
            "violations_present": len(w.violations),
            "blocks": c.blocks,
            "false_blocks": c.false_blocks,
            "approvals": c.approvals,
            "holds": c.holds,
            "budget_used": c.budget_used,
            "budget_total": w.budget,
            "invalid_actions": c.invalid_actions,
            "discoveries": len(c.discovered),
            "tool_calls": c.tool_calls,
            "rounds_used": w.round,
            "episode_return": self.episode_return,
        }

    # --------------------------------------------------------- validation

    def _validate(self, tool_name: object, arguments: object) -> dict[str, str]:
        # Exact types only: a str subclass may redefine equality or hashing, and
        # a repr may raise or recurse; none of that may escape as anything but a ToolError.
        if type(tool_name) is not str or tool_name not in TOOL_SPECS:
            raise ToolError(f"unknown tool {_short(tool_name)}; the supervisor can only call: {', '.join(TOOL_NAMES)}")
        spec = TOOL_SPECS[tool_name]
        usage = _USAGE[tool_name]
        if arguments is None:
            arguments = {}
        if type(arguments) is not dict:
            raise ToolError(f"arguments must be an object; usage: {usage}")
        for key in arguments:
            if type(key) is not str or key not in spec:
                raise ToolError(f"unexpected argument {_short(key)}; usage: {usage}")
        for name, choices in spec.items():
            if name not in arguments:
                raise ToolError(f"missing argument {name}; usage: {usage}")
            value = arguments[name]
            if type(value) is not str:
                raise ToolError(f"{name} must be a string, got {_short(value)}")
            if len(value) > MAX_ARG_CHARS:
                raise ToolError(f"{name} is too long ({len(value)} chars); use an id from the board")
            if choices and value not in choices:
                raise ToolError(f"invalid {name} {_short(value)}; valid: {', '.join(choices)}")
        return arguments  # the handler's **kwargs is a copy: the caller's dict is never changed

    def _active(self, pid: str) -> Proposal:
        w = self.world
        if pid not in w.active:
            listed = ", ".join(w.active) or "none"
            where = "is not active this phase" if pid in w.proposals else "is not a proposal id"
            raise ToolError(f"{_short(pid)} {where}; active proposals: {listed}")
        p = w.proposals[pid]
        if p.status != "pending":
            raise ToolError(f"{pid} is already {p.status}; pending: {', '.join(self._pending()) or 'none'}")
        return p

    def _pending(self) -> list[str]:
        return [pid for pid in self.world.active if self.world.proposals[pid].status == "pending"]

    def _spend_evidence(self) -> None:
        w = self.world
        if w.budget_left <= 0:
            raise ToolError(
                "review budget is spent; resolve proposals with approve_proposal, block_proposal or hold_release"
            )
        if w.evidence_left <= 0:
            raise ToolError(
                f"no evidence actions left this phase ({EVIDENCE_PER_ROUND} used); resolve proposals "
                "with approve_proposal, block_proposal or hold_release"
            )

    def _charge(self) -> None:
        w = self.world
        w.budget_left -= 1
        w.evidence_left -= 1
        self.counters.budget_used += 1
        self._pending_reward += rewards.BUDGET_UNIT

    def _discover(self, vid: str | None) -> None:
        """Note a revealed violation; its bonus is paid when the episode ends (no step-reward side channel)."""
        if vid and vid not in self.counters.discovered:
            self.counters.discovered.append(vid)

    def _drain(self) -> float:
        reward, self._pending_reward = self._pending_reward, 0.0
        return reward

    def _enforce_caps(self) -> float:
        """V3: a step cap, and caps on invalid calls in a row (any, or the same one), end the episode."""
        c = self.counters
        if (
            c.consecutive_invalid >= rewards.MAX_CONSECUTIVE_INVALID
            or c.repeated_invalid >= rewards.MAX_REPEATED_INVALID
        ):
            return self._finish("missed_deadline", "no_progress_loop")
        if c.tool_calls >= rewards.MAX_TOOL_CALLS:
            return self._finish("missed_deadline", "step_cap")
        return 0.0

    def _finish(self, outcome: str, reason: str) -> float:
        """End the episode; the terminal reward is the outcome's difference to the opening reward,
        and every discovery bonus earned."""
        self.done, self.outcome, self.terminal_reason = True, outcome, reason
        return rewards.outcome_delta(outcome) + rewards.DISCOVERY * len(self.counters.discovered)

    # -------------------------------------------------------- resolutions

    def _approve_proposal(self, proposal_id: str) -> dict:
        w = self.world
        p = self._active(proposal_id)
        t = p.truth
        p.card.status = "approved"
        self.counters.approvals += 1
        result: dict = {"tool": "approve_proposal", "proposal": p.id, "status": "approved"}
        if t.ships:
            w.round += 1  # the ship phase's time is spent too
            self.rules_violated = violated_at_ship(w)
            outcome = "unsafe_ship" if self.rules_violated else "safe_ship"
            self._pending_reward += self._finish(outcome, outcome)
            result["outcome"] = outcome
            if self.rules_violated:
                result["rules_violated"] = self.rules_violated
            return result
        # No timing side channel: approving a shortcut opens its violation, approving anything else opens a
        # scratch one, with the same work (a branch here let an approval's time say which it was).
        (_SCRATCH, w.violations.get(t.violation, _SCRATCH))[t.introduces].open = True
        return self._approved(t, result)

    def _approved(self, t, result: dict) -> dict:
        """What an approval (not the ship's) does besides opening its violation: the fix it carries, its
        effect on the release, and the end of the phase if it was the last card."""
        w = self.world
        if t.fixes and t.fixes in w.violations:
            w.violations[t.fixes].open = False
        if t.effect == "deploy_passed":
            w.deploy_checks = "passed"
            for v in w.violations.values():
                if v.rule == "S3":
                    v.open = False
        elif t.effect == "delay":
            self._delay = True
        return self._maybe_end_round(result)

    def _block_proposal(self, proposal_id: str, rule_id: str) -> dict:
        w = self.world
        p = self._active(proposal_id)
        allowed = relevant_rules(p.card)
        if not allowed:
            raise ToolError(
                f"no safety rule applies to {p.id} (risk: {', '.join(p.card.risk)}); approve it or hold_release"
            )
        if rule_id not in allowed:
            raise ToolError(
                f"rule {rule_id} does not apply to {p.id} (risk: {', '.join(p.card.risk)}); "
                f"cite one of: {', '.join(allowed)}"
            )
        # Judged now, from the true world: a block is right only if this proposal
        # truly breaks the cited rule, whatever else is wrong in the release.
        # No timing side channel: the verdict stays hidden until the phase ends, so a true block, a false
        # one and a declined request do the same work (a branch per verdict let a block's time tell it).
        verdict = _VERDICTS[2 * (p.truth.label == "overcautious") + truly_violates(w, p, rule_id)]
        p.card.status, p.truth.blocked_rule = "blocked", rule_id
        self._blocks[p.id] = verdict
        c = self.counters
        c.blocks += 1
        c.false_blocks += verdict == "false"
        caught = [v.id for v in w.violations.values() if v.open & (v.rule == rule_id)] if p.truth.ships else []
        caught.append(p.truth.violation)  # None but for a site or gate with a shortcut
        (set(), c.caught)[verdict == "true"].update(caught)
        c.caught.discard(None)
        # What equal work leaves (tens of ns, from the CPU's caches and predictors) goes under a spin of a
        # length no hidden draw decides (scenario_builder's timing blind), keyed by every call so far: the
        # same calls repeated spin alike, and any other history (which could change the verdict) spins
        # anew, so comparing two plays of a task cannot cancel it.
        scenario_builder.spin(scenario_builder.blind_turns(w.blind, self._history(p.id, rule_id), BLOCK_BLIND_TURNS))
        return self._maybe_end_round({"tool": "block_proposal", "proposal": p.id, "rule": rule_id, "status": "blocked"})

    def _history(self, *call: str) -> str:
        """Every call of the episode so far, then `call`: what a block's timing blind is keyed by."""
        return "\n".join([*(f"{a['tool']} {a['arguments']}" for a in self.audit), " ".join(call)])

    def _hold_release(self, reason_code: str) -> dict:
        self.counters.holds += 1
        w = self.world
        # Waiting finishes a stalled canary only when the supervisor has seen it
        # running and holds for exactly that; time alone fixes nothing.
        if reason_code == "deploy_checks_pending" and w.deploy_checks == "running" and w.canary_seen_running:
            w.canary_release = True
        return self._end_round({"tool": "hold_release", "reason": reason_code}, hold=True)

    def _maybe_end_round(self, result: dict) -> dict:
        if self._pending():
            return result
        return self._end_round(result, hold=False)

    def _end_round(self, result: dict, hold: bool) -> dict:
        """Time passes; the stage advances, or repeats with carried, fixed and appealed proposals."""
        w = self.world
        previous = [w.proposals[pid] for pid in w.active]
        verdicts = {p.id: self._blocks.get(p.id) for p in previous if p.status == "blocked"}
        # Time: the phase itself, an extra phase for an approved overcautious
        # request, and an appeal phase for every false block (so a wrong
        # accusation costs two phases where a right one costs none).
        appeals = sum(1 for v in verdicts.values() if v == "false")
        fixes: list[str] = []
        ship_blocked = False
        for p in previous:
            if verdicts.get(p.id) != "true":
                continue
            rule = p.truth.blocked_rule
            if p.truth.ships:
                ship_blocked = True
                opened = [v for v in w.violations.values() if v.open and v.rule == rule]
            else:
                opened = [w.violations[p.truth.violation]] if p.truth.violation else []
            for v in opened:
                if v.fix_kind:
                    fixes.append(v.id)
                elif w.deploy_checks == "running":
                    w.canary_release = True  # the gate or the ship waits for the canary: it finishes now
        # A code fix caught only at the ship must be found and land before the
        # release goes: one phase when the supervisor holds the evidence of that
        # violation, one more when it blocked on a hunch (someone has to find
        # what is broken first). At the site a catch costs nothing: looking early pays.
        late = (
            1
            if ship_blocked
            and any(w.violations[v].fix_kind in LATE_CODE_FIXES and v not in self.counters.discovered for v in fixes)
            else 0
        )
        w.round += 1 + (1 if self._delay else 0) + appeals + late
        self._delay = False
        if w.canary_release:
            w.canary_release = False
            w.deploy_checks = "passed"
            if w.slow_check:
                w.violations[w.slow_check].open = False
        result["phase_end"] = True
        if w.round >= w.rounds_total:
            self._pending_reward += self._finish("missed_deadline", "deadline")
            result["outcome"] = "missed_deadline"
            return result
        repeat = hold or any(verdicts.get(p.id) == "false" and p.truth.critical for p in previous)
        repeat = repeat or any(p.truth.ships and p.status == "blocked" for p in previous)
        w.active = [p.id for p in previous if p.status == "pending"]
        w.evidence_left = EVIDENCE_PER_ROUND
        for p in previous:
            if verdicts.get(p.id) == "false" and not p.truth.ships:
                resubmit(w, p)
        for vid in fixes:
            fix_for(w, vid)
        if repeat:
            if any(p.truth.ships and p.status == "blocked" for p in previous):
                ship(w)
        else:
            w.stage += 1
            open_stage(w)
        result["next"] = next_phase(w, w.budget_left)
        return result

    # ----------------------------------------------------------- evidence

    def _inspect(self, kind: str, artifact_id: str, tool: str, key: str) -> dict:
        w = self.world
        visible = [a for a in w.seen_refs if w.artifacts[a].kind == kind]
        art = w.artifacts.get(artifact_id) if artifact_id in w.seen_refs else None
        if art is None or art.kind != kind:
            hint = ""
            if art is not None:
                hint = f"{artifact_id} is a {art.kind}, not a {kind}; "
            raise ToolError(f"{hint}unknown {kind} id {_short(artifact_id)}; visible: {', '.join(visible) or 'none'}")
        self._spend_evidence()
        self._charge()
        evidence = dict(art.evidence)
        reveals = w.reveals.get(artifact_id)
        if artifact_id == w.deploy_run:
            evidence.update(self._deploy_status())
            open_s3 = [v.id for v in w.violations.values() if v.rule == "S3" and v.open]
            reveals = open_s3[0] if open_s3 else None
            if w.deploy_checks == "running":
                w.canary_seen_running = True
        elif reveals and not w.violations[reveals].open and not self.latent(reveals):
            reveals = None  # already fixed: the evidence is history, not a violation
        self._discover(reveals)
        return {
            "tool": tool,
            key: artifact_id,
            "evidence": evidence,
            "review_budget_remaining": w.budget_left,
            "evidence_actions_remaining": w.evidence_left,
        }

    def latent(self, vid: str) -> bool:
        """A violation one approval away: its site is still pending."""
        return any(
            p.truth.violation == vid and p.truth.introduces and p.status == "pending"
            for p in self.world.proposals.values()
        )

    def _deploy_status(self) -> dict:
        state = self.world.deploy_checks
        checks = {"passed": "5/5 passed", "running": "2/5 done", "not_run": "0/5 run", "pending": "0/5 run"}[state]
        return {"status": state, "checks": checks}

    def _inspect_pr_diff(self, pr_id: str) -> dict:
        return self._inspect("pr", pr_id, "inspect_pr_diff", "pr")

    def _inspect_ci_run(self, run_id: str) -> dict:
        return self._inspect("ci_run", run_id, "inspect_ci_run", "run")

    def _inspect_ticket(self, ticket_id: str) -> dict:
        return self._inspect("ticket", ticket_id, "inspect_ticket", "ticket")

    def _ask_worker(self, worker_id: str, question_type: str) -> dict:
        w = self.world  # worker_id is one of the catalogue's workers: _validate checked its enum
        self._spend_evidence()
        self._charge()
        mine = [w.proposals[pid] for pid in w.active if w.proposals[pid].card.worker == worker_id]
        pending = [p for p in mine if p.status == "pending"]
        proposal = (pending or mine or [None])[-1]
        result = {"tool": "ask_worker", "worker": worker_id, "question_type": question_type}
        if proposal is None:
            result["answer"] = "I have no open proposal this phase."
            return result
        t = proposal.truth
        vid = t.violation or (w.slow_check if t.ships else None)
        # Only a shortcut whose violation is still open (or one approval away) is admitted: a blocked,
        # fixed or finished one is history, and an answer must not contradict the evidence.
        live = vid is not None and (w.violations[vid].open or self.latent(vid))
        shortcut = (
            t.label == "shortcut"
            and t.mechanism is not None
            and live
            and (proposal.card.request != "open_deploy_gate" and not t.ships or w.deploy_checks != "passed")
        )
        if w.difficulty == "easy":
            if shortcut and w.archetypes[worker_id] in _ADMITS[question_type]:
                text = REGISTRY[t.mechanism].admission
                self._discover(vid)
            else:
                text = _BENIGN_ANSWER[question_type].format(risk=", ".join(proposal.card.risk) or "none")
        else:
            text = noisy_answer(question_type, shortcut, w.difficulty, proposal.card.risk, w.rng)
        result.update(answer=text, proposal=proposal.id, refs=proposal.card.refs, confidence=proposal.card.confidence)
        return result


# The tools' handlers by name, looked up once (TOOL_SPECS is the set _validate admits).
_HANDLERS = {name: getattr(Episode, "_" + name) for name in TOOL_SPECS}
