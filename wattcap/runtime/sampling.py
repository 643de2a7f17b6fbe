"""Sample order for training loops: seeded epoch permutations read as a stream of sample
positions, so every batch size sees the same order and a resumed run continues it, and a
batch sampler that follows a Session's batch size when a moving cap changes it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from wattcap.runtime.session import Session


class BatchStream:
    """Batches of b samples from seeded epoch permutations, crossing epoch boundaries so that
    every batch size sees exactly the same sample order."""

    def __init__(self, n: int, seed: int) -> None:
        if n < 1:
            raise ValueError(f"a batch stream needs at least one sample, got {n}")
        self.n = n
        self.seed = seed

    def indices(self, start: int, count: int) -> np.ndarray:
        """Sample indices at stream positions [start, start + count)."""
        out = np.empty(count, dtype=np.int64)
        filled = 0
        while filled < count:
            epoch, offset = divmod(start + filled, self.n)
            perm = np.random.default_rng((self.seed, epoch)).permutation(self.n)
            take = min(count - filled, self.n - offset)
            out[filled:filled + take] = perm[offset:offset + take]
            filled += take
        return out


class SessionBatchSampler:
    """A `batch_sampler` for a torch DataLoader whose batches follow `session.batch_size`:

        loader = DataLoader(train_set, batch_sampler=SessionBatchSampler(session, len(train_set)))
        for x, y in loader:
            session.apply_learning_rate(optimizer)
            with session.step(samples=len(x)):
                ...
            if session.done:
                break

    Each batch is read from a `BatchStream` (seeded epoch permutations) at the position the
    session has trained to when iteration starts, so a run resumed from a checkpoint continues
    the same sample order. The batch size is read when each batch is drawn: with worker
    processes the DataLoader draws `prefetch_factor` batches ahead, so a change lands that many
    batches later (pass `samples=len(x)` to `step` so the samples are counted right); with
    `num_workers=0` it lands at the next batch. It never ends: stop on `session.done`.
    """

    def __init__(self, session: Session, n: int, seed: int = 0) -> None:
        self.session = session
        self.stream = BatchStream(n, seed)

    def __iter__(self) -> Iterator[list[int]]:
        position = self.session.samples
        while True:
            batch_size = self.session.batch_size
            yield self.stream.indices(position, batch_size).tolist()
            position += batch_size

    def __len__(self) -> int:
        return sys.maxsize  # endless: the session says when to stop


__all__ = ["BatchStream", "SessionBatchSampler"]
