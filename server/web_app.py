"""How the web UI joins the app: the Release board alone at /web, and no shared environment.

OpenEnv's `create_app` with a `gradio_builder` would also mount its generic
Playground, which plays the ONE environment of its `web_manager` for every
visitor: one visitor's reset ends another's episode, and each sees the other's
moves. The Release board gives every browser session its own episode instead,
so `server/app.py` passes `show_default_tab=False` (as OpenEnv's own Harbor app
does) and `drop_shared_playground` removes the routes that still drive that one
environment. Agents play over `/ws`, one session each.
"""

from __future__ import annotations

# OpenEnv's routes onto its single web environment (web_interface.create_web_interface_app).
SHARED_ROUTES = ("/web/reset", "/web/step", "/web/state", "/ws/ui")


def build_release_board(*args):
    """OpenEnv's `gradio_builder`, imported only when the web UI is on: gradio costs seconds of start-up."""
    from .web_ui import build_release_board as build

    return build(*args)


def drop_shared_playground(app) -> None:
    """Remove the routes onto OpenEnv's one shared web environment (absent when the web UI is off)."""
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) not in SHARED_ROUTES]
