"""A fake `torch.cuda` where CUDA is absent: device-aware events, streams and synchronize.

Installed with monkeypatch over the real `torch.cuda` functions wattcap's timing uses
(`is_available`, `Event`, `current_stream`, `synchronize`, `device_count`). Each call records the
CUDA device it concerns, so a test can check that `nvml:1` is timed and synchronised on GPU 1
and never on the current device. Work is the CPU's (tensors stay on the CPU through the test's
torch spy); a start event recorded on device N marks the fake NVML GPU behind it busy until an
event recorded after it is synchronised, as a real GPU is busy while its queued kernels run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tests.fakes.fake_pynvml import FakeGpu


def _index(device: Any) -> int:
    text = str(device if device is not None else "cuda:0")
    return int(text.split(":")[1]) if ":" in text else 0


@dataclass
class FakeStream:
    device: int


@dataclass
class FakeCuda:
    """What the fake CUDA saw; `gpus` maps a CUDA index to the fake NVML GPU behind it."""

    gpus: dict[int, FakeGpu] = field(default_factory=dict)
    #: ("record" | "event-sync" | "device-sync" | "spin" | "empty-cache", CUDA index) in order
    calls: list[tuple[str, int]] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
        cuda = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.enable_timing = enable_timing
                self.device: int | None = None
                self.time_s: float | None = None

            def record(self, stream: FakeStream | None = None) -> None:
                self.device = stream.device if stream is not None else 0
                self.time_s = time.perf_counter()
                cuda.calls.append(("record", self.device))
                gpu = cuda.gpus.get(self.device)
                if gpu is not None:
                    gpu.busy = True  # queued work runs until an event after it is waited for

            def synchronize(self) -> None:
                assert self.device is not None, "synchronize on an event never recorded"
                cuda.calls.append(("event-sync", self.device))
                gpu = cuda.gpus.get(self.device)
                if gpu is not None:
                    gpu.busy = False

            def elapsed_time(self, end: Event) -> float:
                assert self.enable_timing and end.enable_timing
                assert self.device == end.device, "events of two devices cannot be compared"
                assert self.time_s is not None and end.time_s is not None
                return (end.time_s - self.time_s) * 1e3  # ms, as torch returns it

        def synchronize(device: Any = None) -> None:
            cuda.calls.append(("device-sync", _index(device)))

        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: max(cuda.gpus, default=0) + 1)
        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "current_stream",
                            lambda device=None: FakeStream(_index(device)))
        monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
        monkeypatch.setattr(torch.cuda, "get_device_properties", self._properties)
        monkeypatch.setattr(torch.cuda, "device", self._device)
        # the spin kernel (`torch.cuda._sleep`): work queued on the current device
        def spin(cycles: int) -> None:
            cuda.calls.append(("spin", cuda.current))
            gpu = cuda.gpus.get(cuda.current)
            if gpu is not None:
                gpu.busy = True  # until an event recorded after it is waited for

        monkeypatch.setattr(torch.cuda, "_sleep", spin)
        monkeypatch.setattr(torch.cuda, "empty_cache",
                            lambda: cuda.calls.append(("empty-cache", cuda.current)))
        return self

    current: int = 0

    @contextlib.contextmanager
    def _device(self, device: Any) -> Iterator[None]:
        before, self.current = self.current, _index(device)
        try:
            yield
        finally:
            self.current = before

    def _properties(self, index: int) -> Any:
        # "00000000:3B:00.0" -> domain 0, bus 0x3B, device 0: what torch reports per device
        domain, bus, rest = self.gpus[index].pci_bus_id.decode().split(":")
        return SimpleNamespace(pci_domain_id=int(domain, 16), pci_bus_id=int(bus, 16),
                               pci_device_id=int(rest.split(".")[0], 16))

    def devices(self, kind: str) -> set[int]:
        """The CUDA indices calls of `kind` went to."""
        return {device for name, device in self.calls if name == kind}
