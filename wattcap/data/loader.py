"""A torch DataLoader over wattcap data sets, in the order the trainer decides.

The trainer owns the sample order (``wattcap.train.loop.BatchStream``: seeded epoch
permutations, identical for every batch size), so the loader does not shuffle or sample: it
takes a sequence of index batches and turns each into ``(x, y)`` tensors, in that order.
Workers (``num_workers``) read and normalise the next batches while the device trains on the
current one — for a memory-mapped uint8 set that is where the disk reads and the float
conversion happen. With a CUDA target the batches come in pinned memory and are copied with
``non_blocking=True``, so the copy overlaps the previous step.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader
from torch.utils.data import Dataset as TorchDataset

from wattcap.data.base import Dataset


class IndexBatches(TorchDataset):
    """Item i is ``dataset.batch(batches[i])`` as a pair of tensors."""

    def __init__(self, dataset: Dataset, batches: Sequence[np.ndarray]) -> None:
        self.dataset = dataset
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.dataset.batch(np.asarray(self.batches[i], dtype=np.int64))
        return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(y))


class StreamBatches(Sequence[np.ndarray]):
    """``count`` consecutive batches of ``batch_size`` from a stream with an
    ``indices(start, count)`` method (such as BatchStream), starting at sample ``start``.

    Lazy and small, so it travels to worker processes cheaply.
    """

    def __init__(self, stream: Any, start: int, batch_size: int, count: int) -> None:
        if batch_size < 1 or count < 0:
            raise ValueError(f"batch size must be >= 1 and count >= 0, got {batch_size}, {count}")
        self.stream = stream
        self.start = start
        self.batch_size = batch_size
        self.batches = count  # not `count`: that is Sequence's method

    def __len__(self) -> int:
        return self.batches

    def __getitem__(self, i: int) -> np.ndarray:  # type: ignore[override]
        if not -self.batches <= i < self.batches:
            raise IndexError(i)
        i %= self.batches
        return self.stream.indices(self.start + i * self.batch_size, self.batch_size)


def _single_thread_worker(_: int) -> None:
    # Workers convert batches with numpy/torch; one intra-op thread each avoids
    # oversubscribing the cores the training process also uses.
    torch.set_num_threads(1)


def batch_loader(
    dataset: Dataset,
    batches: Sequence[np.ndarray],
    *,
    num_workers: int = 0,
    torch_device: torch.device | str | None = None,
    pin_memory: bool | None = None,
    prefetch_factor: int = 2,
) -> DataLoader:
    """A DataLoader yielding ``dataset.batch(b)`` for each index batch ``b``, in order.

    ``pin_memory`` defaults to True when ``torch_device`` is CUDA and torch has CUDA (the
    loader's pinning thread then does it off the training thread). The tensors stay on the
    CPU: iterate :func:`iterate_batches` to have them copied to the device.
    """
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    device = torch.device(torch_device) if torch_device is not None else torch.device("cpu")
    if pin_memory is None:
        pin_memory = device.type == "cuda" and torch.cuda.is_available()
    extra: dict[str, Any] = {}
    if num_workers > 0:
        extra = {"prefetch_factor": prefetch_factor, "worker_init_fn": _single_thread_worker,
                 "persistent_workers": False}
    return DataLoader(
        IndexBatches(dataset, batches),
        batch_size=None,  # every item is already a batch
        shuffle=False,
        num_workers=num_workers,
        pin_memory=pin_memory,
        # its own generator: creating an iterator draws a base seed, which from the global
        # generator would shift dropout's draws whenever a loader is made (a resume, a re-plan)
        generator=torch.Generator().manual_seed(0),
        **extra,
    )


def iterate_batches(
    dataset: Dataset,
    batches: Sequence[np.ndarray],
    *,
    num_workers: int = 0,
    torch_device: torch.device | str | None = None,
    pin_memory: bool | None = None,
    non_blocking: bool = True,
) -> Generator[tuple[torch.Tensor, torch.Tensor], None, None]:
    """``(x, y)`` tensors on ``torch_device`` for each index batch, in order.

    Copies to a GPU come from pinned memory (pinned by the loader, else here) and are
    ``non_blocking``, so they overlap compute.
    """
    from wattcap.data.loader import move_to_device

    device = torch.device(torch_device) if torch_device is not None else torch.device("cpu")
    loader = batch_loader(dataset, batches, num_workers=num_workers, torch_device=device,
                          pin_memory=pin_memory)
    for x, y in loader:
        if device.type == "cpu":
            yield x, y
        elif non_blocking:
            yield move_to_device(x, str(device)), move_to_device(y, str(device))
        else:
            yield x.to(device), y.to(device)


def move_to_device(tensor: torch.Tensor, torch_device: str) -> torch.Tensor:
    """One tensor to a torch device: pinned and copied without blocking on CUDA, untouched when
    it is there already."""
    if str(tensor.device) == torch_device or (torch_device == "cpu"
                                              and tensor.device.type == "cpu"):
        return tensor
    if torch_device.startswith("cuda") and tensor.device.type == "cpu":
        return tensor.pin_memory().to(torch_device, non_blocking=True)
    return tensor.to(torch_device)


def first_tensor(batch: Any) -> Any:
    """The inputs of a framework batch: the batch itself, its first element (x, y), or the
    first tensor value of a dict (input_ids); None when there is no tensor."""
    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, (tuple, list)) and batch:
        return first_tensor(batch[0])
    if isinstance(batch, dict):
        for value in batch.values():
            if isinstance(value, torch.Tensor):
                return value
    return None
