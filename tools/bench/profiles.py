"""cProfile statistics as report rows: short function labels, top-N tables, CPU shares by component.

Our own code is recognised by where its packages are (`importlib.util.find_spec`),
not by the checkout's folder name, so a clone of any name sorts the engine's and
the adapter's CPU into their own categories.
"""

from __future__ import annotations

import importlib.util
import pstats
import re
import sysconfig
from functools import lru_cache
from pathlib import Path

# Our packages and the category each one's CPU counts under (the server imports
# `server` and `client` as top-level packages from the repo root).
OWN_PACKAGES = {
    "releaseops_arena": "engine (releaseops_arena)",
    "server": "adapter (server/, client/)",
    "client": "adapter (server/, client/)",
}
# Everything else by a substring of the file name or the built-in's name.
THIRD_PARTY = (
    (
        "pydantic",
        (
            "pydantic",
            "<method 'model_dump",
            "<method 'validate_python",
            "<method 'to_json",
            "<method '__init__' of 'pydantic",
        ),
    ),
    ("openenv", ("/openenv/",)),
    ("websockets + compression", ("/websockets/", "zlib", "Compress", "Decompress")),
    ("uvicorn + starlette", ("/uvicorn/", "/starlette/", "/fastapi/")),
    (
        "asyncio + executor hop",
        (
            "/asyncio/",
            "/concurrent/",
            "threading.py",
            "queue.py",
            "selectors.py",
            "_asyncio",
            "<method 'acquire'",
            "<method 'release'",
            "_thread",
            "<method 'put'",
            "<method 'get' of '_queue",
        ),
    ),
    ("json", ("/json/", "_json")),
    ("sockets", ("<method 'send'", "<method 'recv", "socket")),
)


@lru_cache(maxsize=None)
def package_dirs() -> dict[str, Path]:
    """Where each of our packages is imported from, by package name (absent ones are left out)."""
    out = {}
    for name in OWN_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            out[name] = Path(next(iter(spec.submodule_search_locations))).resolve()
    return out


@lru_cache(maxsize=None)
def _own_package(filename: str) -> str | None:
    path = Path(filename)
    if not path.is_absolute():
        return None
    for name, folder in package_dirs().items():
        if path.resolve().is_relative_to(folder):
            return name
    return None


def label(filename: str, line: int, func: str) -> str:
    """`package/module.py:LINE(function)`; built-ins as cProfile names them; the stdlib as `stdlib:`."""
    func = re.sub(r" at 0x[0-9a-f]+", "", func)
    if not line:
        return func
    own = _own_package(filename)
    if own:
        short = f"{own}/{Path(filename).resolve().relative_to(package_dirs()[own]).as_posix()}"
    elif "/site-packages/" in filename:
        short = filename.split("/site-packages/")[-1]
    elif filename.startswith(sysconfig.get_paths()["stdlib"]):
        short = "stdlib:" + filename[len(sysconfig.get_paths()["stdlib"]) :].lstrip("/")
    else:
        short = filename
    return f"{short}:{line}({func})"


def category(filename: str, func: str) -> str:
    """The component a profiled function belongs to: one of our packages, a library, or `other`."""
    own = _own_package(filename)
    if own:
        return OWN_PACKAGES[own]
    key = filename + " " + func
    for name, needles in THIRD_PARTY:
        if any(n in key for n in needles):
            return name
    return "other"


def rows(stats: pstats.Stats) -> list[dict]:
    """Every profiled function with its calls and self / cumulative share of the profiled time."""
    total = stats.total_tt
    return [
        {"function": label(filename, line, func), "calls": nc, "tottime_share": tt / total, "cumtime_share": ct / total}
        for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items()
    ]


def top(stats: pstats.Stats, n: int = 15) -> dict:
    """The `n` functions with the most self time and the `n` with the most cumulative time."""
    all_rows = rows(stats)
    return {
        "total_s": stats.total_tt,
        "top_tottime": sorted(all_rows, key=lambda r: -r["tottime_share"])[:n],
        "top_cumtime": sorted(all_rows, key=lambda r: -r["cumtime_share"])[:n],
    }


def by_category(stats: pstats.Stats) -> dict[str, float]:
    """Share of the profiled self time per component, largest first."""
    total = stats.total_tt
    cats: dict[str, float] = {}
    for (filename, _line, func), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():
        cat = category(filename, func)
        cats[cat] = cats.get(cat, 0.0) + tt / total
    return dict(sorted(cats.items(), key=lambda kv: -kv[1]))
