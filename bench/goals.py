"""The performance goals, written once: docs/benchmarks.md, the README's performance table,
the notes and the token counts all read their thresholds from `GOALS`.

A goal reads its measured value from one run's results, a dict with the parts'
JSON under "engine", "tokens" and "server" (see `bench/run_all.py`). Nothing here
measures; a part's JSON holds only measurements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

RESULT_CHARS = 400  # the one limit both tool-result goals share (bench/tokens.py counts results over it)


@dataclass(frozen=True)
class Goal:
    what: str
    op: str  # ">=" or "<="
    limit: float
    unit: str  # "x" (a ratio), "MB", "chars" or "" (a rate)
    value: Callable[[dict], float]
    digits: int = 0
    # Where the limit depends on the run (the soak's 1 % of RSS), the limit actually applied,
    # and the goal's wording; otherwise both follow from `op`, `limit` and `unit`.
    bound: Optional[Callable[[dict, float], float]] = None
    wording: Optional[str] = None
    # What the "measured" cell says when the value alone is not enough.
    detail: Optional[Callable[[dict], str]] = None

    def threshold(self, results: dict) -> float:
        return self.bound(results, self.limit) if self.bound else self.limit

    def met(self, results: dict) -> bool:
        value, limit = self.value(results), self.threshold(results)
        return value >= limit if self.op == ">=" else value <= limit

    def goal(self) -> str:
        return self.wording or f"{self.op} {self.limit:,g}{_suffix(self.unit)}"

    def measured(self, results: dict) -> str:
        if self.detail:
            return self.detail(results)
        return f"{self.value(results):,.{self.digits}f}{_suffix(self.unit)}"


def _suffix(unit: str) -> str:
    return unit if unit in ("", "x") else f" {unit}"


def at_64(results: dict) -> dict:
    """The load table's row at 64 sessions."""
    return {row["sessions"]: row for row in results["server"]["load"]["table"]}[64]


def _tokens_max(results: dict, key: str) -> float:
    return max(p[key]["max"] for d in results["tokens"]["by_difficulty"].values() for p in d["policies"].values())


def _soak(results: dict) -> dict:
    return results["server"]["soak"]


def _soak_detail(results: dict) -> str:
    s = _soak(results)
    return (f"{s['second_half_growth_mb']:+.1f} MB ({s['rss_start_mb']:.0f} -> {s['rss_end_mb']:.0f} MB, "
            f"max {s['rss_max_mb']:.0f})")


GOALS: dict[str, Goal] = {
    "engine_calls_per_s": Goal(
        "engine tool calls/s, one core", ">=", 20_000, "",
        lambda r: r["engine"]["median"]["calls_per_s"]),
    "engine_board_floor": Goal(
        "engine step / serialization floor `json.dumps(episode.board())`", "<=", 3.0, "x",
        lambda r: r["engine"]["median"]["ratio_board"], digits=2),
    "engine_result_floor": Goal(
        "engine step / `json.dumps(result dict)` (the other floor)", "<=", 3.0, "x",
        lambda r: r["engine"]["median"]["ratio_result"], digits=2),
    "server_throughput_64": Goal(
        "server throughput at 64 sessions, ours / echo", ">=", 0.85, "x",
        lambda r: at_64(r)["throughput_ratio"], digits=2),
    "server_p99_64": Goal(
        "server p99 step latency at 64 sessions, ours / echo", "<=", 1.25, "x",
        lambda r: at_64(r)["p99_ratio"], digits=2),
    "rss_per_session_64": Goal(
        "server RSS per live session (64 sessions)", "<=", 1.0, "MB",
        lambda r: r["server"]["memory"]["ours"]["per_session_64_mb"], digits=2),
    "soak_flat": Goal(
        "server RSS flat over the soak", "<=", 2.0, "MB",
        lambda r: _soak(r)["second_half_growth_mb"],
        bound=lambda r, limit: max(limit, 0.01 * _soak(r)["rss_end_mb"]),
        wording="second-half growth <= max(2 MB, 1%)", detail=_soak_detail),
    "initial_medium": Goal(
        "median initial observation, medium", "<=", 1_200, "chars",
        lambda r: r["tokens"]["by_difficulty"]["medium"]["initial_chars"]["median"]),
    "result_without_next": Goal(
        "largest tool result without `next`", "<=", RESULT_CHARS, "chars",
        lambda r: _tokens_max(r, "result_chars_without_next")),
    "result_whole": Goal(
        "largest tool result, whole string (with `next`)", "<=", RESULT_CHARS, "chars",
        lambda r: _tokens_max(r, "result_chars_whole")),
    "oracle_transcript": Goal(
        "median oracle transcript, worst difficulty", "<=", 6_000, "chars",
        lambda r: max(d["policies"]["oracle"]["transcript_chars"]["median"]
                      for d in r["tokens"]["by_difficulty"].values())),
}


def rows_and_missing(results: dict) -> tuple[list[list[str]], list[str]]:
    """[what, goal, measured, met] for every goal this run measured, in the table's order, and the
    names of the goals it did not (a part or a piece of one left out with `--only`)."""
    rows, missing = [], []
    for g in GOALS.values():
        try:
            rows.append([g.what, g.goal(), g.measured(results), "**met**" if g.met(results) else "**not met**"])
        except KeyError:
            missing.append(g.what)
    return rows, missing
