"""Shared helpers for the benchmark scripts: workloads, statistics, pinning, the machine, output, servers.

Nothing here is timed itself. The workload is always a replay: a reference
policy plays in-process first (`play`), its call sequences are recorded, and
the benchmarks then time only the replay of those calls, so policy time never
counts.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
from pathlib import Path
from typing import Iterator, Mapping, Optional

from releaseops_arena.catalog import ALL_FAMILIES, ARCHETYPE_MIXES, DIFFICULTIES
from releaseops_arena.policies import POLICIES, play
from tools.bench.launch import REPO_ROOT, uvicorn_process

SEED_BASE = 1_000_000  # the heldout_seeds range: never the seeds the rule was tuned on


# ------------------------------------------------------------------ workload


def workload_scenarios(per_cell: int, difficulties: tuple[str, ...] = DIFFICULTIES) -> list[dict]:
    """`per_cell` scenarios for every (family, difficulty), held-out family included; mixes cycle."""
    out = []
    i = 0
    for family in ALL_FAMILIES:
        for difficulty in difficulties:
            for k in range(per_cell):
                out.append(
                    {
                        "family": family,
                        "seed": SEED_BASE + i,
                        "difficulty": difficulty,
                        "archetype_mix": ARCHETYPE_MIXES[k % len(ARCHETYPE_MIXES)],
                    }
                )
                i += 1
    return out


def record(policy: str, scenarios: list[dict], rng_seed: int = 0) -> list[dict]:
    """Play each scenario in-process; keep the calls (and what came back) for replay."""
    episodes = []
    for scenario in scenarios:
        run = play(POLICIES[policy](), scenario, rng_seed)
        episodes.append(
            {
                "scenario": dict(scenario),
                "observation": run["observation"],
                "calls": [(s["tool"], s["arguments"]) for s in run["steps"]],
                "results": [s.get("result") for s in run["steps"]],
                "errors": [s.get("error") for s in run["steps"]],
                "metrics": run["metrics"],
                "return": run["return"],
            }
        )
    return episodes


# ---------------------------------------------------------------- statistics


def percentile(values, q: float) -> float:
    """Nearest-rank-interpolated percentile (q in 0..100) of a non-empty sequence."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def summary(values) -> dict:
    xs = list(values)
    return {
        "n": len(xs),
        "median": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p99": percentile(xs, 99),
        "min": float(min(xs)) if xs else float("nan"),
        "max": float(max(xs)) if xs else float("nan"),
        "mean": statistics.fmean(xs) if xs else float("nan"),
    }


def med(values) -> float:
    return float(statistics.median(values))


# ------------------------------------------------------------------- pinning


def pin(cpus: set[int]) -> Optional[list[int]]:
    """Pin this process to `cpus`, or where the OS refuses some of them, to those of them it runs on now;
    returns the set used, or None. (Widening works too: a process pinned to one core may ask for two.)"""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        allowed = os.sched_getaffinity(0)
        os.sched_setaffinity(0, (cpus & allowed) or {min(allowed)})
    return sorted(os.sched_getaffinity(0))


def allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


# ------------------------------------------------------------------- machine


def machine() -> dict:
    model = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions = {}
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("openenv", "uvicorn", "websockets", "fastapi", "pydantic", "starlette", "psutil", "tokenizers"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    mem_total = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_total = round(int(line.split()[1]) / 1024 / 1024, 1)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu_model": model,
        "cores_online": os.cpu_count(),
        "cores_allowed": len(allowed_cpus()),
        "mem_total_gib": mem_total,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "loadavg": [round(x, 2) for x in load] if load else None,
        "versions": versions,
    }


# -------------------------------------------------------------------- output


def write_json(path: Optional[str], data: dict) -> None:
    text = json.dumps(data, indent=1, default=str)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    else:
        print(text)


# ------------------------------------------------------------------- servers


@contextlib.contextmanager
def bench_server(
    app: str,
    env: Optional[Mapping[str, Optional[str]]] = None,
    cpus: Optional[set[int]] = None,
    module: str = "uvicorn",
    args: tuple[str, ...] = ("--log-level", "warning"),
    log_path: Optional[Path] = None,
) -> Iterator[tuple[str, int]]:
    """Every benchmarked server alike: uvicorn defaults, `--log-level warning` (unless `args` says
    otherwise), the web interface off (ENABLE_WEB_INTERFACE removed), optionally pinned to `cpus`;
    yields (base_url, pid). `module` replaces `uvicorn` (the instrumented wrapper
    `tools.bench._uvicorn_wrap` takes the same arguments)."""
    pythonpath = str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    with uvicorn_process(
        app,
        # One load client plays every session, as a trainer behind one address: no per-address share.
        env={"ENABLE_WEB_INTERFACE": None, "MAX_SESSIONS_PER_CLIENT": "0", "PYTHONPATH": pythonpath, **(env or {})},
        module=module,
        args=args,
        cpus=cpus,
        timeout=120,
        log_path=log_path,
    ) as served:
        yield served


# What the numbers depend on: the served code and the benchmark itself.
MEASURED_PATHS = ("releaseops_arena", "server", "client", "tools/bench", "pyproject.toml")


def commit() -> str | None:
    """The commit measured, and whether the measured code had uncommitted changes (None outside git)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", *MEASURED_PATHS],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return None
    changed = [line for line in changed if not line[3:].startswith("tools/bench/last_run/")]
    return head + (f" with uncommitted changes to {len(changed)} measured files" if changed else "")
