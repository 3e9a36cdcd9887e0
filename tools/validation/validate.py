"""Run `openenv validate` in package mode on a clean copy of this checkout, and hold it to our bar.

The validator refuses a tree holding symbolic links (every clone's
releaseops_arena/openenv.yaml, a strict editable install's build/ link tree) and
fails a run whose source changes while it runs, so it
is run on a copy of the files git knows (tracked, plus untracked ones not
ignored): the tree a fresh clone would have. On the container stand-in
(../shared/tools/container-standin or $CONTAINER_STANDIN) its `docker` calls go
through .ci/bin/docker; elsewhere the `docker` on PATH is used as it is.

The bar: verdict PASS or WARN, every check this OpenEnv build implements PASSes,
and the only SKIPs are the ones it reports as "grader not implemented in this
build" (0.10 turns any SKIP into WARN, so WARN is the best verdict it gives).

The runtime and semantic checks build the image and run it, so they need a Docker
engine. When none answers, the script runs the checks that need no image (the
static level: the manifest), says which it skipped and why, and passes if those
pass; with REQUIRE_CONTAINER=1 (CI sets it) or --require-docker, a missing
engine fails the run instead, so CI never skips silently.

    .venv/bin/python tools/validation/validate.py [--level semantic] [--keep DIR] [--require-docker]
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
DOCKER_INFO_TIMEOUT_S = 60


class Unavailable(RuntimeError):
    """Something the validation needs is missing; the message says how to get it (one line)."""


def openenv_cli() -> str:
    """The `openenv` CLI beside this interpreter (the project's venv), else on PATH."""
    beside = Path(sys.executable).with_name("openenv")
    if beside.exists():
        return str(beside)
    found = shutil.which("openenv")
    if found:
        return found
    raise Unavailable(
        f"the `openenv` CLI is not installed for {sys.executable} (nor on PATH); run this script with the "
        "project's venv: `make test-fast` (or `make test`) builds .venv, then "
        "`.venv/bin/python tools/validation/validate.py`"
    )


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
    cli = openenv_cli()  # first: without it, nothing else is worth doing
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="releaseops-validate-"))
    package = work / "package"
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    export(package)
    report_path = work / "report.json"
    argv = [
        cli,
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


def docker_problem() -> str | None:
    """Why no Docker engine can build and run the image (one line), or None when one answers.

    It only asks: on the container stand-in, an engine that is down is not started (STANDIN_AUTO_UP=0)."""
    env = {**docker_env(), "STANDIN_AUTO_UP": "0"}
    if shutil.which("docker", path=env.get("PATH")) is None:
        return "there is no `docker` CLI on PATH"
    try:
        proc = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=DOCKER_INFO_TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"no Docker engine answered `docker info` within {DOCKER_INFO_TIMEOUT_S} s"
    if proc.returncode == 0 and proc.stdout.strip():
        return None
    lines = [line.strip() for line in (proc.stderr + "\n" + proc.stdout).splitlines() if line.strip()]
    said = ([line for line in lines if "cannot connect" in line.lower()] or lines or [""])[0][:160]
    return "no Docker engine answered" + (f" (`docker info`: {said})" if said else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level", default="semantic", choices=("static", "runtime", "semantic"))
    parser.add_argument("--keep", type=Path, help="work in this folder (the copy, report.json and its artifacts)")
    parser.add_argument(
        "--require-docker",
        action="store_true",
        default=os.environ.get("REQUIRE_CONTAINER") == "1",
        help="fail when no Docker engine answers, instead of skipping the image checks (default with "
        "REQUIRE_CONTAINER=1, as CI sets)",
    )
    args = parser.parse_args(argv)
    try:
        openenv_cli()
    except Unavailable as exc:
        print(f"validate.py: {exc}", file=sys.stderr)
        return 2
    level, skipped = args.level, None
    if level != "static":
        problem = docker_problem()
        if problem and args.require_docker:
            print(
                f"verdict: FAIL ({problem}; the image checks need a Docker engine, and REQUIRE_CONTAINER=1 or "
                "--require-docker requires them)",
                file=sys.stderr,
            )
            return 1
        if problem:
            level, skipped = "static", problem
    report, rendered, work = run(level, args.keep)
    print(rendered.rstrip())
    found = problems(report, runtime=level != "static")
    print(f"report: {work / 'report.json'}")
    for problem in found:
        print(f"below the bar: {problem}", file=sys.stderr)
    if found:
        print(f"verdict: FAIL ({len(found)} below the bar, listed above)")
        return 1
    if skipped:
        levels = "runtime and semantic" if args.level == "semantic" else "runtime"
        print(
            f"verdict: PASS (skipped: the {levels} checks, which build and run the image, because {skipped}; "
            "run with a Docker engine for the image checks)"
        )
    else:
        print(f"verdict: PASS (every {level}-level check this OpenEnv build grades passed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
