"""wattcap: choose batch size and GPU frequency together, for the fastest training under a
power cap. `wattcap.Session` is the runtime a training loop goes through (imported on first
use: `import wattcap` itself stays light)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wattcap.core.version import __version__

if TYPE_CHECKING:
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import SessionConfig


def __getattr__(name: str) -> Any:
    if name == "Session":
        from wattcap.runtime.session import Session

        return Session
    if name == "SessionConfig":
        from wattcap.runtime.session_config import SessionConfig

        return SessionConfig
    raise AttributeError(f"module 'wattcap' has no attribute {name!r}")


__all__ = ["Session", "SessionConfig", "__version__"]
