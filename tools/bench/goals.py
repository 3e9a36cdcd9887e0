"""The performance goals, written once: docs/benchmarks.md, the performance block of docs/deployment.md,
the notes and the token counts all read their thresholds from `GOALS`.

A goal reads its measured value from one run's results, a dict with the parts'
JSON under "engine", "tokens", "server" and "abuse" (see `tools/bench/run_all.py`). Nothing here
measures; a part's JSON holds only measurements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

RESULT_CHARS = 400  # the one limit both tool-result goals share (tools/bench/tokens.py counts results over it)


@dataclass(frozen=True)
class Goal:
    what: str
    op: str  # ">=" or "<="
    limit: float
    unit: str  # "x" (a ratio), "MB", "chars", "us" or "" (a rate)
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
        return (
            self.wording.format(limit=self.limit) if self.wording else f"{self.op} {self.limit:,g}{_suffix(self.unit)}"
        )

    def measured(self, results: dict) -> str:
        if self.detail:
            return self.detail(results)
        return f"{self.value(results):,.{self.digits}f}{_suffix(self.unit)}"


def _suffix(unit: str) -> str:
    return unit if unit in ("", "x") else f" {unit}"


THROUGHPUT_GOAL = 0.85  # ours / the text echo at 64 sessions; also sets the CPU-per-step budget below


def at_64(results: dict) -> dict:
    """The load table's row at 64 sessions."""
    return {row["sessions"]: row for row in results["server"]["load"]["table"]}[64]


def variant_row(results: dict, key: str) -> Optional[dict]:
    """The what-if row at 64 sessions named `key` (`tools/bench/load.py:VARIANTS`: "served", "deflate" for
    permessage-deflate turned on, "loop" for the floors stepping on the event loop, "guard" for the floors behind
    the session guard); None when it did not run."""
    rows = results["server"].get("variants", {}).get("table", [])
    return next((row for row in rows if row.get("key") == key), None)


def _required(row: Optional[dict], what: str) -> dict:
    if row is None:
        raise KeyError(f"no what-if {what}")
    return row


def plain_64(results: dict) -> dict:
    """The what-ifs' as-served row at 64 sessions: no permessage-deflate (the served stack declines the
    client's offer), measured again beside the what-ifs that change one thing each."""
    return _required(variant_row(results, "served"), "as served")


def loop_64(results: dict) -> dict:
    """The what-if at 64 sessions where both floors step on the event loop, as ours does."""
    return _required(variant_row(results, "loop"), "with the floors on the event loop")


def _ratio_goal(what: str, op: str, limit: float, row_of: Callable[[dict], dict], key: str) -> Goal:
    """A ratio of ours to the text echo (judged), shown with ours to the bare echo (for reference)."""
    return Goal(
        what,
        op,
        limit,
        "x",
        lambda r: row_of(r)[key],
        digits=2,
        detail=lambda r: f"{row_of(r)[key]:.2f}x (bare echo: {row_of(r)[key + '_bare']:.2f}x)",
    )


def cpu_budget_us(results: dict, goal: float = THROUGHPUT_GOAL) -> float:
    """What a throughput goal allows ours to spend per step beyond the text echo while the server
    saturates its core: echo / goal - echo."""
    echo = at_64(results)["text_echo_server_cpu_us_per_step"]
    return echo / goal - echo


def _cpu_detail(results: dict) -> str:
    row = at_64(results)
    return (
        f"{row['cpu_us_minus_text_echo']:,.0f} us (ours {row['ours_server_cpu_us_per_step']:,.0f}, text echo "
        f"{row['text_echo_server_cpu_us_per_step']:,.0f}; budget {cpu_budget_us(results):,.0f})"
    )


def _bytes_detail(key: str) -> Callable[[dict], str]:
    return lambda r: (
        f"{at_64(r)[f'ours_{key}'] / at_64(r)[f'text_echo_{key}']:.2f}x "
        f"({at_64(r)[f'ours_{key}']:,.0f} / {at_64(r)[f'text_echo_{key}']:,.0f} bytes)"
    )


def _workers(results: dict) -> dict:
    return {row["workers"]: row for row in results["server"]["workers"]["table"]}


def _workers_detail(results: dict) -> str:
    w = _workers(results)
    return (
        f"{results['server']['workers']['speedup']:.2f}x, the median of per-round ratios (median rates "
        f"{w[1]['throughput']:,.0f} -> {w[2]['throughput']:,.0f} steps/s; CPU server / client "
        f"{w[1]['server_cpu']:.2f} / {w[1]['client_cpu']:.2f} -> "
        f"{w[2]['server_cpu']:.2f} / {w[2]['client_cpu']:.2f} cores)"
    )


def _tokens_max(results: dict, key: str) -> float:
    return max(p[key]["max"] for d in results["tokens"]["by_difficulty"].values() for p in d["policies"].values())


def _abuse(results: dict, piece: str) -> dict:
    return results["abuse"][piece]


def _frames_detail(results: dict) -> str:
    m = _abuse(results, "memory")
    return (
        f"{m['rss_peak_mb']:,.0f} MB peak (before {m['rss_before_mb']:,.0f}, after {m['rss_after_mb']:,.0f}; "
        f"manifest {m['declared_mb']})"
    )


def _polite_bound(results: dict, limit: float) -> float:
    f = _abuse(results, "fairness")
    return max(limit * f["alone"]["p99_ms"], f["bound_floor_ms"])


def _polite_detail(results: dict) -> str:
    f = _abuse(results, "fairness")
    bound = _polite_bound(results, f["bound_ratio"])
    return (
        f"{f['flooded']['p99_ms']:.2f} ms (alone {f['alone']['p99_ms']:.2f} ms, so "
        f"{f['flooded']['p99_ms'] / f['alone']['p99_ms']:.2f}x; bound {bound:.2f} ms)"
    )


def _soak(results: dict) -> dict:
    return results["server"]["soak"]


def _soak_detail(results: dict) -> str:
    s = _soak(results)
    return (
        f"{s['second_half_growth_mb']:+.1f} MB ({s['rss_start_mb']:.0f} -> {s['rss_end_mb']:.0f} MB, "
        f"max {s['rss_max_mb']:.0f})"
    )


GOALS: dict[str, Goal] = {
    "engine_calls_per_s": Goal(
        "engine tool calls/s, one core", ">=", 20_000, "", lambda r: r["engine"]["median"]["calls_per_s"]
    ),
    "engine_board_floor": Goal(
        "engine step / serialization floor `json.dumps(episode.board())`",
        "<=",
        3.0,
        "x",
        lambda r: r["engine"]["median"]["ratio_board"],
        digits=2,
    ),
    "engine_result_floor": Goal(
        "engine step / `json.dumps(result dict)` (the other floor)",
        "<=",
        3.0,
        "x",
        lambda r: r["engine"]["median"]["ratio_result"],
        digits=2,
    ),
    # The floor is the text echo (tools/bench/text_echo_app.py): our texts, no engine. The bare
    # echo's ratio is shown beside each for reference, never judged.
    "server_throughput_64": _ratio_goal(
        "server throughput at 64 sessions, ours / text echo", ">=", THROUGHPUT_GOAL, at_64, "throughput_ratio"
    ),
    "server_p99_64": _ratio_goal(
        "server p99 step latency at 64 sessions, ours / text echo", "<=", 1.25, at_64, "p99_ratio"
    ),
    # The goal above counts steps only; a trainer waits on its resets too (an independent harness counted
    # them). Judged the same way, so that a tail the resets make is seen (tools/bench/notes.py:tail).
    "server_p99_64_resets": _ratio_goal(
        "the same p99 with reset round trips counted", "<=", 1.25, at_64, "p99_resets_ratio"
    ),
    # The same two goals measured again, in the what-ifs' own as-served run (instrumented wrapper, same
    # stack): a second, independent reading of the headline ratios on a noisy machine.
    "server_throughput_64_plain": _ratio_goal(
        "the same throughput, measured again in the what-ifs (as served, no permessage-deflate)",
        ">=",
        THROUGHPUT_GOAL,
        plain_64,
        "throughput_ratio",
    ),
    "server_p99_64_plain": _ratio_goal(
        "the same p99, measured again in the what-ifs (as served, no permessage-deflate)",
        "<=",
        1.25,
        plain_64,
        "p99_ratio",
    ),
    # Ours steps on the event loop, the floors in OpenEnv's session executor (its default). The
    # dispatch is ours to design, but an adversary would ask what is left once the floors skip the
    # executor too: these rows judge ours against floors that do.
    "server_throughput_64_loop": _ratio_goal(
        "the same throughput, the floors also stepping on the event loop",
        ">=",
        THROUGHPUT_GOAL,
        loop_64,
        "throughput_ratio",
    ),
    "server_p99_64_loop": _ratio_goal(
        "the same p99, the floors also stepping on the event loop", "<=", 1.25, loop_64, "p99_ratio"
    ),
    "server_cpu_minus_echo": Goal(
        # `limit` is the throughput ratio whose CPU budget this is
        "server CPU per step at 64 sessions, ours - text echo",
        "<=",
        THROUGHPUT_GOAL,
        "us",
        lambda r: at_64(r)["cpu_us_minus_text_echo"],
        bound=cpu_budget_us,
        wording="<= text echo x (1/{limit:g} - 1), the throughput goal's budget",
        detail=_cpu_detail,
    ),
    # Issue 19 sets no number for reply size; these hold ours to the p99 goal's 1.25x of the floor.
    "reply_bytes_median": Goal(
        "reply bytes per step at 64 sessions, median, ours / text echo",
        "<=",
        1.25,
        "x",
        lambda r: at_64(r)["ours_reply_bytes_p50"] / at_64(r)["text_echo_reply_bytes_p50"],
        digits=2,
        detail=_bytes_detail("reply_bytes_p50"),
    ),
    "reply_bytes_p99": Goal(
        "reply bytes per step at 64 sessions, p99, ours / text echo",
        "<=",
        1.25,
        "x",
        lambda r: at_64(r)["ours_reply_bytes_p99"] / at_64(r)["text_echo_reply_bytes_p99"],
        digits=2,
        detail=_bytes_detail("reply_bytes_p99"),
    ),
    "workers_2_over_1": Goal(
        "throughput at 64 sessions, 2 workers / 1 (the client on the same 2 cores)",
        ">=",
        1.3,
        "x",
        lambda r: r["server"]["workers"]["speedup"],
        digits=2,
        detail=_workers_detail,
    ),
    "abuse_frames_rss": Goal(
        "peak server RSS, 64 clients sending 16 MiB and compressed frames at once",
        "<=",
        512,
        "MB",
        lambda r: _abuse(r, "memory")["rss_peak_mb"],
        bound=lambda r, limit: _abuse(r, "memory")["declared_mb"],
        wording="under openenv.yaml's memory_mb ({limit:g} MB)",
        detail=_frames_detail,
    ),
    "abuse_polite_p99": Goal(
        "a polite client's p99 round trip beside a flooding client",
        "<=",
        2.0,
        "ms",
        lambda r: _abuse(r, "fairness")["flooded"]["p99_ms"],
        bound=_polite_bound,
        wording="<= max({limit:g}x its p99 alone, 10 ms)",
        detail=_polite_detail,
    ),
    "rss_per_session_64": Goal(
        "server RSS per live session (64 sessions)",
        "<=",
        1.0,
        "MB",
        lambda r: r["server"]["memory"]["ours"]["per_session_64_mb"],
        digits=2,
    ),
    "soak_flat": Goal(
        "server RSS flat over the soak",
        "<=",
        2.0,
        "MB",
        lambda r: _soak(r)["second_half_growth_mb"],
        bound=lambda r, limit: max(limit, 0.01 * _soak(r)["rss_end_mb"]),
        wording="second-half growth <= max(2 MB, 1%)",
        detail=_soak_detail,
    ),
    # v3 boards carry six sites on medium (two copies of each triage mechanism), two more proposals
    # than v2's four-site boards that the old 1,200 was set for; tests/engine/test_leaks.py holds the same bound.
    "initial_medium": Goal(
        "median initial observation, medium",
        "<=",
        1_700,
        "chars",
        lambda r: r["tokens"]["by_difficulty"]["medium"]["initial_chars"]["median"],
    ),
    "result_without_next": Goal(
        "largest tool result without `next`",
        "<=",
        RESULT_CHARS,
        "chars",
        lambda r: _tokens_max(r, "result_chars_without_next"),
    ),
    "result_whole": Goal(
        "largest tool result, whole string (with `next`)",
        "<=",
        RESULT_CHARS,
        "chars",
        lambda r: _tokens_max(r, "result_chars_whole"),
    ),
    "oracle_transcript": Goal(
        "median oracle transcript, worst difficulty",
        "<=",
        6_000,
        "chars",
        lambda r: max(
            d["policies"]["oracle"]["transcript_chars"]["median"] for d in r["tokens"]["by_difficulty"].values()
        ),
    ),
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
