"""Number formats and Markdown tables for the benchmark report and the performance block."""

from __future__ import annotations


def f0(x: float) -> str:
    return f"{x:,.0f}"


def f1(x: float) -> str:
    return f"{x:,.1f}"


def f2(x: float) -> str:
    return f"{x:,.2f}"


def span(lo_hi: list[float], fmt=f1) -> str:
    """A [min, max] range as `min - max`."""
    return f"{fmt(lo_hi[0])} - {fmt(lo_hi[1])}"


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def drop_empty_columns(header: list[str], rows: list[list]) -> tuple[list[str], list[list]]:
    """Leave out every column with no value in any row: a column nothing measured is not printed."""
    keep = [i for i in range(len(header)) if any(str(row[i]) != "" for row in rows)]
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]
