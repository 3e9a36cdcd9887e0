"""Run every benchmark, keep the raw results, write docs/benchmarks.md and docs/deployment.md's performance block.

    PYTHONPATH=. .venv/bin/python -m tools.bench.run_all                # ~15 min on 2 cores
    PYTHONPATH=. .venv/bin/python -m tools.bench.run_all --quick        # shorter windows and fewer repeats
    PYTHONPATH=. .venv/bin/python -m tools.bench.run_all --render-only  # rewrite both from the kept results

Each part runs in its own process (`tools.bench.engine`, `tools.bench.tokens`, `tools.bench.server`)
and writes JSON into `--json-dir` (default tools/bench/last_run/, kept in git so that the
report can always be re-rendered); `tools/bench/report.py` renders the report and
`tools/bench/readme.py` the docs/deployment.md block from those files and the goals in `tools/bench/goals.py`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tools.bench import readme, report
from tools.bench.common import REPO_ROOT, commit, machine

LAST_RUN = REPO_ROOT / "tools" / "bench" / "last_run"
# The page that holds the generated performance block (between the markers of tools/bench/readme.py).
BLOCK_PAGE = REPO_ROOT / "docs" / "deployment.md"


def measure(json_dir: Path, quick: bool) -> None:
    """Run each part in its own process, then write meta.json (the machine, the date, the wall time)."""
    t0 = time.perf_counter()
    meta = {
        "quick": quick,
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "load_start": _load(),
        "commit": commit(),
    }
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("ENABLE_WEB_INTERFACE", None)
    for part in report.PARTS:
        print(f"== {part}", flush=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                f"tools.bench.{part}",
                *(["--quick"] if quick else []),
                "--json",
                str(json_dir / f"{part}.json"),
            ],
            cwd=REPO_ROOT,
            env=env,
            check=True,
        )
    meta["wall_s"] = time.perf_counter() - t0
    meta["load_end"] = _load()
    (json_dir / "meta.json").write_text(json.dumps(meta, indent=1))


def load_results(json_dir: Path) -> dict:
    """{"meta", "engine", "tokens", "server"} from the kept JSON files."""
    names = ("meta", *report.PARTS)
    optional = ("timing_channel", "abuse")  # added later than the others: a run kept from before renders without
    absent = [n for n in names if not (json_dir / f"{n}.json").exists() and n not in optional]
    if absent:
        raise SystemExit(
            f"{json_dir}: missing {', '.join(f'{n}.json' for n in absent)}; "
            "run `python -m tools.bench.run_all` (without --render-only) to measure them"
        )
    return {n: json.loads((json_dir / f"{n}.json").read_text()) for n in names if (json_dir / f"{n}.json").exists()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Run all benchmarks; write docs/benchmarks.md and the performance block of docs/deployment.md."
    )
    parser.add_argument("--quick", action="store_true", help="short windows, fewer repeats")
    parser.add_argument(
        "--json-dir", default=str(LAST_RUN), help="where the per-part JSON is kept (default: %(default)s)"
    )
    parser.add_argument("--out", default=str(REPO_ROOT / "docs" / "benchmarks.md"))
    parser.add_argument(
        "--page",
        "--readme",
        dest="page",
        default=str(BLOCK_PAGE),
        help="the page whose performance block is rewritten (default: %(default)s; '' leaves it alone)",
    )
    parser.add_argument("--render-only", action="store_true", help="re-render from --json-dir without measuring")
    args = parser.parse_args(argv)
    json_dir = Path(args.json_dir)
    if not args.render_only:
        json_dir.mkdir(parents=True, exist_ok=True)
        measure(json_dir, args.quick)
    results = load_results(json_dir)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report.render(results))
    if args.page:
        readme.write(Path(args.page), results)
    print(f"wrote {args.out}{' and ' + args.page if args.page else ''} (JSON in {json_dir})")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


if __name__ == "__main__":
    main()
