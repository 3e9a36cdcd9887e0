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
`bound_board` sets the Blocks' queue, threads and session capacity before the
mount, and `drop_shared_playground` bounds the mounted app: no deep-link route,
a quota on what the upload route keeps, and a sweep of idle sessions.
gradio is imported only inside these functions: it costs seconds of start-up.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from . import web_session as limits

# OpenEnv's routes onto its single web environment (web_interface.create_web_interface_app).
SHARED_ROUTES = ("/web/reset", "/web/step", "/web/state", "/ws/ui")
# Gradio's deep-link route writes the session's whole page config (~110 kB) to its temporary folder on
# every GET and never deletes it; the board offers no deep-link button, so the route goes.
DEEP_LINK_ROUTE = "/gradio_api/deep_link"
# The concurrency id of the heavy events (web_ui wires Watch, uploads and replays onto it).
HEAVY = "board-heavy"


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


# ------------------------------------------------------------------ the queue (before the mount)


def client_of(request) -> str:
    """A request's client address (uvicorn puts a trusted proxy's X-Forwarded-For there)."""
    client = getattr(request, "client", None)
    return client.host if client else ""


def refusal(queue, fn, session: str | None, client: str) -> str | None:
    """Why one more event of `fn` may not join the queue now, or None. Counts the events queued or
    running (Gradio drops an event from `event_ids_to_events` when it ends)."""
    events = list(queue.event_ids_to_events.values())
    mine = [e for e in events if e.session_hash == session]
    theirs = [e for e in events if client_of(e.request) == client]
    if fn.concurrency_id == HEAVY:
        heavy = [e for e in events if e.concurrency_id == HEAVY]
        if sum(e.concurrency_id == HEAVY for e in mine) >= limits.WEB_HEAVY_PER_SESSION:
            return "Your last run (Watch, upload or replay) is still going: wait for it, then try again."
        if sum(e.concurrency_id == HEAVY for e in theirs) >= limits.WEB_HEAVY_PER_CLIENT:
            return "Too many runs from your address at once: wait for one to finish, then try again."
        if len(heavy) >= limits.WEB_HEAVY_QUEUE_MAX:
            return "The board is busy with other visitors' runs: try again in a few seconds."
    if len(mine) >= limits.WEB_EVENTS_PER_SESSION or len(theirs) >= limits.WEB_EVENTS_PER_CLIENT:
        return "Too many requests at once: wait for the last ones to finish."
    return None


def bound_board(blocks) -> None:
    """The Blocks' queue and threads, bounded per visitor and in all (web_session's WEB_* limits)."""
    from fastapi import HTTPException

    blocks.max_threads = limits.WEB_WORKER_THREADS  # also the queue's concurrent jobs, and Gradio's thread limiter
    blocks.state_session_capacity = limits.WEB_MAX_SESSIONS  # read by the StateHolder at the mount
    blocks.queue(max_size=limits.WEB_QUEUE_MAX, default_concurrency_limit=1)
    # Queued events only join through the queue: with `api_open`, /gradio_api/run/<name> would run them
    # directly, past every bound below.
    blocks.api_open = False
    queue = blocks._queue
    push, lock = queue.push, asyncio.Lock()

    async def bounded_push(body, request, username):
        fn = blocks.fns.get(body.fn_index) if body.fn_index is not None else None
        if fn is None:
            return await push(body, request, username)
        async with lock:  # the count and the join are one step: two joins at once cannot both pass
            why = refusal(queue, fn, body.session_hash, client_of(request))
            if why:
                raise HTTPException(status_code=429, detail=why)  # the page shows the detail as an error
            return await push(body, request, username)

    queue.push = bounded_push


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
