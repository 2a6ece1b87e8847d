"""``/board``: the page for the people who run a fleet, its small API and its static files."""

from ._routes import board_routes

__all__ = ["board_routes"]
