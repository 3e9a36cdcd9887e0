"""The board's queue, bounded per visitor and in all, set on the Blocks before the mount.

Gradio's queue lets any client join as many events as it likes; one visitor
queuing 150 Watch jobs made another's Watch wait 40 s and stalled `/ws` sessions
sharing the process. `bound_board` caps the threads, the session capacity and the
queue, and refuses a join past `web_session`'s WEB_* limits with a 429 the page shows.
"""

from __future__ import annotations

import asyncio

from . import web_session as limits

# The concurrency id of the heavy events (web_ui wires Watch, uploads and replays onto it).
HEAVY = "board-heavy"


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
