"""A training run as a task an `Executor` can ship: the shared inputs (data, weights) in one
picklable callable, the per-run `TrainConfig` as the item.

`TrainingTask(train, test, weights)(config)` is `train_to_accuracy(config, train, test,
weights=...)`, a pure function of its inputs (runs are seeded), wherever it runs. On another
machine the weights file may not exist, so the task can carry the file's bytes and write them
once to the worker's temporary folder (named by their SHA-256); the record still names the
original file, so a record made on a worker equals one made here.

A task trains with `threads` torch threads (1 by default) wherever it runs: the numbers a CPU
run computes depend on how its reductions are split between threads, so a sweep done here
with the default thread pool and one done by Ray workers of one thread each would differ in the
last digits, and their curves then drift apart. Parallelism comes from the executor instead.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wattcap.core.run import RunRecord, TrainConfig
    from wattcap.data import Dataset


@dataclass(frozen=True)
class TrainingTask:
    """Train one configuration on the shared data from the shared weights (see the module)."""

    train: Dataset
    test: Dataset
    weights: str | None = None
    #: the weights file's bytes, for workers that cannot read `weights` (None: read the file)
    weights_data: bytes | None = None
    #: torch threads of the run (None: leave the process's setting)
    threads: int | None = 1
    #: DataLoader workers of the run (they do not change its result)
    num_workers: int = 0

    @classmethod
    def shipping(cls, train: Dataset, test: Dataset, weights: str | Path | None,
                 carry_weights: bool, num_workers: int = 0) -> TrainingTask:
        """The task; with `carry_weights` the weights' bytes travel with it (for Ray)."""
        name = None if weights is None else str(weights)
        data = Path(weights).read_bytes() if carry_weights and weights is not None else None
        return cls(train, test, name, data, num_workers=num_workers)

    def weights_path(self) -> str | None:
        """The weights file to load here: the original when it is readable, else the carried
        bytes written once to this machine's temporary folder."""
        if self.weights is None:
            return None
        if self.weights_data is None or Path(self.weights).is_file():
            return self.weights
        digest = hashlib.sha256(self.weights_data).hexdigest()
        path = Path(tempfile.gettempdir()) / f"wattcap-weights-{digest[:24]}.safetensors"
        if not path.exists():
            tmp = path.with_suffix(f".{digest[:8]}.partial")
            tmp.write_bytes(self.weights_data)
            tmp.replace(path)
        return str(path)

    def __call__(self, config: TrainConfig) -> RunRecord:
        import torch

        from wattcap.train.loop import train_to_accuracy

        before = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        try:
            record = train_to_accuracy(config, self.train, self.test,
                                       weights=self.weights_path(),
                                       num_workers=self.num_workers)
        finally:
            torch.set_num_threads(before)
        record.weights_source = self.weights
        return record
