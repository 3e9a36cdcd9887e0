"""The clients against real uvicorn servers on 127.0.0.1.
Over 400 lines: every client door against one live server, sharing its fixtures.

GenericEnvClient (the README snippet), the typed `ReleaseOpsEnv` (sync and
async), and `RemoteReleaseOpsToolEnv`, TRL's remote environment: identical to
the in-process `ReleaseOpsToolEnv`, lazy, reconnecting, tracked and closed,
spread over replicas, capacity-checked, telling a lost session by its code.
(Over 400 lines: one module per door keeps the live servers it starts shared.)
"""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import contextlib
import gc
import inspect
import io
import json
import re
import threading
import time
from pathlib import Path

import numpy
import pytest
from openenv.core import serialize_observation
from websockets.exceptions import ConnectionClosed

from client import (
    CapacityError,
    ReleaseOpsEnv,
    RemoteReleaseOpsToolEnv,
    SessionLostError,
    check_capacity,
    close_all,
    make_remote_env_factory,
    remote_sessions,
)
from client.errors import CLIENT_CLOSED, CONNECTION_LOST, SESSION_CLOSED, coded_message, frame_code
from client.loop import LOOP
from client.models import ReleaseOpsAction, ReleaseOpsObservation, ReleaseOpsState
from client.urls import ENV_URL_VAR
from releaseops_arena import ALL_FAMILIES, ALL_MIXES, DIFFICULTIES, TOOL_NAMES, ReleaseOpsToolEnv, rewards
from releaseops_arena.policies import POLICIES, play
from tests.live_server import (  # noqa: F401  (live_server: fixture)
    HEALTH_TIMEOUT_S,
    free_port,
    live_server,
    run_live_server,
)
from tests.wire import open_socket, send, wait_for_free_slots


def readme_snippet() -> str:
    """The README's GenericEnvClient block, verbatim: the test runs what readers copy."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    return next(b for b in blocks if "GenericEnvClient(base_url=" in b)


README_SNIPPET = readme_snippet()

SCENARIO = {
    "family": "green_ci_disabled_payment_test",
    "seed": 17,
    "difficulty": "medium",
    "archetype_mix": "shortcut_ci__careful_qa",
}
# One test client plays every slot, as a trainer behind one address: the operator lifts the per-address share.
SMALL = {"MAX_CONCURRENT_ENVS": "4", "MAX_SESSIONS_PER_CLIENT": "0"}


@pytest.fixture(autouse=True)
def _close_sessions_after_each_test():
    yield
    close_all()


@pytest.fixture(scope="module")
def servers():
    """Started in parallel: two with MAX_CONCURRENT_ENVS=4, one whose idle reaper frees sessions after 1 s."""
    reaper = {"SESSION_IDLE_TIMEOUT_S": "1", "MAX_CONCURRENT_ENVS": "2", "MAX_SESSIONS_PER_CLIENT": "0"}
    configs = {"a": SMALL, "b": SMALL, "reaper": reaper}
    with contextlib.ExitStack() as stack:
        managers = {name: run_live_server(env=env) for name, env in configs.items()}
        with concurrent.futures.ThreadPoolExecutor(len(managers)) as pool:
            futures = {name: pool.submit(cm.__enter__) for name, cm in managers.items()}
        for name, future in futures.items():  # stop whatever started, even if another failed
            if future.exception() is None:
                stack.push(managers[name].__exit__)
        yield {name: future.result() for name, future in futures.items()}


@pytest.fixture
def small_servers(servers):
    return [servers["a"], servers["b"]]


def local_run(policy: str, scenario: dict, rng_seed: int) -> dict:
    return play(POLICIES[policy](), scenario, rng_seed)


def outcome_of(env, tool: str, args: dict):
    try:
        return ("ok", getattr(env, tool)(**args))
    except ValueError as exc:
        return ("ValueError", str(exc))


# ------------------------------------------------------------------ GenericEnvClient (README)


def test_the_readme_snippet_runs_against_a_live_server(live_server):  # noqa: F811
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(README_SNIPPET.replace("http://127.0.0.1:8000", live_server), "README", "exec"), {})
    lines = out.getvalue().splitlines()
    local = ReleaseOpsToolEnv()
    board = local.reset(**SCENARIO)
    assert lines[0] == board
    first = json.loads(board)["proposals"][0]
    answer = local.ask_worker(first["worker"], "evidence_basis")
    assert lines[1] == f"{local._episode.audit[-1]['reward']} False"  # the step's own reward
    assert lines[2] == answer
    assert lines[3] == "None"  # a valid call's reply has no `error`
    outcome, episode_return = lines[4].split()
    assert outcome in ("safe_ship", "unsafe_ship", "missed_deadline")
    while not local.done:
        pending = [p for p in local._episode.board()["proposals"] if "status" not in p]
        local.approve_proposal(pending[0]["id"])
    assert (outcome, float(episode_return)) == (local.metrics["outcome"], local.reward)
    breakdown = ast.literal_eval(lines[5])  # from state, once the episode is over
    assert set(breakdown) == set(rewards.PARTS) and sum(breakdown.values()) == pytest.approx(local.reward)


# ------------------------------------------------------------------ typed client


def test_parse_result_reads_reward_and_done_from_the_envelope():
    # OpenEnv #1017: serialize_observation strips reward/done from the observation.
    obs = ReleaseOpsObservation(text="t", error="bad", reward=-0.25, done=True, metadata={"metrics": {"x": 1}})
    wire = json.loads(json.dumps(serialize_observation(obs)))
    assert "reward" not in wire["observation"] and "done" not in wire["observation"]
    result = ReleaseOpsEnv(base_url="http://127.0.0.1:1")._parse_result(wire)
    assert (result.reward, result.done, result.metadata) == (-0.25, True, {"metrics": {"x": 1}})
    assert (result.observation.reward, result.observation.done, result.observation.error) == (-0.25, True, "bad")
    with pytest.raises(RuntimeError, match="malformed"):
        ReleaseOpsEnv(base_url="http://127.0.0.1:1")._parse_result({"reward": 1.0, "done": True})


def check_typed_episode(results: list, state: ReleaseOpsState, local: dict) -> None:
    reset, invalid, *steps = results
    assert isinstance(reset.observation, ReleaseOpsObservation)
    assert reset.observation.text == local["observation"] and (reset.reward, reset.done) == (
        rewards.OPENING_REWARD,
        False,
    )
    # A non-zero reward arrives: the envelope is read, not the stripped observation.
    assert (invalid.reward, invalid.done) == (-0.25, False)
    assert invalid.observation.reward == -0.25 and invalid.observation.error == invalid.observation.text
    assert [r.observation.text for r in steps] == [s["result"] for s in local["steps"]]
    assert [r.done for r in steps] == [False] * (len(steps) - 1) + [True]
    assert reset.reward + sum(r.reward for r in steps) == pytest.approx(local["return"])
    last = steps[-1]
    assert last.observation.episode_return == pytest.approx(local["return"] - 0.25)
    assert last.observation.outcome == "safe_ship" and last.observation.done is True
    assert last.metadata == {} == last.observation.metadata  # the end-of-episode record is in state
    assert isinstance(state, ReleaseOpsState)
    # The local run had no invalid call; this one had one, before the same calls.
    assert (state.metrics["outcome"], state.metrics["invalid_actions"]) == ("safe_ship", 1)
    assert state.metrics["episode_return"] == pytest.approx(local["return"] - 0.25)
    assert sum(state.reward_breakdown.values()) == pytest.approx(local["return"] - 0.25)
    assert (state.done, state.outcome, state.seed, state.step_count) == (True, "safe_ship", 17, len(steps) + 1)


def test_typed_client_sync(live_server):  # noqa: F811
    local = local_run("oracle", SCENARIO, 0)
    with ReleaseOpsEnv(base_url=live_server).sync() as env:
        results = [
            env.reset(**SCENARIO),
            env.step(ReleaseOpsAction(tool_name="approve_proposal", arguments={"proposal_id": "p999"})),
        ]
        for s in local["steps"]:
            results.append(env.step(ReleaseOpsAction(tool_name=s["tool"], arguments=s["arguments"])))
        state = env.state()
    check_typed_episode(results, state, local)


def test_typed_client_async(live_server):  # noqa: F811
    local = local_run("oracle", SCENARIO, 0)

    async def main():
        async with ReleaseOpsEnv(base_url=live_server) as env:
            results = [
                await env.reset(**SCENARIO),
                await env.step({"tool_name": "approve_proposal", "arguments": {"proposal_id": "p999"}}),
            ]
            for s in local["steps"]:
                results.append(await env.step({"tool_name": s["tool"], "arguments": s["arguments"]}))
            return results, await env.state()

    check_typed_episode(*asyncio.run(main()), local)


# ------------------------------------------------------------------ the remote tool env


def parity_cases(n: int):
    policies = [
        "random",
        "rule",
        "oracle",
        "random",
        "naive",
        "block_everything",
        "inspect_everything",
        "always_hold",
        "random",
    ]
    for i in range(n):
        scenario = {
            "family": ALL_FAMILIES[i % len(ALL_FAMILIES)],
            "seed": 3000 + i,
            "difficulty": DIFFICULTIES[(i // 4) % len(DIFFICULTIES)],
            "archetype_mix": ALL_MIXES[i % len(ALL_MIXES)],
        }
        yield policies[i % len(policies)], scenario, i


def test_remote_tool_env_is_identical_to_the_local_one(live_server):  # noqa: F811
    factory = make_remote_env_factory(live_server)
    pool = [factory() for _ in range(4)]  # reused across episodes, like TRL's pool
    calls = invalid = 0
    outcomes = set()
    for policy, scenario, i in parity_cases(168):
        recorded = local_run(policy, scenario, rng_seed=i)
        remote, local = pool[i % len(pool)], ReleaseOpsToolEnv()
        row = {**scenario, "prompt": [{"role": "user", "content": "x"}], "split": "train"}  # TRL passes the row
        assert remote.reset(**row) == local.reset(**row) == recorded["observation"]
        assert (remote.reward, remote.done, remote.metrics) == (local.reward, local.done, local.metrics)
        steps = [(s["tool"], s["arguments"]) for s in recorded["steps"]]
        steps.append(("hold_release", {"reason_code": "awaiting_fix"}))  # after the end (V4)
        for tool, args in steps:
            got, want = outcome_of(remote, tool, args), outcome_of(local, tool, args)
            assert got == want, (policy, scenario, tool, args)
            assert (remote.reward, remote.done) == (local.reward, local.done)
            calls += 1
            invalid += got[0] == "ValueError"
        assert remote.done and remote.metrics == local.metrics == recorded["metrics"]
        outcomes.add(remote.metrics["outcome"])
    assert outcomes == {"safe_ship", "unsafe_ship", "missed_deadline"}
    assert calls > 1000 and invalid > 100


def test_reset_and_errors_match_the_local_env(live_server):  # noqa: F811
    remote, local = make_remote_env_factory(live_server)(), ReleaseOpsToolEnv()
    # Before any reset: the same error, and no connection is opened for it.
    assert outcome_of(remote, "hold_release", {"reason_code": "awaiting_fix"}) == outcome_of(
        local, "hold_release", {"reason_code": "awaiting_fix"}
    )
    assert remote._link.session is None
    for bad in ({"family": "nope"}, {"difficulty": "brutal"}, {"seed": -1}, {"archetype_mix": "evil"}):
        with pytest.raises(ValueError) as remote_error:
            remote.reset(**bad)
        with pytest.raises(ValueError) as local_error:
            local.reset(**bad)
        assert str(remote_error.value) == str(local_error.value)
    # Defaults, ignored columns and null columns read the same; numpy-like ints are accepted.
    assert remote.reset(prompt="p", split="eval", seed=None) == local.reset(prompt="p", split="eval", seed=None)
    assert remote.reset(archetype_mix=None, family=None) == local.reset()
    assert remote.reset(**{**SCENARIO, "seed": numpy.int64(17)}) == local.reset(**{**SCENARIO, "seed": numpy.int64(17)})
    # An invalid call: ValueError with the server's message, reward -0.25, episode goes on.
    assert outcome_of(remote, "approve_proposal", {"proposal_id": "p0"}) == outcome_of(
        local, "approve_proposal", {"proposal_id": "p0"}
    )
    assert remote.reward == local.reward == rewards.OPENING_REWARD - 0.25 and not remote.done
    # A refused reset leaves the running episode in place, on both sides.
    for env in (remote, local):
        with pytest.raises(ValueError, match="unknown family"):
            env.reset(family="nope")
    assert outcome_of(remote, "hold_release", {"reason_code": "risk_too_high"}) == outcome_of(
        local, "hold_release", {"reason_code": "risk_too_high"}
    )
    assert (remote.reward, remote.done) == (local.reward, local.done)


def test_trl_discovers_exactly_the_seven_tools_with_the_local_schemas(live_server):  # noqa: F811
    from transformers.utils import get_json_schema

    env = make_remote_env_factory(live_server)()
    members = dict(inspect.getmembers(type(env), predicate=inspect.isfunction))
    public = sorted(name for name in members if not name.startswith("_"))
    # TRL 1.16 takes every public function as a tool except `reset` and `get_reward` (the env owns
    # its reward); nothing else may be public.
    assert public == sorted([*TOOL_NAMES, "get_reward", "reset"])
    assert "close" not in members
    local = ReleaseOpsToolEnv()
    for name in TOOL_NAMES:
        assert get_json_schema(getattr(env, name)) == get_json_schema(getattr(local, name))
        assert getattr(type(env), name) is getattr(ReleaseOpsToolEnv, name)  # shared, not copied
    assert env._link.session is None  # discovery opens nothing


# ------------------------------------------------------------------ sessions on the server


def test_sessions_open_lazily_and_close_all_frees_the_slots(small_servers):
    url = small_servers[0]
    factory = make_remote_env_factory(url)
    idle = [factory() for _ in range(10)]  # constructed, never reset: no socket, no slot
    assert all(env._link.session is None for env in idle)
    full = [factory() for _ in range(4)]
    for env in full:
        env.reset(seed=1)
    with pytest.raises(CapacityError, match="at capacity.*MAX_CONCURRENT_ENVS"):
        idle[0].reset(seed=1)
    assert close_all() == 4
    with pytest.raises(SessionLostError, match="next reset") as closed:
        full[0].approve_proposal("p1")
    assert closed.value.code == CLIENT_CLOSED
    again = [factory() for _ in range(4)]  # the server freed every slot
    for env in again:
        env.reset(seed=2)
    # A collected instance closes its own session.
    del again[0]
    gc.collect()
    close_all()  # waits for the finalizer's close; closes the rest
    for env in full:
        env.reset(seed=3)  # old instances reconnect
    assert all(env._link.session.alive for env in full)


def test_check_capacity_and_round_robin_over_two_replicas(small_servers):
    a, b = small_servers
    assert check_capacity(a, 4)["capacity"] == 4
    with pytest.raises(CapacityError) as one:
        check_capacity([a], 5)
    assert str(one.value) == (
        "server capacity 4 (1 replica x 4) is below the generation batch size 5; "
        "raise MAX_CONCURRENT_ENVS or add replicas or workers"
    )
    report = check_capacity(f"{a},{b}", 8)
    assert report["replicas"] == 2 and report["capacity"] == 8
    with pytest.raises(
        CapacityError, match=r"server capacity 8 \(2 replicas x 4\) is below the generation batch size 9"
    ):
        check_capacity([a, b], 9)
    with pytest.raises(CapacityError):
        with remote_sessions([a, b], generation_batch_size=9):
            pass
    with pytest.raises(ConnectionError):
        check_capacity(f"http://127.0.0.1:{free_port()}", 1, timeout_s=2)

    with remote_sessions([a, b], generation_batch_size=8) as factory:
        envs = [factory() for _ in range(8)]
        assert [env.base_url for env in envs] == [a, b] * 4
        for env in envs:  # 8 sessions on two servers of 4: only fits when spread
            env.reset(seed=4)
        with pytest.raises(CapacityError):
            factory().reset(seed=4)
    # remote_sessions closed them all at exit.
    with remote_sessions([a, b]) as factory:
        for env in [factory() for _ in range(8)]:
            env.reset(seed=5)


def test_env_var_urls_and_factory_options(monkeypatch, small_servers):
    a, b = small_servers
    monkeypatch.delenv(ENV_URL_VAR, raising=False)
    with pytest.raises(ValueError, match="RELEASEOPS_ENV_URL"):
        RemoteReleaseOpsToolEnv()
    monkeypatch.setenv(ENV_URL_VAR, f" {a}/ , {b}")
    urls = [RemoteReleaseOpsToolEnv().base_url for _ in range(4)]
    assert sorted(urls) == sorted([a, b, a, b]) and urls[0] != urls[1]
    assert make_remote_env_factory().base_urls == (a, b)
    with pytest.raises(TypeError, match="unknown client option 'no_such_option'; valid: connect_timeout_s, "):
        make_remote_env_factory(a, no_such_option=1)
    with pytest.raises(ValueError):
        make_remote_env_factory("127.0.0.1:8000")
    env = make_remote_env_factory(a, message_timeout_s=7.0)()
    env.reset(seed=6)
    assert env._link.session.options.message_timeout_s == 7.0
    socket = env._link.session._ws  # the keepalive the live socket really runs with
    assert (socket.ping_interval, socket.ping_timeout) == (20.0, 120.0)


# ------------------------------------------------------------------ dropped connections


def test_a_dropped_socket_loses_the_episode_and_the_next_reset_reconnects(live_server):  # noqa: F811
    env, local = make_remote_env_factory(live_server)(), ReleaseOpsToolEnv()
    env.reset(**SCENARIO)
    first = env._link.session
    LOOP.run(first._ws.close())  # the connection drops under the episode
    with pytest.raises(SessionLostError, match="lost .* next reset\\(\\) opens a new session") as lost:
        env.inspect_ticket("ticket_1")
    assert lost.value.code == CONNECTION_LOST
    with pytest.raises(SessionLostError) as again:  # still lost, not "no episode"
        env.inspect_ticket("ticket_1")
    assert again.value.code == CONNECTION_LOST
    assert env.get_reward() is None and env.truncated  # the server held the episode: unscorable
    assert env.reset(**SCENARIO) == local.reset(**SCENARIO)
    assert env._link.session is not first and env._link.session.alive
    assert outcome_of(env, "hold_release", {"reason_code": "awaiting_fix"}) == outcome_of(
        local, "hold_release", {"reason_code": "awaiting_fix"}
    )


def test_the_next_reset_reconnects_after_a_server_restart():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    impatient = make_remote_env_factory(url, reconnect_timeout_s=0)()
    patient, local = make_remote_env_factory(url, reconnect_timeout_s=60)(), ReleaseOpsToolEnv()
    with pytest.raises(ConnectionError):  # a first connection fails at once
        make_remote_env_factory(url)().reset(**SCENARIO)
    with run_live_server(port=port):
        impatient.reset(**SCENARIO)
        patient.reset(**SCENARIO)
    # The server is gone: a tool call says so clearly; without a retry window a reset cannot connect.
    with pytest.raises(SessionLostError, match="lost") as lost:
        impatient.approve_proposal("p1")
    assert lost.value.code == CONNECTION_LOST
    assert impatient.session_error and patient.session_error is None
    with pytest.raises(ConnectionError):
        impatient.reset(**SCENARIO)
    # A new server on the same address, started only once the patient reset has failed against the
    # empty address, so that the reset below must retry (no fixed sleep decides the order).
    failed_once, up, stop = threading.Event(), threading.Event(), threading.Event()
    connect = patient._link._connect

    def noting_connect():
        try:
            return connect()
        except ConnectionError:
            failed_once.set()
            raise

    patient._link._connect = noting_connect

    def serve_again():
        if not failed_once.wait(HEALTH_TIMEOUT_S):
            return
        with run_live_server(port=port):
            up.set()
            stop.wait(HEALTH_TIMEOUT_S)

    thread = threading.Thread(target=serve_again)
    thread.start()
    try:
        board = local.reset(**SCENARIO)
        assert patient.reset(**SCENARIO) == board  # retried with backoff until the server answered
        assert failed_once.is_set()  # its first attempt found no server
        assert up.wait(HEALTH_TIMEOUT_S)  # the restarted server answered (its health poll may lag the reset)
        patient._link._connect = connect
        assert impatient.reset(**SCENARIO) == board and impatient.session_error is None
        args = {"worker_id": "qa_triage", "question_type": "policy_basis"}
        want = outcome_of(local, "ask_worker", args)
        assert outcome_of(impatient, "ask_worker", args) == want == outcome_of(patient, "ask_worker", args)
        close_all()
    finally:
        stop.set()
        thread.join()


def test_a_session_freed_by_the_idle_reaper_is_lost_and_reset_reconnects(servers):
    factory, local = make_remote_env_factory(servers["reaper"]), ReleaseOpsToolEnv()
    stepped, reset_only = factory(), factory()
    stepped.reset(**SCENARIO)
    reset_only.reset(**SCENARIO)
    last_activity = time.monotonic()
    # Sessions with no play for over 1 s are closed, socket and all (server/session_guard.py).
    # Both slots come free only once both idle sessions are closed.
    asyncio.run(wait_for_free_slots(servers["reaper"], 2, timeout=20))
    assert time.monotonic() - last_activity >= 1.0  # not before the configured idle timeout
    with pytest.raises(SessionLostError, match="idle timeout") as reaped:
        stepped.hold_release("awaiting_fix")
    assert reaped.value.code == SESSION_CLOSED
    board = local.reset(**SCENARIO)
    assert reset_only.reset(**SCENARIO) == board  # reconnects transparently
    assert stepped.reset(**SCENARIO) == board
    want = outcome_of(local, "hold_release", {"reason_code": "awaiting_fix"})
    for env in (stepped, reset_only):  # both on new sessions (the server holds only two)
        assert outcome_of(env, "hold_release", {"reason_code": "awaiting_fix"}) == want


def test_the_server_names_a_closed_session_by_code_in_its_error_frame(servers):
    async def main():
        async with open_socket(servers["reaper"]) as ws:
            await send(ws, {"type": "reset", "data": SCENARIO})
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))  # unasked: the session is closed
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return frame

    frame = asyncio.run(main())
    assert frame["type"] == "error" and frame["data"]["code"] == SESSION_CLOSED
    code, message = frame_code(frame["data"])
    assert code == SESSION_CLOSED and "reset" in message and "SESSION_IDLE_TIMEOUT_S" in message


def test_an_environment_closed_under_a_socket_says_so_by_code():
    # A session the reaper frees while a socket still holds it (one attached to an HTTP MCP session)
    # answers every call with the code inside OpenEnv's EXECUTION_ERROR (client/errors.py).
    from server.releaseops_environment import ReleaseOpsEnvironment

    env = ReleaseOpsEnvironment()
    env.close()
    with pytest.raises(RuntimeError) as closed:
        env.reset(seed=1)
    code, message = frame_code({"code": "EXECUTION_ERROR", "message": str(closed.value)})
    assert code == SESSION_CLOSED and "reset" in message and SESSION_CLOSED not in message


# The server's wording without its code: the client must not take it for a closed session.
WORDING_ONLY = "this session was closed (idle timeout); reconnect and reset"


def test_only_an_environment_code_in_an_execution_error_counts():
    assert frame_code({"code": "EXECUTION_ERROR", "message": "SESSION_CLOSED: gone"}) == (SESSION_CLOSED, "gone")
    assert frame_code({"code": "EXECUTION_ERROR", "message": WORDING_ONLY}) == ("EXECUTION_ERROR", WORDING_ONLY)
    assert frame_code({"code": "CAPACITY_REACHED", "message": "SESSION_CLOSED: x"})[0] == "CAPACITY_REACHED"
    assert frame_code({"message": "no code"}) == ("UNKNOWN", "no code")
    with pytest.raises(ValueError, match="valid: SESSION_CLOSED"):
        coded_message("SESSION_GONE", "x")


SILENT = object()  # a scripted server that does not answer this message


@contextlib.contextmanager
def scripted_server(replies: list):
    """A WebSocket server at /ws answering each message, across connections, with the next scripted reply."""
    from websockets.sync.server import serve

    script = iter(replies)

    def handler(ws):
        for raw in ws:
            if json.loads(raw).get("type") == "close":
                return
            reply = next(script)
            if reply is not SILENT:
                ws.send(json.dumps(reply))

    with serve(handler, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.socket.getsockname()[1]}"
        finally:
            close_all()
            server.shutdown()
            thread.join(10)


def board_frame(text: str) -> dict:
    return {"type": "observation", "data": serialize_observation(ReleaseOpsObservation(text=text))}


def execution_error(message: str) -> dict:
    return {"type": "error", "data": {"message": message, "code": "EXECUTION_ERROR"}}


def test_the_client_matches_the_code_never_the_wording():
    with scripted_server(
        [
            board_frame("board"),
            execution_error(WORDING_ONLY),
            execution_error(coded_message(SESSION_CLOSED, "freed")),
            board_frame("again"),
        ]
    ) as url:
        env = make_remote_env_factory(url)()
        assert env.reset() == "board"
        with pytest.raises(RuntimeError, match="server refused hold_release") as refused:
            env.hold_release("awaiting_fix")
        assert not isinstance(refused.value, SessionLostError) and env.session_error is None
        with pytest.raises(SessionLostError) as lost:
            env.hold_release("awaiting_fix")
        assert (lost.value.code, lost.value.reason, env.session_error) == (SESSION_CLOSED, "freed", "freed")
        first = env._link.session
        assert env.reset() == "again" and env._link.session is not first  # a new connection


def test_a_reply_that_never_comes_loses_the_session_and_the_next_reset_reconnects():
    with scripted_server([board_frame("board"), SILENT, board_frame("again")]) as url:
        env = make_remote_env_factory(url, message_timeout_s=0.5)()
        env.reset()
        first = env._link.session
        with pytest.raises(SessionLostError, match=r"no reply within 0.5 s") as lost:
            env.hold_release("awaiting_fix")
        assert lost.value.code == CONNECTION_LOST
        assert env.reset() == "again" and env._link.session is not first


def test_check_capacity_counts_what_one_address_may_hold_and_names_the_setting(live_server):  # noqa: F811
    # A default server: 64 sessions per worker, of which one address may hold half.
    assert check_capacity(live_server, 32)["capacity"] == 32
    with pytest.raises(CapacityError) as refused:
        check_capacity(live_server, 64)
    assert "server capacity for one client address is 32" in str(refused.value)
    assert "lets one address hold 32 of 64 per worker" in str(refused.value)
    assert "MAX_SESSIONS_PER_CLIENT=0" in str(refused.value)
