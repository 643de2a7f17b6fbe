"""Where independent trainings run: one after another in this process (`SerialExecutor`, the
default, no extra package), in a pool of local worker processes (`ProcessExecutor`: the
standard library, one task per core), or as Ray tasks (`RayExecutor`, the optional extra
`wattcap[ray]`) on a local Ray or on a cluster.

A proxy sweep and the comparison harness train many runs that depend on nothing but their
inputs (model, data, weights, batch size, seed): each is a pure function, so where it runs
does not change its result. Both take an `Executor` and call `map(fn, items, on_done)`; the
results come back in the items' order, whatever order the tasks finish in, so the files they
make are the same on either path (up to timing fields).

Ray workers are other processes: each task sets torch to `threads_per_task` threads (1: two
tasks on two cores do not fight over them, and a run computes the same numbers as in a
process with one thread) and sees this process's WATTCAP_CACHE_DIR. `fn` and the items travel
by pickling: module-level functions and plain data. Ray is imported only when a RayExecutor
starts, so `import wattcap` never loads it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from wattcap.core.errors import WattcapError

T = TypeVar("T")
R = TypeVar("R")

#: CPUs of a local Ray started by wattcap when none is given (CI machines have 2)
DEFAULT_LOCAL_CPUS = 2
_INSTALL_HINT = "Ray is not installed: pip install 'wattcap[ray]' (or run without --ray)"


class ExecutorError(WattcapError, RuntimeError):
    """An executor cannot start (Ray missing, no cluster at the address, a bad spec)."""


class Executor(ABC):
    """Runs independent tasks; see the module docstring."""

    @abstractmethod
    def map(self, fn: Callable[[T], R], items: Sequence[T],
            on_done: Callable[[int, R], None] | None = None) -> list[R]:
        """`[fn(item) for item in items]`; `on_done(index, result)` is called in this process
        as each task finishes (in the order they finish)."""

    @abstractmethod
    def describe(self) -> str:
        """Where the tasks run, for messages and notes."""

    def start(self) -> Executor:  # noqa: B027 - nothing to start by default
        """Start now what `map` would start on first use (raises ExecutorError); returns self."""
        return self

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release what the executor started (a local Ray)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SerialExecutor(Executor):
    """Every task in this process, one after another, in the items' order."""

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            on_done: Callable[[int, R], None] | None = None) -> list[R]:
        results = []
        for i, item in enumerate(items):
            result = fn(item)
            results.append(result)
            if on_done is not None:
                on_done(i, result)
        return results

    def describe(self) -> str:
        return "serial (this process)"


def _pin_threads(threads: int) -> None:
    """A pool worker's initializer: torch threads pinned before any task."""
    import torch

    torch.set_num_threads(threads)


class ProcessExecutor(Executor):
    """Tasks in `processes` local worker processes (spawned: torch is not fork-safe), each
    with `threads_per_task` torch threads; they inherit this process's environment
    (WATTCAP_CACHE_DIR). On a machine with a core per process, N independent trainings take
    about 1/N of the serial time, and compute the same numbers (one thread each)."""

    def __init__(self, processes: int = 2, threads_per_task: int = 1) -> None:
        if processes < 1 or threads_per_task < 1:
            raise ExecutorError("processes and threads_per_task must be at least 1")
        self.processes = processes
        self.threads_per_task = threads_per_task
        self._pool: Any = None

    def start(self) -> ProcessExecutor:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                self.processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=_pin_threads, initargs=(self.threads_per_task,))
        return self

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            on_done: Callable[[int, R], None] | None = None) -> list[R]:
        if not items:
            return []
        from concurrent.futures import FIRST_COMPLETED, wait

        self.start()
        futures = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
        results: list[Any] = [None] * len(items)
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=futures.__getitem__):
                    i = futures[future]
                    results[i] = future.result()
                    if on_done is not None:
                        on_done(i, results[i])
        except BaseException:
            for future in pending:  # an error or Ctrl-C: start nothing more
                future.cancel()
            raise
        return results

    def describe(self) -> str:
        return f"{self.processes} local processes"

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        self._pool = None


def _in_worker(fn: Callable[[Any], Any], item: Any, threads: int) -> Any:
    """A task's body in a Ray worker: torch threads pinned, then the pure function."""
    import torch

    torch.set_num_threads(threads)
    return fn(item)


class RayExecutor(Executor):
    """Tasks as Ray tasks of `cpus_per_task` CPUs each.

    `address` None starts a local Ray of `num_cpus` CPUs (default 2) in this process and shuts
    it down on `close`; an address ("auto", "HOST:PORT", "ray://HOST:10001") joins a running
    cluster, which is left running. A Ray already initialised in this process is used as it
    is (and left running)."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 cpus_per_task: float = 1.0, threads_per_task: int = 1) -> None:
        if num_cpus is not None and num_cpus < 1:
            raise ExecutorError(f"a local Ray needs at least 1 CPU, got {num_cpus}")
        if address is not None and num_cpus is not None:
            raise ExecutorError("num_cpus applies to a local Ray only, not to a cluster address")
        if cpus_per_task <= 0 or threads_per_task < 1:
            raise ExecutorError("cpus_per_task must be > 0 and threads_per_task >= 1")
        self.address = address
        self.num_cpus = num_cpus
        self.cpus_per_task = cpus_per_task
        self.threads_per_task = threads_per_task
        self._ray: Any = None
        self._owns = False

    def start(self) -> RayExecutor:
        self._start()
        return self

    def _start(self) -> Any:
        if self._ray is not None:
            return self._ray
        try:
            import ray
        except ImportError:
            raise ExecutorError(_INSTALL_HINT) from None
        from wattcap.measure.references import cache_dir

        if not ray.is_initialized():
            env = {"WATTCAP_CACHE_DIR": str(cache_dir()),
                   "OMP_NUM_THREADS": str(self.threads_per_task),
                   "MKL_NUM_THREADS": str(self.threads_per_task)}
            options: dict[str, Any] = {
                "include_dashboard": False, "log_to_driver": False,
                "runtime_env": {"env_vars": env}, "logging_level": "warning",
            }
            if self.address is None:
                options["num_cpus"] = self.num_cpus or DEFAULT_LOCAL_CPUS
            else:
                options["address"] = self.address
            try:
                ray.init(**options)
            except (ConnectionError, RuntimeError, ValueError) as err:
                where = "a local Ray" if self.address is None else f"Ray at {self.address}"
                raise ExecutorError(f"could not start {where}: {err}") from None
            self._owns = self.address is None
        self._ray = ray
        return ray

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            on_done: Callable[[int, R], None] | None = None) -> list[R]:
        if not items:
            return []
        ray = self._start()
        task = ray.remote(num_cpus=self.cpus_per_task, max_retries=0)(_in_worker)
        fn_ref = ray.put(fn)
        refs = [task.remote(fn_ref, item, self.threads_per_task) for item in items]
        index = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    i = index[ref]
                    results[i] = ray.get(ref)
                    if on_done is not None:
                        on_done(i, results[i])
        except BaseException:
            for ref in pending:  # an error or Ctrl-C: do not leave the others running
                ray.cancel(ref, force=True)
            raise
        return results

    def describe(self) -> str:
        if self.address is not None:
            return f"Ray at {self.address}"
        return f"local Ray ({self.num_cpus or DEFAULT_LOCAL_CPUS} CPUs)"

    def close(self) -> None:
        if self._ray is not None and self._owns:
            self._ray.shutdown()
        self._ray = None
        self._owns = False


def get_executor(spec: str | None) -> Executor:
    """An executor from a command-line spec: None or "serial": this process; "processes:N": N
    local worker processes; "local": a local Ray of 2 CPUs ("local:N": N CPUs); anything else
    is a Ray cluster address ("auto", "HOST:PORT", "ray://HOST:10001")."""
    if spec is None or spec.strip().lower() in ("", "serial"):
        return SerialExecutor()
    text = spec.strip()
    if text.lower().startswith("processes:"):
        try:
            return ProcessExecutor(int(text.split(":", 1)[1]))
        except ValueError:
            raise ExecutorError(f"'processes:N' needs a number of processes, got {spec!r}"
                                ) from None
    if text.lower() == "local":
        return RayExecutor()
    if text.lower().startswith("local:"):
        try:
            cpus = int(text.split(":", 1)[1])
        except ValueError:
            raise ExecutorError(f"'local:N' needs a number of CPUs, got {spec!r}") from None
        return RayExecutor(num_cpus=cpus)
    return RayExecutor(address=text)


def ray_available() -> bool:
    """Whether the optional Ray extra is installed (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("ray") is not None


__all__ = [
    "DEFAULT_LOCAL_CPUS", "Executor", "ExecutorError", "ProcessExecutor", "RayExecutor",
    "SerialExecutor",
    "get_executor", "ray_available",
]
