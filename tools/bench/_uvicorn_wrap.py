"""`uvicorn.run` with optional instrumentation, for the benchmark's variant and profile runs.

    BENCH_PROFILE_OUT=/tmp/s.prof BENCH_GC_LOG=/tmp/gc.json BENCH_GC_FREEZE=1 \
        python -m tools.bench._uvicorn_wrap server.app:app --port 8002

Same arguments and uvicorn settings as `python -m uvicorn APP --host H --port P
--log-level L` with server/limits.py's flags (`uvicorn.run(**limits.uvicorn_options())`, as
`releaseops-serve` runs): the served stack, permessage-deflate off. Environment switches:

* BENCH_WS_DEFLATE=1: permessage-deflate on (uvicorn's own default, which the served
  stack turns off), for the what-if that measures what compression would cost.

* BENCH_GC_FREEZE=1: import the app, `gc.collect()` then `gc.freeze()` before
  serving (what server/app.py does itself at import; this applies it to any app,
  the echo baseline included): the start-up heap, OpenEnv's unconditional gradio
  import included, leaves the collector's view.
* BENCH_GC_LOG=path: record every full (generation 2) collection (wall-clock
  start, duration, through `gc.callbacks`) and write them as JSON at exit, with
  the heap once the app was imported: the objects the collector tracks, and how
  many of them the app had frozen itself.
* BENCH_TIMERS=path: in-situ timers, written as JSON at exit: thread CPU time of
  every env.reset / env.step call made through the session executor (or, for an
  environment that overrides `reset_async` / `step_async` to run on the event
  loop, as ours does, of those calls: valid because they never await), and of
  OpenEnv's `deserialize_action`, `serialize_observation` and the response's
  `model_dump_json` on the event loop (two clock reads per call, no profiler).
* BENCH_PROFILE_OUT=path: cProfile with a per-thread CPU clock
  (`time.thread_time`, so waiting costs nothing). Every thread started after
  launch (each session's executor thread) is profiled for its lifetime and kept
  once it ends; the event loop's thread only between SIGUSR1 (start) and
  SIGUSR2 (stop), so start-up (imports) is left out. Stats are merged at exit.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import json
import os
import pstats
import signal
import threading
import time

_finished: list[cProfile.Profile] = []
_lock = threading.Lock()
_original_run = threading.Thread.run


def _profiled_run(self) -> None:
    prof = cProfile.Profile(time.thread_time)
    prof.enable()
    try:
        _original_run(self)
    finally:
        prof.disable()
        with _lock:
            _finished.append(prof)


def _install_timers() -> dict:
    """Wrap the per-message pieces of OpenEnv's /ws handler with thread-CPU timers."""
    from collections import defaultdict

    from openenv.core.env_server import http_server
    from openenv.core.env_server.types import WSObservationResponse

    acc: dict = defaultdict(lambda: [0, 0.0])
    clock = time.thread_time

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                cell = acc[name]
                cell[0] += 1
                cell[1] += clock() - t

        return wrapper

    original_executor = http_server.HTTPEnvServer._run_in_session_executor

    async def run_in_session_executor(self, session_id, func, *args, **kwargs):
        name = "env." + getattr(func, "__name__", "call")
        return await original_executor(self, session_id, timed(name, func), *args, **kwargs)

    http_server.HTTPEnvServer._run_in_session_executor = run_in_session_executor

    # An environment that runs its step on the event loop (it overrides step_async) skips the
    # executor: its coroutines are timed instead, under the same names. They must not await.
    original_create = http_server.HTTPEnvServer._create_session

    def timed_async(name, method):
        async def wrapper(*args, **kwargs):
            t = clock()
            try:
                return await method(*args, **kwargs)
            finally:
                cell = acc[name]
                cell[0] += 1
                cell[1] += clock() - t

        return wrapper

    async def create_session(self):
        session_id, env = await original_create(self)
        from openenv.core.env_server.interfaces import Environment

        for name in ("reset", "step"):
            method = getattr(env, name + "_async")
            if getattr(method, "__func__", method) is not getattr(Environment, name + "_async"):
                setattr(env, name + "_async", timed_async("env." + name, method))
        return session_id, env

    http_server.HTTPEnvServer._create_session = create_session
    http_server.serialize_observation = timed("serialize_observation", http_server.serialize_observation)
    http_server.deserialize_action = timed("deserialize_action", http_server.deserialize_action)
    WSObservationResponse.model_dump_json = timed("response.model_dump_json", WSObservationResponse.model_dump_json)
    return acc


def stack_options() -> dict:
    """server/limits.py's uvicorn settings (the served stack), deflate turned on by BENCH_WS_DEFLATE=1."""
    from server.limits import uvicorn_options

    options = uvicorn_options()
    if os.environ.get("BENCH_WS_DEFLATE") == "1":
        options["ws_per_message_deflate"] = True
        # The app holds its uvicorn to limits.py at start-up (server.connections.LaunchLimits), which
        # would turn compression off again: the what-if changes the setting it holds to.
        import server.limits

        server.limits.WS_PER_MESSAGE_DEFLATE = True
    return options


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("app")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    profile_out = os.environ.get("BENCH_PROFILE_OUT")
    gc_log = os.environ.get("BENCH_GC_LOG")

    import uvicorn

    timers_out = os.environ.get("BENCH_TIMERS")
    timers = _install_timers() if timers_out else None
    module, _, attr = args.app.partition(":")
    app = getattr(importlib.import_module(module), attr or "app")
    # the start-up heap, before any session, and how much of it the app froze itself
    frozen_at_start = gc.get_freeze_count()
    tracked_at_start = len(gc.get_objects()) + frozen_at_start
    if os.environ.get("BENCH_GC_FREEZE") == "1":
        gc.collect()
        gc.freeze()

    events: list[list[float]] = []
    if gc_log:
        started: dict[str, float] = {}

        def on_gc(phase: str, info: dict) -> None:
            if info["generation"] != 2:
                return
            if phase == "start":
                started["wall"], started["t"] = time.time(), time.perf_counter()
            elif "t" in started:
                events.append([started["wall"], time.perf_counter() - started["t"]])

        gc.callbacks.append(on_gc)

    main_prof = cProfile.Profile(time.thread_time)
    if profile_out:
        threading.Thread.run = _profiled_run

        def start(*_: object) -> None:
            with _lock:
                _finished.clear()  # threads that ended before the window (warm-up sessions)
            main_prof.enable()

        signal.signal(signal.SIGUSR1, start)
        signal.signal(signal.SIGUSR2, lambda *_: main_prof.disable())
    # uvicorn restores the previous SIGTERM/SIGINT handlers on shutdown and re-raises
    # the signal it caught; a no-op handler lets `run` return so the results get written.
    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.signal(signal.SIGINT, lambda *_: None)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, **stack_options())
    finally:
        if timers_out:
            with open(timers_out, "w") as f:
                json.dump({k: {"calls": n, "cpu_s": t} for k, (n, t) in timers.items()}, f)
        if gc_log:
            with open(gc_log, "w") as f:
                json.dump(
                    {
                        "tracked_objects_at_start": tracked_at_start,
                        "frozen_by_app": frozen_at_start,
                        "frozen": gc.get_freeze_count(),
                        "full_collections": events,
                    },
                    f,
                )
        if profile_out:
            main_prof.disable()
            stats = pstats.Stats(main_prof)
            with _lock:
                for prof in _finished:
                    stats.add(prof)
                threads = len(_finished)
            stats.dump_stats(profile_out)
            with open(profile_out + ".threads", "w") as f:
                f.write(str(threads))


if __name__ == "__main__":
    main()
