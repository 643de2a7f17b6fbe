"""Executors: the serial path and Ray give the same files (up to timing fields); Ray is only
imported when asked for. One local Ray of 2 CPUs serves every Ray test of this module."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
import torch
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.core.efficiency import EfficiencyVector
from wattcap.experiments.compare import math_runs
from wattcap.train.efficiency import estimate_efficiency
from wattcap.train.executors import (
    ExecutorError,
    ProcessExecutor,
    RayExecutor,
    SerialExecutor,
    get_executor,
    ray_available,
)

FROM_SCRATCH = {"lr_ref": 1e-3, "batch_size_ref": 32}
TIMING_FIELDS = ("created_at", "wall_time_s")


def _untimed(data: object) -> object:
    """A file's JSON without its timing fields, at any depth."""
    if isinstance(data, dict):
        return {k: _untimed(v) for k, v in data.items() if k not in TIMING_FIELDS}
    if isinstance(data, list):
        return [_untimed(v) for v in data]
    return data


@pytest.fixture(scope="module")
def ray_executor():
    if not ray_available():
        pytest.skip("RAY IS NOT INSTALLED: the Ray executor is untested here "
                    "(pip install 'wattcap[ray]')")
    executor = RayExecutor(num_cpus=2)
    try:
        executor.start()
    except ExecutorError as err:
        warnings.warn(f"RAY COULD NOT START HERE, the Ray tests are skipped: {err}",
                      stacklevel=1)
        pytest.skip(f"RAY COULD NOT START HERE: {err}")
    yield executor
    executor.close()


def _square(x: int) -> int:
    return x * x


def test_serial_map_keeps_order_and_reports_each_task() -> None:
    seen = []
    out = SerialExecutor().map(_square, [3, 1, 2], lambda i, r: seen.append((i, r)))
    assert out == [9, 1, 4] and seen == [(0, 9), (1, 1), (2, 4)]


def test_executor_specs() -> None:
    assert isinstance(get_executor(None), SerialExecutor)
    assert isinstance(get_executor("serial"), SerialExecutor)
    local = get_executor("local")
    assert isinstance(local, RayExecutor) and local.address is None
    assert get_executor("local:3").num_cpus == 3
    assert get_executor("ray://head:10001").address == "ray://head:10001"
    assert "head" in get_executor("head:6379").describe()
    with pytest.raises(ExecutorError, match="local:N"):
        get_executor("local:many")
    with pytest.raises(ExecutorError, match="local Ray only"):
        RayExecutor(address="auto", num_cpus=2)


def test_importing_wattcap_does_not_import_ray() -> None:
    code = ("import sys, wattcap, wattcap.train.efficiency, wattcap.train.executors, "
            "wattcap.train.noise_scale, "
            "wattcap.experiments.compare, wattcap.server.jobs, wattcap.cli; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_ray_map_returns_in_order_and_reports_every_task(ray_executor) -> None:
    done = []
    out = ray_executor.map(_square, list(range(6)), lambda i, r: done.append(i))
    assert out == [i * i for i in range(6)]
    assert sorted(done) == list(range(6))


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_sweep_on_ray_equals_the_serial_sweep(ray_executor) -> None:
    settings = dict(batch_sizes=(16, 64), seeds=2, sample_budget=768, eval_every_samples=128,
                    budget_extension=2.0, **FROM_SCRATCH)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # a process's default pool: each task still trains on one thread
    try:
        serial = estimate_efficiency("digits-cnn", "digits", 0.85, **settings)
    finally:
        torch.set_num_threads(threads)
    calls = []
    on_ray = estimate_efficiency("digits-cnn", "digits", 0.85, executor=ray_executor,
                                 progress=lambda update: calls.append(update.done),
                                 **settings)
    assert _untimed(json.loads(on_ray.to_json())) == _untimed(json.loads(serial.to_json()))
    # first what the sweep will do (nothing done yet), then every task counted
    assert calls[0] == 0 and calls[1:] == list(range(1, len(calls))) and calls[-1] >= 4
    assert on_ray.training_samples == serial.training_samples > 0


def test_compare_runs_on_ray_equal_the_serial_ones(ray_executor, tmp_path) -> None:
    records = {}
    for name, executor in (("serial", SerialExecutor()), ("ray", ray_executor)):
        counters = {"trained": 0, "reused": 0}
        out = tmp_path / name
        runs = math_runs(out, "digits-cnn", None, "digits", (16, 32), 1, 0.8, 512, True,
                         counters, executor=executor)
        assert counters == {"trained": 2, "reused": 0} and list(runs) == [(16, 0), (32, 0)]
        records[name] = {p.name: _untimed(json.loads(p.read_text()))
                         for p in sorted((out / "runs").iterdir())}
    assert records["ray"] == records["serial"] and len(records["ray"]) == 2


def test_estimate_cli_with_ray_writes_the_serial_file(ray_executor, tmp_path) -> None:
    """`--ray local` joins the Ray this process already runs (the module's)."""
    runner = CliRunner()
    files = {}
    for name, extra in (("serial", []), ("ray", ["--ray", "local"])):
        out = tmp_path / f"{name}.json"
        result = runner.invoke(app, [
            "estimate", "--model", "digits-cnn", "--proxy", "digits", "--target-accuracy",
            "0.8", "--batch-sizes", "16,32", "--seeds", "1", "--sample-budget", "512",
            "--lr-ref", "1e-3", "--batch-size-ref", "32", "--out", str(out), *extra],
            env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        files[name] = _untimed(json.loads(out.read_text()))
    assert files["ray"] == files["serial"]
    assert EfficiencyVector.load(tmp_path / "ray.json").entry(16) is not None


def test_server_jobs_hand_their_trainings_to_ray(ray_executor, tmp_path) -> None:
    """A server started with --ray runs a job's sweep as Ray tasks: the stored vector is the
    one the serial job thread makes."""
    import hashlib
    import time

    import torch as th

    from wattcap.models import get_model_spec
    from wattcap.models.weights import save_weights
    from wattcap.server.jobs import JobRunner
    from wattcap.server.schemas import EstimateRequest
    from wattcap.server.store import Store
    from wattcap.server.validate import check_weights

    th.manual_seed(0)
    path = tmp_path / "w.safetensors"
    save_weights(get_model_spec("digits-cnn").build(10), path, {"model": "digits-cnn"})
    data = path.read_bytes()
    request = EstimateRequest(proxy="digits", target_accuracy=0.8, batch_sizes=[16, 32],
                              seeds=1, sample_budget=512, eval_every_samples=128,
                              lr_ref=1e-3, batch_size_ref=32)
    vectors = {}
    for name, executor in (("serial", None), ("ray", ray_executor)):
        store = Store(tmp_path / f"{name}.sqlite3")
        model, _ = store.add_model(check_weights(data, "digits-cnn"), data,
                                   hashlib.sha256(data).hexdigest())
        job = JobRunner(store, executor).submit(model.id, request)
        deadline = time.monotonic() + 300
        while (info := store.get_job(job.id)).status in ("queued", "running"):
            assert time.monotonic() < deadline, info
            time.sleep(0.2)
        assert info.status == "succeeded", info.error
        [stored] = store.list_efficiency(model_id=model.id)
        body, _ = store.get_efficiency(stored.id)
        vectors[name] = _untimed(json.loads(body))
    assert vectors["ray"] == vectors["serial"]


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_local_processes_give_the_serial_files(tmp_path) -> None:
    """The demo's executor: the same records as the serial path, each reported once, in the
    items' order."""
    assert isinstance(get_executor("processes:2"), ProcessExecutor)
    with pytest.raises(ExecutorError):
        get_executor("processes:two")
    records = {}
    for name, executor in (("serial", SerialExecutor()), ("processes", ProcessExecutor(2))):
        counters = {"trained": 0, "reused": 0}
        out = tmp_path / name
        with executor:
            seen = []
            runs = math_runs(out, "digits-cnn", None, "digits", (16, 32), 1, 0.8, 512, True,
                             counters, executor=executor,
                             progress=seen.append)
        assert counters == {"trained": 2, "reused": 0} and list(runs) == [(16, 0), (32, 0)]
        # one progress update per finished run, the record as its item, counted up to the total
        finished = [u for u in seen if u.item is not None]
        assert sorted(u.item.batch_size for u in finished) == [16, 32]
        assert [(u.done, u.total, u.unit) for u in finished] == [(1, 2, "runs"), (2, 2, "runs")]
        assert all("samples to target" in u.detail or "not reached" in u.detail
                   for u in finished)
        records[name] = {p.name: _untimed(json.loads(p.read_text()))
                         for p in sorted((out / "runs").iterdir())}
    assert records["processes"] == records["serial"] and len(records["serial"]) == 2
