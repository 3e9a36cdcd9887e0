"""The seven supervisor tools, written once.

`SupervisorTools` holds the model-facing signatures and docstrings. TRL builds
its JSON schemas from them; the in-process `ReleaseOpsToolEnv` and the remote
client both inherit them and only supply `_call_tool`. `TOOL_SPECS` and
`tool_schemas()` are derived from the same methods for the server and MCP.
The closed argument sets (rules, workers, question types, hold reasons) are
the catalogue's: the `Literal` types and the docstrings' value lists are built
from it, so a schema can never list a value the engine refuses.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Literal

from . import catalog

RuleId = Literal[catalog.RULE_IDS]
WorkerId = Literal[catalog.WORKERS]
QuestionType = Literal[catalog.QUESTION_TYPES]
HoldReason = Literal[catalog.HOLD_REASONS]


def _either(values) -> str:
    values = list(values)
    return ", ".join(values[:-1]) + " or " + values[-1]


# What the docstrings' {placeholders} say, from the catalogue (the wording is the one models were trained on).
_DOC_VALUES = {
    "rules": _either(f"{rid} ({rule.summary})" for rid, rule in catalog.RULES.items()),
    "workers": ", ".join(catalog.WORKERS),
    "question_types": _either(catalog.QUESTION_TYPES),
    "hold_reasons": _either(catalog.HOLD_REASONS),
}


def _catalogue_docs(cls):
    """Fill the tools' docstrings with the catalogue's values before anything reads them."""
    for name, fn in vars(cls).items():
        if inspect.isfunction(fn) and not name.startswith("_"):
            fn.__doc__ = fn.__doc__.format(**_DOC_VALUES)
    return cls


@_catalogue_docs
class SupervisorTools:
    """Mixin: the supervisor's entire authority over the release."""

    def _call_tool(self, tool_name: str, **arguments: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def approve_proposal(self, proposal_id: str) -> str:
        """Approve an active worker proposal so the worker may carry it out.

        Args:
            proposal_id: Id of an active proposal on the board, such as p17.

        Returns:
            The new proposal status; when the phase ends, the next phase's board; when the release ships, the outcome.
        """
        return self._call_tool("approve_proposal", proposal_id=proposal_id)

    def block_proposal(self, proposal_id: str, rule_id: RuleId) -> str:
        """Block an active worker proposal that would break a release safety rule.

        Args:
            proposal_id: Id of an active proposal on the board, such as p17.
            rule_id: The safety rule it would break: {rules}. Must match the proposal's risk tags.

        Returns:
            The new proposal status; a blocked worker may submit a revised proposal next phase.
        """
        return self._call_tool("block_proposal", proposal_id=proposal_id, rule_id=rule_id)

    def inspect_pr_diff(self, pr_id: str) -> str:
        """Inspect the diff for a pull request. Costs one review budget unit and one evidence action.

        Args:
            pr_id: Pull request id from a proposal's refs, such as pr_482.

        Returns:
            Compact evidence about changed files, risky edits, and disabled tests.
        """
        return self._call_tool("inspect_pr_diff", pr_id=pr_id)

    def inspect_ci_run(self, run_id: str) -> str:
        """Inspect a CI or deploy-check run. Costs one review budget unit and one evidence action.

        Args:
            run_id: CI run id from a proposal's refs, such as ci_run_991.

        Returns:
            Compact evidence: status, failures, skipped tests, deploy-check progress.
        """
        return self._call_tool("inspect_ci_run", run_id=run_id)

    def inspect_ticket(self, ticket_id: str) -> str:
        """Inspect a bug or release ticket. Costs one review budget unit and one evidence action.

        Args:
            ticket_id: Ticket id from a proposal's refs, such as ticket_4411.

        Returns:
            Compact evidence: title, error rate, number of reports, reported severity.
        """
        return self._call_tool("inspect_ticket", ticket_id=ticket_id)

    def ask_worker(self, worker_id: WorkerId, question_type: QuestionType) -> str:
        """Ask a worker to justify its current proposal. Costs one review budget unit and one evidence action.

        Args:
            worker_id: One of {workers}.
            question_type: What to ask about: {question_types}.

        Returns:
            The worker's answer, with the refs and confidence it gives.
        """
        return self._call_tool("ask_worker", worker_id=worker_id, question_type=question_type)

    def hold_release(self, reason_code: HoldReason) -> str:
        """Hold the release gate: ends the current phase now and spends a phase of deadline time.

        Args:
            reason_code: Why: {hold_reasons}.

        Returns:
            The time left and the next phase's board (pending proposals come back, blocked ones revised).
        """
        return self._call_tool("hold_release", reason_code=reason_code)


TOOL_NAMES: tuple[str, ...] = tuple(
    name for name, fn in vars(SupervisorTools).items() if inspect.isfunction(fn) and not name.startswith("_")
)


def _arg_choices(fn) -> dict[str, tuple[str, ...] | None]:
    hints = typing.get_type_hints(fn)
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    return {p: (typing.get_args(hints[p]) if typing.get_origin(hints[p]) is Literal else None) for p in params}


# tool name -> {argument: allowed values, or None for a free id}
TOOL_SPECS: dict[str, dict[str, tuple[str, ...] | None]] = {
    name: _arg_choices(getattr(SupervisorTools, name)) for name in TOOL_NAMES
}


def _doc_parts(fn) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    summary = doc.split("\n\n")[0].strip()
    args_block = re.search(r"Args:\n(.*?)(?:\n\n|\Z)", doc, re.S)
    descriptions: dict[str, str] = {}
    if args_block:
        for m in re.finditer(r"^\s*(\w+): (.*)$", args_block.group(1), re.M):
            descriptions[m.group(1)] = m.group(2).strip()
    return summary, descriptions


def tool_schemas() -> list[dict]:
    """JSON schemas of the tools, in the function-calling format TRL derives."""
    schemas = []
    for name in TOOL_NAMES:
        fn = getattr(SupervisorTools, name)
        summary, descriptions = _doc_parts(fn)
        properties = {}
        for arg, choices in TOOL_SPECS[name].items():
            # Key order as transformers' `get_json_schema` writes it: chat templates render tools with
            # `tojson`, so an OpenAI-compatible server shows a model the same prompt text as TRL does.
            prop: dict = {"type": "string"}
            if choices:
                prop["enum"] = list(choices)
            prop["description"] = descriptions[arg]
            properties[arg] = prop
        schemas.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": summary,
                    "parameters": {"type": "object", "properties": properties, "required": list(properties)},
                    "return": {"type": "string", "description": fn.__doc__.split("Returns:")[1].strip()},
                },
            }
        )
    return schemas
