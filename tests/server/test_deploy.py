"""Scale-out: worker processes on one port, replicas on several, and the Kubernetes manifest."""

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from websockets.exceptions import ConnectionClosed

from client import CapacityError, check_capacity, close_all, make_remote_env_factory, urls_from_dns
from releaseops_arena.splits import task_scenario
from tests.live_server import REPO_ROOT, http_get
from tests.wire import local_transcript, open_socket, send, wait_for_free_slots
from tools.bench.launch import child_environment, free_port, stop, uvicorn_process, wait_for_health

MANIFESTS = REPO_ROOT / "deploy" / "kubernetes"
K8S_VERSION = "1.30.0"  # the oldest Kubernetes release still maintained when the manifest was written


def documents() -> dict[str, dict]:
    docs = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            for doc in yaml.safe_load_all(path.read_text()):
                docs[doc["kind"]] = doc
    return docs


def test_the_manifests_are_valid_kubernetes_objects():
    docs = documents()
    assert set(docs) == {"ConfigMap", "Deployment", "Service"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises on any unknown or bad field
    listed = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def test_the_deployment_matches_the_validation_manifest_and_the_server_settings():
    docs = documents()
    pod = docs["Deployment"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    declared = yaml.safe_load((REPO_ROOT / "openenv.yaml").read_text())["validation"]["resources"]
    for bound in ("requests", "limits"):
        res = container["resources"][bound]
        assert float(res["cpu"]) == declared["cpu"]
        assert res["memory"] == f"{declared['memory_mb']}Mi"
        assert res["ephemeral-storage"] == f"{declared['disk_mb']}Mi"
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["ports"] == [{"name": "http", "containerPort": 8000}]
    # Headless, and it selects exactly the pods of the Deployment.
    service = docs["Service"]["spec"]
    assert service["clusterIP"] == "None"
    assert service["selector"].items() <= pod["metadata"]["labels"].items()
    # Every ConfigMap key is a setting the server documents and reads.
    settings = "".join((REPO_ROOT / "server" / name).read_text() for name in ("app.py", "limits.py"))
    for key in docs["ConfigMap"]["data"]:
        assert f'setting("{key}"' in settings or f'os.environ.get("{key}"' in settings, key


def test_the_readme_capacity_arithmetic_uses_the_shipped_settings():
    """tools/bench/readme.py sizes the 512-generation fleet with the ConfigMap's sessions and the pod's memory."""
    from tools.bench import readme

    docs = documents()
    limits = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert readme.SESSIONS_PER_WORKER == int(docs["ConfigMap"]["data"]["MAX_CONCURRENT_ENVS"])
    assert f"{readme.POD_MEMORY_MB}Mi" == limits["memory"]
    assert docs["ConfigMap"]["data"]["WEB_CONCURRENCY"] == "1"  # the arithmetic counts one worker per pod
    # The arithmetic fills every slot of a pod from one trainer: the per-address share is lifted.
    assert docs["ConfigMap"]["data"]["MAX_SESSIONS_PER_CLIENT"] == "0"


def sessions_held(base: str, target: int, extra: int = 16, max_attempts: int = 400) -> int:
    """Open connections (each resets an episode) until `target` hold or `max_attempts` were made, then
    `extra` more; close them all; return how many held. The kernel, not the server, picks the worker
    of each connection, and a full worker refuses at once, so it keeps winning the accept race: a
    fixed number of attempts may never reach the other worker."""

    async def main():
        sockets, held, attempts, after = [], 0, 0, 0
        try:
            while attempts < max_attempts and (held < target or after < extra):
                attempts += 1
                after += held >= target
                ws = await open_socket(base).__aenter__()
                sockets.append(ws)
                try:
                    reply = await send(ws, {"type": "reset", "data": {"seed": 1}})
                except ConnectionClosed:  # refused: the worker that accepted it is full
                    continue
                held += reply["type"] == "observation"
        finally:
            for ws in sockets:
                await ws.close()
        return held

    return asyncio.run(main())


def wait_for_workers(log: Path, n: int, timeout: float = 120.0) -> None:
    """/health answers as soon as one worker is up; wait until all `n` have started."""
    deadline = time.monotonic() + timeout
    while log.read_text(errors="replace").count("Application startup complete") < n:
        assert time.monotonic() < deadline, f"{n} workers did not start within {timeout} s"
        time.sleep(0.2)


def test_two_workers_each_hold_their_own_sessions_and_report_the_count(tmp_path, monkeypatch):
    # The image's own command: WEB_CONCURRENCY alone picks uvicorn's worker count (no --workers),
    # with the web board asked for, as the Space image does.
    args = ["--timeout-worker-healthcheck", "60"]
    log = tmp_path / "server.log"
    # One client fills both workers: the operator's setting for a trainer behind one address.
    env = {
        "MAX_CONCURRENT_ENVS": "8",
        "MAX_SESSIONS_PER_CLIENT": "0",
        "WEB_CONCURRENCY": "2",
        "ENABLE_WEB_INTERFACE": "true",
    }
    with uvicorn_process(env=env, args=args, timeout=120, log_path=log) as (base, _pid):
        wait_for_workers(log, 2)
        meta = json.loads(http_get(base + "/metadata")[1])
        assert meta["workers"] == 2 and meta["max_concurrent_envs"] == 8
        # The board holds each visitor's episode in one worker, so with two it says why it is off.
        status, body = http_get(base + "/web")
        assert status == 503 and b"one worker" in body and b"WEB_CONCURRENCY=2" in body
        held = sessions_held(base, 16)
        # Both workers full, no more: each process keeps its own 8. (Which worker accepts a
        # connection is the kernel's choice, so one may fill before the other.)
        assert held == 16, held
        asyncio.run(wait_for_free_slots(base, 1))
        assert check_capacity(base, 16)["capacity"] == 16
        with pytest.raises(CapacityError, match=r"16 \(1 replica x 2 workers x 8\)"):
            check_capacity(base, 17)
        # That probe's 16 sessions are freed asynchronously in each worker: wait until 8 open at
        # once (both workers free again, unless all 8 land on one: 1 in 256) before filling them.
        asyncio.run(wait_for_free_slots(base, 8))
        # The trainer's sessions fill both workers: a refusal by a full worker is retried. The probe's
        # own sessions are freed asynchronously too, which on a loaded machine can outlast the client's
        # default ~7 s of capacity retries (it failed so in CI), so this test allows about 30 s.
        import client.session

        monkeypatch.setattr(client.session, "CAPACITY_RETRIES", 160)
        factory = make_remote_env_factory(base)
        envs = [factory() for _ in range(16)]
        try:
            boards = [env.reset(split="train", index=i) for i, env in enumerate(envs)]
            assert all(board.startswith('{"phase"') for board in boards)
        finally:
            closed = close_all()
        assert closed == 16


def test_releaseops_serve_runs_the_workers_it_is_asked_for(tmp_path):
    port, log = free_port(), tmp_path / "serve.log"
    with open(log, "w+b") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from server.app import main; main()", "--workers", "2", "--port", str(port)],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_environment({"MAX_CONCURRENT_ENVS": "4", "WEB_CONCURRENCY": None}),
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for_health(base, timeout=120, alive=lambda: proc.poll() is None)
            wait_for_workers(log, 2)
            meta = json.loads(http_get(base + "/metadata")[1])
            assert meta["workers"] == 2 and meta["max_concurrent_envs"] == 4
            # One address may hold half of each worker's 4 slots: 2 workers x 2 (the capacity check counts it).
            assert check_capacity(base, 4)["capacity"] == 4
            with pytest.raises(CapacityError, match="MAX_SESSIONS_PER_CLIENT=0"):
                check_capacity(base, 8)
        finally:
            stop(proc)


@pytest.mark.parametrize(
    "name, value", [("MAX_CONCURRENT_ENVS", "abc"), ("WEB_CONCURRENCY", "0"), ("SESSION_IDLE_TIMEOUT_S", "soon")]
)
def test_a_bad_setting_stops_the_server_with_one_line_naming_what_is_valid(name, value):
    done = subprocess.run(
        [sys.executable, "-c", "import server.app"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=child_environment({name: value}),
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith(f"{name} must be a "), done.stderr[-500:]
    assert repr(value) in done.stderr and "Traceback" not in done.stderr


def test_two_replicas_share_128_generations_evenly_and_free_every_slot():
    """The trainer's factory spreads sessions round-robin over the replicas' URLs."""
    trainer = {"MAX_CONCURRENT_ENVS": "64", "MAX_SESSIONS_PER_CLIENT": "0"}  # one trainer fills every slot
    with (
        uvicorn_process(env=trainer) as (a, _),
        uvicorn_process(env=trainer) as (b, _),
    ):
        factory = make_remote_env_factory([a, b])
        envs = [factory() for _ in range(128)]
        scenarios = [task_scenario("train", i) for i in range(128)]
        try:
            # All 128 sessions are open at once: each replica holds exactly its 64, or one is refused.
            firsts = [env.reset(split="train", index=i) for i, env in enumerate(envs)]
            assert firsts == [local_transcript("rule", s, 0)["observation"] for s in scenarios]
            for env, scenario in zip(envs, scenarios):
                local = local_transcript("rule", scenario, 0)
                texts = []
                for tool, args in local["calls"]:
                    try:
                        texts.append(getattr(env, tool)(**args))
                    except ValueError as exc:  # an invalid call, as in-process
                        texts.append(str(exc))
                assert texts == local["texts"] and env.done and env.reward == pytest.approx(local["return"])
            for url in (a, b):
                assert sessions_held(url, 1, extra=0, max_attempts=4) == 0  # full while the 64 sessions stay open
        finally:
            assert close_all() == 128
        for url in (a, b):
            asyncio.run(wait_for_free_slots(url, 64))


def test_a_dns_name_resolves_to_one_url_per_replica():
    assert urls_from_dns("localhost", 8123) in {
        ("http://127.0.0.1:8123",),
        ("http://127.0.0.1:8123", "http://[::1]:8123"),
    }
    assert urls_from_dns("127.0.0.1", 9000, "https") == ("https://127.0.0.1:9000",)
    with pytest.raises(ValueError, match="scheme must be http or https"):
        urls_from_dns("localhost", scheme="ws")
    with pytest.raises(ConnectionError, match="could not resolve"):
        urls_from_dns("no-such-host.invalid")
