"""`ServerSettings`: how a server runs (its database, its token, its limits)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MiB = 2**20


@dataclass(frozen=True)
class ServerSettings:
    """How a server runs: its database, its token and its limits."""

    db: Path
    token: str | None = None
    private_reads: bool = False
    max_weights_bytes: int = 64 * MiB
    max_json_bytes: int = 4 * MiB
    #: where estimation jobs train: None in the job thread, else a `--ray` spec ("local",
    #: "local:N", a cluster address) for `wattcap.train.executors.get_executor`
    ray: str | None = None
    #: the only folder estimation jobs may read data from (FORMAT:PATH proxies); None: bundled
    #: datasets only
    data_root: Path | None = None

    def __post_init__(self) -> None:
        if self.private_reads and not self.token:
            raise ValueError("private reads need a token: set --token or WATTCAP_SERVER_TOKEN")
        if self.token is not None and len(self.token) < 8:
            raise ValueError("the token must be at least 8 characters long")
        if self.max_weights_bytes < 1 or self.max_json_bytes < 1:
            raise ValueError("size limits must be positive")
