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


def content_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's content, cached by (path, size, modification time): a data
    set's files are hashed once, not at every run that names them."""
    import hashlib
    import json

    from wattcap.core.files import write_file

    path = path.resolve()
    stat = path.stat()
    index_path = cache_dir() / "file-sha256.json"
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError):
        index = {}
    known = index.get(str(path))
    if known is not None and known[:2] == [stat.st_size, stat.st_mtime_ns]:
        return str(known[2])
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    index[str(path)] = [stat.st_size, stat.st_mtime_ns, digest.hexdigest()]
    write_file(index_path, json.dumps(index))
    return digest.hexdigest()
