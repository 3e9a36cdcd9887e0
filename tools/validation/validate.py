"""Run `openenv validate` in package mode on a clean copy of this checkout, and hold it to our bar.

The validator refuses a tree holding symbolic links (a strict editable install's
build/ link tree, say) and fails a run whose source changes while it runs, so it
is run on a copy of the files git knows (tracked, plus untracked ones not
ignored): the tree a fresh clone would have. On the container stand-in
(../shared/tools/container-standin or $CONTAINER_STANDIN) its `docker` calls go
through .ci/bin/docker; elsewhere the `docker` on PATH is used as it is.

The bar: verdict PASS or WARN, every check this OpenEnv build implements PASSes,
and the only SKIPs are the ones it reports as "grader not implemented in this
build" (0.10 turns any SKIP into WARN, so WARN is the best verdict it gives).

    python tools/validation/validate.py [--level semantic] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
NOT_IMPLEMENTED = "grader not implemented in this build"
SHIM_DIR = REPO_ROOT / ".ci" / "bin"


def standin() -> Path | None:
    """The container stand-in, if this machine has one (then the validator's docker goes through the shim)."""
    path = Path(os.environ.get("CONTAINER_STANDIN") or REPO_ROOT.parent / "shared" / "tools" / "container-standin")
    return path if path.is_file() and os.access(path, os.X_OK) else None


def docker_env() -> dict[str, str]:
    """The environment for a `docker` CLI: on the stand-in, .ci/bin/docker comes first on PATH."""
    env = {**os.environ, "NO_COLOR": "1"}
    if standin():
        env["PATH"] = f"{SHIM_DIR}{os.pathsep}{env.get('PATH', '')}"
        env.setdefault("CONTAINER_STANDIN", str(standin()))
    return env


def export(destination: Path) -> None:
    """Copy the files git knows (tracked and untracked-not-ignored, as they are on disk) to `destination`."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO_ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file() and not source.is_symlink():  # deleted-but-tracked files are skipped
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def problems(report: dict, runtime: bool = True) -> list[str]:
    """Where a package-mode report misses the bar (empty: it meets it); `runtime`: the image must have run."""
    out = []
    if report.get("verdict") not in ("pass", "warn"):
        out.append(f"verdict {report.get('verdict')}")
    for result in report.get("results", []):
        status, evidence = result["status"], result.get("evidence") or []
        if status == "skip" and evidence != [NOT_IMPLEMENTED]:
            out.append(f"{result['check_id']}: skip ({'; '.join(evidence)})")
        elif status not in ("pass", "skip"):
            out.append(f"{result['check_id']}: {status} ({'; '.join(evidence)})")
    started = any(r["check_id"] == "runtime.startup" and r["status"] == "pass" for r in report.get("results", []))
    if runtime and not started:
        out.append("runtime.startup did not pass: the image was not built and run")
    return out


def run(level: str = "semantic", keep: Path | None = None, timeout_s: float = 1500) -> tuple[dict, str, Path]:
    """Validate a clean copy; return (JSON report, rendered report, where the report and its artifacts are)."""
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="releaseops-validate-"))
    package = work / "package"
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    export(package)
    cli = Path(sys.executable).with_name("openenv")
    report_path = work / "report.json"
    argv = [
        str(cli if cli.exists() else "openenv"),
        "validate",
        str(package),
        "--level",
        level,
        "--output",
        str(report_path),
    ]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, env=docker_env(), stdin=subprocess.DEVNULL
    )
    if not report_path.exists():
        raise RuntimeError(
            f"openenv validate wrote no report (rc={proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    report = json.loads(report_path.read_text())
    built = [r["measured"]["image_ref"] for r in report["results"] if r.get("measured", {}).get("image_ref")]
    for image in built:  # the validator leaves its untagged image behind; the build cache keeps the layers
        subprocess.run(
            ["docker", "image", "rm", image],
            capture_output=True,
            env=docker_env(),
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    return report, proc.stdout + proc.stderr, work


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level", default="semantic", choices=("static", "runtime", "semantic"))
    parser.add_argument("--keep", type=Path, help="work in this folder (the copy, report.json and its artifacts)")
    args = parser.parse_args(argv)
    report, rendered, work = run(args.level, args.keep)
    print(rendered.rstrip())
    found = problems(report, runtime=args.level != "static")
    print(f"report: {work / 'report.json'}")
    for problem in found:
        print(f"below the bar: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
