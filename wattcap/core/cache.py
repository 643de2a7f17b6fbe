"""Where wattcap keeps files it can recompute (reference profiles, data caches).

Kept apart from the modules that use it so that the data readers can find the cache folder
without importing the profiler and the device layer.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where computed files are cached (WATTCAP_CACHE_DIR, else ~/.cache/wattcap)."""
    root = os.environ.get("WATTCAP_CACHE_DIR") or Path.home() / ".cache" / "wattcap"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
