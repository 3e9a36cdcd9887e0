"""Shared fixtures: one live server for the whole session."""

from tests.live_server import live_server  # noqa: F401
