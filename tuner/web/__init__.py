"""The dashboard: server-rendered pages and a JSON API on the results database (read-only)."""

from tuner.web.app import create_app

__all__ = ["create_app"]
