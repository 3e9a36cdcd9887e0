"""How the web UI joins the app: the Release board alone at /web, no shared environment, and its bounds.

OpenEnv's `create_app` with a `gradio_builder` would also mount its generic
Playground, which plays the ONE environment of its `web_manager` for every
visitor: one visitor's reset ends another's episode, and each sees the other's
moves. The Release board gives every browser session its own episode instead,
so `server/app.py` passes `show_default_tab=False` (as OpenEnv's own Harbor app
does) and `drop_shared_playground` removes the routes that still drive that one
environment. Agents play over `/ws`, one session each.

The board is anonymous and shares the process (and its event loop) with `/ws`, so
what one visitor can make it hold or do is bounded (`web_session`'s WEB_* limits):
`web_queue.bound_board` sets the Blocks' queue, threads and session capacity
before the mount, and `drop_shared_playground` bounds the mounted app: no
deep-link route, a quota on what the upload route keeps, and a sweep of idle sessions.
A failed event (a bad value sent to `/web/gradio_api/call/<fn>`, say) is one log line, at most one
per REPEAT_WINDOW_S of each kind, not gradio's 27-line traceback per call (`quiet_event_errors`).
gradio is imported only inside these functions: it costs seconds of start-up.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path

from . import web_session as limits
from .connections import Throttle, and_more

log = logging.getLogger("uvicorn.error")

# OpenEnv's routes onto its single web environment (web_interface.create_web_interface_app).
SHARED_ROUTES = ("/web/reset", "/web/step", "/web/state", "/ws/ui")
# Gradio's deep-link route writes the session's whole page config (~110 kB) to its temporary folder on
# every GET and never deletes it; the board offers no deep-link button, so the route goes.
DEEP_LINK_ROUTE = "/gradio_api/deep_link"


def build_release_board(*args):
    """OpenEnv's `gradio_builder`, imported only when the web UI is on: gradio costs seconds of start-up."""
    from .web_ui import build_release_board as build

    return build(*args)


def drop_shared_playground(app) -> None:
    """Remove the routes onto OpenEnv's one shared web environment (absent when the web UI is off), and
    bound the mounted board (`guard_mount`)."""
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) not in SHARED_ROUTES]
    for route in app.router.routes:
        if getattr(route, "path", None) == "/web" and hasattr(getattr(route, "app", None), "get_blocks"):
            guard_mount(route)
            quiet_event_errors()


# ------------------------------------------------------------------ the log


class OneLineErrors:
    """Stands in for the `traceback` module in gradio's queue and routes, whose only use of it is
    `print_exc()` when an event fails: a traceback on stderr per call, from input any client can send.
    Here a failure is one line on the server's log (a bad value a warning, anything else an error),
    and the same kind again within REPEAT_WINDOW_S is counted, then named with the next line that
    passes (as `connections.RepeatFilter` does for asyncio's resource errors)."""

    def __init__(self):
        self.throttle = Throttle()

    def __getattr__(self, name):  # the rest of the module, should gradio use more of it
        return getattr(traceback, name)

    def print_exc(self, *args, **kwargs) -> None:
        exc = sys.exc_info()[1]
        if exc is None:
            return
        kind = type(exc).__name__
        held = self.throttle.passes(kind)
        if held is None:
            return
        more = and_more(held)
        # One line of printable ASCII: the message may quote what the client sent (control characters too).
        message = "".join(c if c.isascii() and c.isprintable() else ascii(c)[1:-1] for c in " ".join(str(exc).split()))
        message = message if len(message) <= 300 else message[:297] + "..."
        from gradio.exceptions import Error

        level = logging.WARNING if isinstance(exc, Error) else logging.ERROR  # Error: gradio refused a value
        log.log(level, "web board: an event failed: %s: %s%s", kind, message, more)


def quiet_event_errors() -> None:
    """Put `OneLineErrors` in place of `traceback` in gradio's queue and routes (once)."""
    from gradio import queueing, routes

    quiet = next((m.traceback for m in (queueing, routes) if isinstance(m.traceback, OneLineErrors)), OneLineErrors())
    queueing.traceback = routes.traceback = quiet


# ------------------------------------------------------------------ the mounted app


def guard_mount(route) -> None:
    """Bound the mounted board: drop the deep-link route, count and expire uploads, sweep idle sessions."""
    gradio_app = route.app
    blocks = gradio_app.get_blocks()
    gradio_app.router.routes = [r for r in gradio_app.router.routes if getattr(r, "path", None) != DEEP_LINK_ROUTE]
    uploads = UploadQuota(gradio_app, blocks)
    route.app = uploads
    holder = gradio_app.state_holder
    holder.capacity = limits.WEB_MAX_SESSIONS
    expired = holder.delete_all_expired_state

    def sweep() -> None:
        """Gradio calls this every second on the event loop: expired gr.State values go (Gradio's own),
        then sessions idle past WEB_SESSION_IDLE_S, then uploads past their time."""
        expired()
        cutoff = time.time() - limits.WEB_SESSION_IDLE_S
        with holder.lock:
            for session, used in list(holder.time_last_used.items()):
                if used.timestamp() < cutoff:
                    holder.session_data.pop(session, None)
                    holder.time_last_used.pop(session, None)
        uploads.expire()

    holder.delete_all_expired_state = sweep


class UploadQuota:
    """The mounted Gradio app, with a count and an age on what its upload route keeps (web_session's
    WEB_UPLOADS_*). Gradio writes each uploaded file to <upload folder>/<sha>/<name>, answers with the
    paths, and deletes nothing while the server runs; this wrapper reads the paths from the answer."""

    def __init__(self, app, blocks):
        self.app, self.blocks = app, blocks
        self.kept: dict[str, tuple[float, str]] = {}  # path -> (when it arrived, client address), oldest first

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "").rstrip("/")
        if scope["type"] != "http" or scope.get("method") != "POST" or not path.endswith("/gradio_api/upload"):
            return await self.app(scope, receive, send)
        self.expire()
        client = (scope.get("client") or ("",))[0]
        if len(self.kept) >= limits.WEB_UPLOADS_MAX:
            return await self.refuse(scope, receive, send)
        status, chunks = [0], []

        async def capture(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        await self.app(scope, receive, capture)
        if status[0] != 200:
            return
        try:
            paths = json.loads(b"".join(chunks))
        except ValueError:
            return
        now = time.monotonic()
        for p in paths if isinstance(paths, list) else []:
            if isinstance(p, str):
                self.kept.pop(p, None)  # the same file again: it moves to the end
                self.kept[p] = (now, client)
        theirs = [p for p, (_, c) in self.kept.items() if c == client]
        for p in theirs[: max(0, len(theirs) - limits.WEB_UPLOADS_PER_CLIENT)]:
            self.remove(p)

    async def refuse(self, scope, receive, send):
        from starlette.responses import PlainTextResponse

        oldest = min(t for t, _ in self.kept.values())
        wait = max(1, int(oldest + limits.WEB_UPLOAD_TTL_S - time.monotonic()) + 1)
        message = f"The server holds {len(self.kept)} uploads, its limit: try again in {wait} s."
        await PlainTextResponse(message, status_code=429, headers={"Retry-After": str(wait)})(scope, receive, send)

    def expire(self) -> None:
        cutoff = time.monotonic() - limits.WEB_UPLOAD_TTL_S
        for p in [p for p, (t, _) in self.kept.items() if t < cutoff]:
            self.remove(p)

    def remove(self, path: str) -> None:
        """Delete an upload and its folder (Gradio's <sha> folder holds only it); forget it everywhere."""
        self.kept.pop(path, None)
        self.blocks.upload_file_set.discard(path)
        try:
            os.remove(path)
            os.rmdir(Path(path).parent)
        except OSError:  # already gone, or the folder holds another name of the same content
            pass
