"""Shared fixtures: an isolated cache folder and the expensive, read-only objects (workloads of
the reference models, an exhaustive ResNet18 profile of the emulated Jetson Nano, and the
emulated reference profiles), computed once per test session.

Session fixtures hand out shared objects: tests must not mutate them (copy with
`model_copy(deep=True)` first).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
import torch

from wattcap.algorithms.efficiency import vector_from_samples

NANO = "jetson-nano"

# The tests run tiny CPU workloads (batch of 2) on a machine shared with other jobs: with the
# default intra-op thread pool, spinning OpenMP workers under contention made the workload
# census ~8x slower (35 s instead of 4 s for the three reference models). One thread is as fast
# for these shapes and robust to a busy machine.
torch.set_num_threads(1)
# and so in the processes the tests start that are not wattcap's commands (which take one
# thread themselves): examples, bench scripts, Flower's and Ray's workers; the user's own
# setting wins
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session", autouse=True)
def wattcap_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Point WATTCAP_CACHE_DIR at a session temp dir, so no test touches ~/.cache."""
    path = str(tmp_path_factory.mktemp("wattcap-cache"))
    old = os.environ.get("WATTCAP_CACHE_DIR")
    os.environ["WATTCAP_CACHE_DIR"] = path
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("WATTCAP_CACHE_DIR", None)
        else:
            os.environ["WATTCAP_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def wattcap_state_dir(tmp_path_factory: pytest.TempPathFactory,
                      monkeypatch: pytest.MonkeyPatch) -> str:
    """A state folder per test: a fake device's settings file and lock (keyed like the real
    board's) never reach another test's fake board."""
    path = str(tmp_path_factory.mktemp("wattcap-state"))
    monkeypatch.setenv("WATTCAP_STATE_DIR", path)
    return path


@pytest.fixture(scope="session")
def resnet18_workload():
    from wattcap.devices.workload import workload_for

    return workload_for("resnet18")


@pytest.fixture(scope="session")
def mobilenetv2_workload():
    from wattcap.devices.workload import workload_for

    return workload_for("mobilenetv2")


@pytest.fixture(scope="session")
def efficientvit_workload():
    from wattcap.devices.workload import workload_for

    return workload_for("efficientvit")


@pytest.fixture(scope="session")
def nano_resnet18_profile(wattcap_cache_dir: str, resnet18_workload):
    """Exhaustive ResNet18 profile of the emulated Jetson Nano (MAXN, seed 0)."""
    from wattcap.devices import EmulatedDevice
    from wattcap.measure.profiling import Profiler

    return Profiler(EmulatedDevice(NANO), "resnet18", workload=resnet18_workload).run(
        exhaustive=True
    )


@pytest.fixture(scope="session")
def nano_reference_profiles(wattcap_cache_dir: str):
    """Exhaustive profiles of every reference model on the emulated Nano (cached on disk)."""
    from wattcap.measure.references import emulated_reference_profiles

    return emulated_reference_profiles(NANO)


@pytest.fixture
def make_efficiency() -> Callable[..., object]:
    """Factory: an EfficiencyVector from {batch size: [samples per seed or None]} and a
    sample budget (20,000 unless given)."""
    from wattcap.core.efficiency import EfficiencyVector

    def make(
        samples: dict[int, list[int | None]],
        model: str = "resnet18",
        input_shape: tuple[int, ...] = (3, 32, 32),
        dataset: str = "proxy",
        sample_budget: int = 20_000,
    ) -> EfficiencyVector:
        seeds = list(range(len(next(iter(samples.values())))))
        return vector_from_samples(
            samples,
            sample_budget=sample_budget,
            model=model,
            input_shape=list(input_shape),
            dataset=dataset,
            task="image-classification",
            target_accuracy=0.8,
            seeds=seeds,
        )

    return make


#: what a test marked slow takes when its mark does not say (`pytest.mark.slow(seconds=N)`)
SLOW_TEST_S = 10


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The test files with the longest work first. `make test` hands whole files to two worker
    processes in the order they come (`--dist loadfile --no-loadscope-reorder`): the file of
    the README tour alone takes about two minutes, and started last it ran on one core while
    the other stood idle. A file's weight is the seconds its slow tests declare
    (`@pytest.mark.slow(seconds=N)`, else SLOW_TEST_S each) and a tenth of a second for each
    other test; the heaviest first, files of equal weight in their order."""
    weight: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        mark = item.get_closest_marker("slow")
        seconds = 0.1 if mark is None else float(mark.kwargs.get("seconds", SLOW_TEST_S))
        weight[path] = weight.get(path, 0.0) + seconds
    items.sort(key=lambda item: -weight[item.nodeid.split("::")[0]])
