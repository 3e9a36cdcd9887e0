"""The one background event loop every remote session of this process lives on.

TRL calls environments from plain synchronous code, while a WebSocket needs a
running event loop to answer the server's pings. One daemon thread runs that
loop, so keepalives go on while the model generates for minutes between two
calls; `LOOP.run(coro)` blocks the caller until its coroutine is done there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from typing import Any, Optional


class LoopThread:
    """A daemon thread running an event loop, started on first use and again in a forked child."""

    def __init__(self, name: str = "releaseops-remote-sessions") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._pid: Optional[int] = None

    def _alive(self) -> bool:
        # A forked child inherits the parent's loop object but not its thread.
        return self._thread is not None and self._thread.is_alive() and self._pid == os.getpid()

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if not self._alive():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=run, name=self._name, daemon=True)
                thread.start()
                if not ready.wait(timeout=10):
                    raise RuntimeError("could not start the remote-session event loop")
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def running(self) -> Optional[asyncio.AbstractEventLoop]:
        """The loop if its thread runs in this process, else None (never starts one)."""
        with self._lock:
            return self._loop if self._alive() else None

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.get())

    def run(self, coro, timeout: Optional[float] = None) -> Any:
        """Run `coro` on the loop and wait for its result (at most `timeout` seconds)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("remote tool env methods are blocking; do not call them from its own event loop")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: the session drops its socket rather than desync it
            raise


LOOP = LoopThread()
