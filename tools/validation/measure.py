"""Measure the image under load, for openenv.yaml's validation.resources.

Runs the built image as `openenv validate` runs its subject (uid 65532, read-only
root, only a /tmp tmpfs writable, all capabilities dropped, 256 pids), but on the
host network so that a load generator can reach it, and without the CPU/memory
limits unless `--limits` gives them (then the run shows the declared budget holds).
63 sessions replay recorded `rule` episodes back to back for `--seconds` while a
64th replays the validator's probe (tools/validation/runtime.json) over and over, timed.

Measured: peak memory of the container's cgroup (what `--memory` limits: RSS plus
page cache plus tmpfs) and peak RSS of the server process (VmHWM), the server's CPU
(cores over the window), bytes written to /tmp and /dev/shm, the probe episode's
wall time, and step latency. Uses `docker` (through .ci/bin/docker on the container stand-in).

    python tools/validation/measure.py --image IMAGE [--seconds 60] [--limits 1.0,1024]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tools.bench and tools.validation from a checkout

from tools.bench.common import record, workload_scenarios  # noqa: E402
from tools.bench.launch import free_port, wait_for_health  # noqa: E402
from tools.bench.replay import drive, encode  # noqa: E402
from tools.validation.oracle import PLAN, check, replay  # noqa: E402
from tools.validation.validate import docker_env  # noqa: E402

SESSIONS = 64  # the server's default MAX_CONCURRENT_ENVS: one of them is the timed probe
TMPFS_MB = 192  # the /tmp size the validator gives a 256 MB disk budget (minus its 64 MB /dev/shm)


def docker(*args: str, timeout: float = 120) -> str:
    proc = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=docker_env()
    )
    if proc.returncode:
        raise RuntimeError(f"docker {args[0]} failed: {proc.stderr[-2000:]}")
    return proc.stdout


def cgroup_peak_bytes(pid: int) -> int | None:
    """Peak memory of the cgroup holding `pid` (cgroup v1 max_usage_in_bytes, or v2 memory.peak)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for candidate in (
            (Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.max_usage_in_bytes")
            if "memory" in controllers.split(",")
            else None,
            (Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.peak") if controllers == "" else None,
        ):
            if candidate is not None and candidate.exists():
                return int(candidate.read_text())
    return None


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def written_kb(name: str) -> dict[str, int]:
    out = docker("exec", name, "du", "-sk", "/tmp", "/dev/shm")
    return {path: int(kb) for kb, path in (line.split("\t") for line in out.strip().splitlines())}


@contextlib.contextmanager
def subject(image: str, limits: tuple[float, int] | None):
    """The image running as the validator runs it (host network); yields (name, base_url, server pid)."""
    name, port = f"releaseops-measure-{uuid.uuid4().hex[:8]}", free_port()
    hardening = [
        "--init",
        "--user",
        "65532:65532",
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--pids-limit",
        "256",
        "--shm-size",
        str(64 * 2**20),
        "--tmpfs",
        f"/tmp:rw,nosuid,nodev,size={TMPFS_MB * 2**20},mode=1777",
        "-e",
        "PYTHONDONTWRITEBYTECODE=1",
        "-e",
        "PYTHONUNBUFFERED=1",
        # One load generator plays all 64 sessions, as one trainer would: the operator lifts the per-address share.
        "-e",
        "MAX_SESSIONS_PER_CLIENT=0",
    ]
    if limits:
        hardening += ["--cpus", str(limits[0]), "--memory", f"{limits[1]}m", "--memory-swap", f"{limits[1]}m"]
    docker("run", "-d", "--name", name, "--network", "host", "-e", f"PORT={port}", *hardening, image)
    try:
        started = time.monotonic()
        base_url = f"http://127.0.0.1:{port}"
        wait_for_health(base_url, timeout=120)
        startup_s = time.monotonic() - started
        init_pid = int(docker("inspect", "-f", "{{.State.Pid}}", name).strip())
        server = max(psutil.Process(init_pid).children(recursive=True), key=lambda p: p.memory_info().rss)
        yield name, base_url, server.pid, startup_s
    finally:
        with contextlib.suppress(Exception):
            print(docker("logs", "--tail", "5", name)[-2000:], file=sys.stderr)
        docker("rm", "-f", name, timeout=60)


def probe_loop(base_url: str, plan: dict, stop: threading.Event, times: list[float], failures: list[str]) -> None:
    """Replay the probe back to back; a refusal at capacity (the last episode's slot is freed
    asynchronously, and the other 63 sessions hold theirs) is retried, not counted."""
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            served = replay(base_url, plan)
            times.append(time.monotonic() - t0)
            failures.extend(check(served, len(plan["actions"])))
        except RuntimeError as exc:
            if "CAPACITY_REACHED" not in str(exc):
                failures.append(str(exc)[:300])
            time.sleep(0.05)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, none ends the window
            failures.append(repr(exc)[:300])


def measure(image: str, seconds: float, limits: tuple[float, int] | None) -> dict:
    replays = encode(record("rule", workload_scenarios(4)))
    plan = json.loads(PLAN.read_text())
    with subject(image, limits) as (name, base_url, pid, startup_s):
        idle = {"rss_mb": psutil.Process(pid).memory_info().rss / 2**20, "written_kb": written_kb(name)}
        stop, times, failures = threading.Event(), [], []
        prober = threading.Thread(target=probe_loop, args=(base_url, plan, stop, times, failures), daemon=True)
        prober.start()
        load = asyncio.run(drive(base_url, pid, SESSIONS - 1, replays, warmup_s=5.0, window_s=seconds, echo=False))
        stop.set()
        prober.join(timeout=60)
        return {
            "image": image,
            "limits": limits,
            "sessions": SESSIONS,
            "window_s": seconds,
            "startup_to_health_s": round(startup_s, 2),
            "idle": idle,
            "cgroup_peak_mb": round((cgroup_peak_bytes(pid) or 0) / 2**20, 1),
            "server_peak_rss_mb": round(vm_hwm_mb(pid), 1),
            "server_cpu_cores": round(load["server_cpu"], 3),
            "written_kb_after": written_kb(name),
            "throughput_steps_per_s": round(load["throughput"], 1),
            "p50_ms": round(load["p50_ms"], 2),
            "p99_ms": round(load["p99_ms"], 2),
            "wrong_replies": load["mismatches"] + load["errors"],
            "probe_episodes": len(times),
            "probe_s_max": round(max(times), 3) if times else None,
            "probe_s_median": round(sorted(times)[len(times) // 2], 3) if times else None,
            "probe_failures": failures[:5],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--limits", help="CPUS,MEMORY_MB: run under these limits (the declared budget)")
    args = parser.parse_args()
    limits = None
    if args.limits:
        cpus, memory = args.limits.split(",")
        limits = (float(cpus), int(memory))
    print(json.dumps(measure(args.image, args.seconds, limits), indent=1))


if __name__ == "__main__":
    main()
