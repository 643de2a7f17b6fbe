"""Errors of the runtime layer."""

from __future__ import annotations

from wattcap.core.errors import WattcapError


class SessionError(WattcapError, ValueError):
    """A Session cannot start or go on as asked (no plan possible, a misuse of the API)."""
