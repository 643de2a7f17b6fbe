"""The real server: `python -m wattcap.cli serve` in a subprocess on a loopback port, driven by
the client, the CLI and raw httpx. Push and pull of every resource, `plan --server` against
local files, auth, bad payloads, a concurrent load, a SIGKILL during writes, and an estimate
job run by the server.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import io
import json
import os
import pickle
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import torch
from typer.testing import CliRunner

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.cli import app
from wattcap.cli.train import NOT_REACHED_EXIT_CODE
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.devices import EmulatedDevice
from wattcap.measure.profiling import Profiler
from wattcap.models import build_model
from wattcap.models.weights import file_sha256, save_weights
from wattcap.server import CHECKSUM_HEADER
from wattcap.server.client import ServerError, WattcapClient

# the real server needs the `server` extra
pytestmark = pytest.mark.skipif(importlib.util.find_spec("fastapi") is None,
                                reason="needs the server extra (fastapi)")
TOKEN = "test-token-0123456789"
#: the wait for an answer that starts or runs an estimate job: on a busy machine its first
#: request imports torch and trains, which takes far longer than httpx's 5 s default (this
#: suite checks what the server answers, not how fast)
SLOW_S = 120
MODEL = "digits-cnn"
DEVICE = "jetson-nano"
CAP = "2.7"  # W: digits-cnn on the emulated Nano spans ~2.45-2.95 W, so the cap bites
MAX_WEIGHTS_MIB = 0.25  # small limits keep the oversize tests cheap
MAX_JSON_MIB = 0.1
TINY_ESTIMATE = {"proxy": "digits", "target_accuracy": 0.8, "batch_sizes": [16, 32],
                 "seeds": 1, "sample_budget": 2048, "eval_every_samples": 512}

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# -- the server process ---------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ServerProcess:
    proc: subprocess.Popen
    url: str
    db: Path
    log: Path

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)


def start_server(db: Path, *extra: str, token: str | None = TOKEN) -> ServerProcess:
    """Start `wattcap serve` on a free loopback port and wait until /health answers."""
    env = dict(os.environ)
    env.pop("WATTCAP_SERVER_TOKEN", None)
    if token is not None:
        env["WATTCAP_SERVER_TOKEN"] = token  # the env var, as the README recommends
    # one intra-op thread: the estimate job must not fight the test process for 2 cores
    env["OMP_NUM_THREADS"] = "1"
    for _attempt in range(3):  # a free port can be taken between probe and bind
        port = _free_port()
        log = db.with_name(f"{db.stem}-{port}.log")
        with open(log, "w") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "wattcap.cli", "serve", "--host", "127.0.0.1",
                 "--port", str(port), "--db", str(db), "--log-level", "warning",
                 "--max-weights-mib", str(MAX_WEIGHTS_MIB), "--max-json-mib",
                 str(MAX_JSON_MIB), *extra],
                stdout=log_file, stderr=subprocess.STDOUT, env=env,
            )
        server = ServerProcess(proc, f"http://127.0.0.1:{port}", db, log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                    return server
            except httpx.TransportError:
                time.sleep(0.1)
        server.stop(signal.SIGKILL)
        if "address already in use" not in log.read_text().lower():
            break
    raise AssertionError(f"the server did not start:\n{log.read_text()}")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A profile, an efficiency vector and weights of digits-cnn, as local files."""
    folder = tmp_path_factory.mktemp("server-artifacts")
    profile = Profiler(EmulatedDevice(DEVICE), MODEL).run(exhaustive=True)
    profile.save(folder / "profile.json")
    vector = vector_from_samples(
        {16: [384, 448], 32: [512, 512], 64: [640, 576]}, sample_budget=2048, model=MODEL,
        input_shape=[1, 8, 8],
        dataset="digits", task="image-classification", target_accuracy=0.8, seeds=[0, 1])
    vector.save(folder / "efficiency.json")
    torch.manual_seed(0)
    save_weights(build_model(MODEL), folder / "weights.safetensors",
                 {"model": MODEL, "num_classes": "10"})
    return {"profile": folder / "profile.json", "efficiency": folder / "efficiency.json",
            "weights": folder / "weights.safetensors", "folder": folder}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path_factory.mktemp("server") / "server.sqlite3")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[WattcapClient]:
    with WattcapClient(server.url, token=TOKEN) as c:
        yield c


@pytest.fixture(scope="module")
def pushed(client: WattcapClient, artifacts: dict[str, Path]) -> dict[str, object]:
    model = client.push_weights(artifacts["weights"], architecture=MODEL)
    return {
        "model": model,
        "profile": client.push_profile(artifacts["profile"]),
        "efficiency": client.push_efficiency(artifacts["efficiency"], model_id=model.id),
    }


def _counts(client: WattcapClient) -> tuple[int, int, int]:
    return (len(client.list_models(limit=1000)), len(client.list_profiles(limit=1000)),
            len(client.list_efficiency(limit=1000)))


# -- push and pull ------------------------------------------------------------------------------
def test_every_resource_round_trips_byte_for_byte(client, artifacts, pushed, tmp_path) -> None:
    model = pushed["model"]
    assert (model.architecture, model.input_shape, model.task, model.num_classes) == (
        MODEL, [1, 8, 8], "image-classification", 10)
    assert model.sha256 == file_sha256(artifacts["weights"])
    assert client.pull_weights(model.id, tmp_path / "w.safetensors").id == model.id
    assert (tmp_path / "w.safetensors").read_bytes() == artifacts["weights"].read_bytes()

    profile = client.pull_profile(pushed["profile"].id, dest=tmp_path / "p.json")
    assert (tmp_path / "p.json").read_text() == artifacts["profile"].read_text()
    assert profile == ProfileTable.load(artifacts["profile"])
    assert client.latest_profile(DEVICE, MODEL).id == pushed["profile"].id
    assert client.latest_profile("jetson-tx2nx", MODEL) is None

    vector = client.pull_efficiency(pushed["efficiency"].id)
    assert vector == EfficiencyVector.load(artifacts["efficiency"])
    found = client.latest_efficiency(MODEL, dataset="digits", target_accuracy=0.8)
    assert found.id == pushed["efficiency"].id
    assert found.model_id == model.id


def test_pushing_the_same_thing_again_stores_nothing_new(client, artifacts, pushed) -> None:
    before = _counts(client)
    assert client.push_weights(artifacts["weights"], architecture=MODEL).id == pushed["model"].id
    assert client.push_profile(artifacts["profile"]).id == pushed["profile"].id
    assert _counts(client) == before


def test_cli_push_and_pull(server, artifacts, pushed, tmp_path) -> None:
    result = invoke("push", "profile", artifacts["profile"], "--server", server.url,
                    "--token", TOKEN)
    assert result.exit_code == 0, result.output
    assert f"stored as profile {pushed['profile'].id}" in _flat(result.output)
    out = tmp_path / "pulled.json"
    result = invoke("pull", "profile", "--device-name", DEVICE, "--model", MODEL, "--out", out,
                    "--server", server.url)
    assert result.exit_code == 0, result.output
    assert ProfileTable.load(out) == ProfileTable.load(artifacts["profile"])
    result = invoke("pull", "weights", "--model", MODEL, "--out", tmp_path / "w.safetensors",
                    "--server", server.url)
    assert result.exit_code == 0, result.output
    assert file_sha256(tmp_path / "w.safetensors") == pushed["model"].sha256
    result = invoke("push", "weights", artifacts["weights"], "--model", MODEL,
                    "--server", server.url, "--token", "not-the-token")
    assert result.exit_code == 2
    assert "403" in _flat(result.output)


# -- the device side ----------------------------------------------------------------------------
def test_plan_from_the_server_equals_the_plan_from_local_files(server, artifacts, pushed
                                                               ) -> None:
    local = invoke("plan", "--profile", artifacts["profile"], "--efficiency",
                   artifacts["efficiency"], "--power-cap", CAP, "--json")
    assert local.exit_code == 0, local.output
    remote = invoke("plan", "--server", server.url, "--device-name", DEVICE, "--model", MODEL,
                    "--power-cap", CAP, "--json")
    assert remote.exit_code == 0, remote.output
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    assert json.loads(remote.stdout)["peak_power_w"] <= float(CAP)


def test_plan_from_a_server_without_the_profile_says_what_to_do(server, pushed) -> None:
    result = invoke("plan", "--server", server.url, "--device-name", "jetson-tx2nx", "--model",
                    MODEL, "--power-cap", CAP)
    assert result.exit_code == 2
    assert "no profile of jetson-tx2nx" in _flat(result.output)


def test_train_with_server_fetches_profile_vector_and_weights(server, pushed, tmp_path) -> None:
    result = invoke("train", "--server", server.url, "--device", f"emulated:{DEVICE}",
                    "--model", MODEL, "--data", "digits", "--power-cap", CAP,
                    "--target-accuracy", "0.8", "--sample-budget", "1024", "--eval-every", "512",
                    "--out", tmp_path / "run.json")
    reached = json.loads((tmp_path / "run.json").read_text())["reached"]
    assert result.exit_code == (0 if reached else NOT_REACHED_EXIT_CODE), result.output
    # the weights the fetched vector was estimated from
    assert f"weights: model {pushed['model'].id}" in _flat(result.output)
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["weights_source"].endswith(".safetensors")
    assert record["power_cap_w"] == float(CAP)


# -- auth ---------------------------------------------------------------------------------------
def test_writes_need_the_right_token_and_reads_are_open(server, client, artifacts, pushed
                                                       ) -> None:
    body = artifacts["profile"].read_bytes()
    before = _counts(client)
    missing = httpx.post(f"{server.url}/profiles", content=body)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = httpx.post(f"{server.url}/profiles", content=body,
                       headers={"Authorization": "Bearer wrong-token-xyz"})
    assert wrong.status_code == 403
    job = httpx.post(f"{server.url}/models/{pushed['model'].id}/estimate", json=TINY_ESTIMATE)
    assert job.status_code == 401
    assert httpx.get(f"{server.url}/profiles").status_code == 200
    assert httpx.get(f"{server.url}/models/{pushed['model'].id}/weights").status_code == 200
    assert _counts(client) == before


def test_private_reads_need_the_token_too(tmp_path: Path) -> None:
    private = start_server(tmp_path / "private.sqlite3", "--private-reads")
    try:
        assert httpx.get(f"{private.url}/health").status_code == 200  # readiness stays open
        assert httpx.get(f"{private.url}/profiles").status_code == 401
        assert httpx.get(f"{private.url}/profiles",
                         headers={"Authorization": "Bearer wrong-token-xyz"}).status_code == 403
        with pytest.raises(ServerError) as err:
            WattcapClient(private.url).list_models()
        assert err.value.status_code == 401
        assert WattcapClient(private.url, token=TOKEN).list_models() == []
    finally:
        private.stop()



def test_pull_list_says_when_the_server_holds_nothing(tmp_path: Path, artifacts) -> None:
    fresh = start_server(tmp_path / "fresh.sqlite3")
    try:
        def cli(*args: str) -> str:
            result = invoke(*args, "--server", fresh.url)
            assert result.exit_code == 0, result.output
            return _flat(result.output)

        assert f"the server at {fresh.url} holds nothing yet" in cli("pull", "list")
        assert f"the server at {fresh.url} holds no profiles yet" in cli("pull", "list",
                                                                         "profiles")
        assert "stored as profile" in cli("push", "profile", str(artifacts["profile"]),
                                          "--token", TOKEN)
        listed = cli("pull", "list")
        assert f"profile 1: {MODEL} on {DEVICE}" in listed
        assert "holds nothing" not in listed
        assert "holds no profiles" not in cli("pull", "list", "profiles")
        assert f"the server at {fresh.url} holds no models yet" in cli("pull", "list", "models")
    finally:
        fresh.stop()

# -- bad payloads -------------------------------------------------------------------------------
class _OpensAFile:
    """Unpickling this calls open(path, 'w'): the file appearing would prove an unpickle."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):  # noqa: ANN204
        return (open, (str(self.path), "w"))


def _post_weights(url: str, data: bytes, architecture: str = MODEL, **params: object
                  ) -> httpx.Response:
    return httpx.post(f"{url}/models", content=data,
                      params={"architecture": architecture, **params},
                      headers={"Authorization": f"Bearer {TOKEN}",
                               CHECKSUM_HEADER: hashlib.sha256(data).hexdigest()})


def _post_json(url: str, path: str, text: str) -> httpx.Response:
    return httpx.post(f"{url}{path}", content=text.encode(),
                      headers={"Authorization": f"Bearer {TOKEN}",
                               "Content-Type": "application/json"})


def test_bad_payloads_are_refused_and_nothing_is_stored(server, client, artifacts, pushed,
                                                        tmp_path) -> None:
    before = _counts(client)
    url = server.url
    profile_raw = json.loads(artifacts["profile"].read_text())

    # wrong schema version, wrong kind, corrupt JSON
    answer = _post_json(url, "/profiles", json.dumps({**profile_raw, "schema_version": 99}))
    assert answer.status_code == 422
    assert "schema version 99" in answer.json()["detail"]
    answer = _post_json(url, "/profiles", artifacts["efficiency"].read_text())
    assert answer.status_code == 422
    assert "expected 'wattcap.profile'" in answer.json()["detail"]
    answer = _post_json(url, "/efficiency-vectors", '{"kind": "wattcap.efficiency", ')
    assert answer.status_code == 422
    assert "not valid JSON" in answer.json()["detail"]

    # weights whose tensors do not match the declared model
    torch.manual_seed(0)
    from safetensors.torch import save

    small_head = save({k: v.contiguous() for k, v in build_model(MODEL, 5).state_dict().items()})
    answer = _post_weights(url, small_head, num_classes=10)
    assert answer.status_code == 422
    assert "wrong shape" in answer.json()["detail"]
    answer = _post_weights(url, artifacts["weights"].read_bytes(), architecture="digits32-cnn")
    assert answer.status_code == 422

    # pickles posing as weights: refused, and never unpickled
    marker = tmp_path / "unpickled"
    answer = _post_weights(url, pickle.dumps({"w": _OpensAFile(marker)}))
    assert answer.status_code == 422
    assert "pickle" in answer.json()["detail"]
    buffer = io.BytesIO()
    torch.save(build_model(MODEL).state_dict(), buffer)
    answer = _post_weights(url, buffer.getvalue())
    assert answer.status_code == 422
    assert "torch.save" in answer.json()["detail"]
    assert not marker.exists()

    # a checksum that does not match, and none at all
    data = artifacts["weights"].read_bytes()
    answer = httpx.post(f"{url}/models", content=data, params={"architecture": MODEL},
                        headers={"Authorization": f"Bearer {TOKEN}", CHECKSUM_HEADER: "0" * 64})
    assert answer.status_code == 400
    answer = httpx.post(f"{url}/models", content=data, params={"architecture": MODEL},
                        headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 400

    # oversize: declared by Content-Length, and streamed without one
    too_big = b"\0" * int(MAX_WEIGHTS_MIB * 2**20 + 1)
    assert _post_weights(url, too_big).status_code == 413
    big_json = json.dumps({**profile_raw, "pad": "x" * int(MAX_JSON_MIB * 2**20)})
    assert _post_json(url, "/profiles", big_json).status_code == 413

    def chunks():  # no Content-Length: the server must count the stream
        for _ in range(4):
            yield b"\0" * int(MAX_WEIGHTS_MIB * 2**20 / 3)

    answer = httpx.post(f"{url}/models", content=chunks(), params={"architecture": MODEL},
                        headers={"Authorization": f"Bearer {TOKEN}", CHECKSUM_HEADER: "0" * 64})
    assert answer.status_code == 413

    assert _counts(client) == before


# -- load, then a kill during writes ------------------------------------------------------------
def _profile_variant(base: str, i: int) -> str:
    """A distinct, valid profile (its created_at differs), so each write stores a new row."""
    raw = json.loads(base)
    raw["created_at"] = f"2024-01-01T00:00:00.{i:06d}+00:00"
    return json.dumps(raw)


def test_concurrent_reads_and_writes_are_all_answered_correctly(server, client, artifacts,
                                                                pushed) -> None:
    weights_sha = pushed["model"].sha256
    profile_sha = pushed["profile"].sha256
    base = artifacts["profile"].read_text()
    profiles_before = len(client.list_profiles(limit=1000))
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    async def load() -> tuple[list[httpx.Response], list[httpx.Response]]:
        limits = httpx.Limits(max_connections=64)  # bounded: the rest queue in the pool
        async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60) as http:
            reads = []
            for i in range(200):
                if i % 2:
                    reads.append(http.get(f"/models/{pushed['model'].id}/weights"))
                else:
                    reads.append(http.get(f"/profiles/{pushed['profile'].id}"))
            writes = [http.post("/profiles", content=_profile_variant(base, i).encode(),
                                headers=headers) for i in range(20)]
            answers = await asyncio.gather(*reads, *writes)
            return answers[:200], answers[200:]

    reads, writes = asyncio.run(load())
    for i, answer in enumerate(reads):
        assert answer.status_code == 200
        expected = weights_sha if i % 2 else profile_sha
        assert hashlib.sha256(answer.content).hexdigest() == expected
    assert [w.status_code for w in writes] == [201] * 20
    ids = {w.json()["id"] for w in writes}
    assert len(ids) == 20
    stored = {p.id for p in client.list_profiles(limit=1000)}
    assert ids <= stored
    assert len(stored) == profiles_before + 20


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_acknowledged_writes_survive_a_sigkill(tmp_path, artifacts) -> None:
    db = tmp_path / "kill.sqlite3"
    first = start_server(db)
    base = artifacts["profile"].read_text()
    acked: dict[int, str] = {}
    lock = threading.Lock()
    stop = threading.Event()
    counter = iter(range(10**6))

    def writer() -> None:
        with httpx.Client(base_url=first.url, timeout=10,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            while not stop.is_set():
                body = _profile_variant(base, next(counter)).encode()
                try:
                    answer = http.post("/profiles", content=body)
                except httpx.TransportError:
                    return  # the server died mid-request: not acknowledged
                if answer.status_code == 201:
                    with lock:
                        acked[answer.json()["id"]] = hashlib.sha256(body).hexdigest()

    threads = [threading.Thread(target=writer) for _ in range(6)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 40 and time.monotonic() < deadline:
        time.sleep(0.02)
    first.proc.send_signal(signal.SIGKILL)  # writes are in flight
    first.proc.wait(timeout=10)
    stop.set()
    for t in threads:
        t.join(timeout=15)
    assert len(acked) >= 40, first.log.read_text()

    second = start_server(db)
    try:
        with WattcapClient(second.url) as again:
            stored = {p.id: p.sha256 for p in again.list_profiles(limit=1000)}
            assert {i: stored.get(i) for i in acked} == acked
            # the newest acknowledged row reads back whole (its checksum is verified on pull)
            assert again.pull_profile(max(acked)).points == ProfileTable.from_json(base).points
        with WattcapClient(second.url, token=TOKEN) as writer_again:
            variant = ProfileTable.from_json(_profile_variant(base, 10**6))
            assert writer_again.push_profile(variant).id > max(stored)
    finally:
        second.stop()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- the estimate job ---------------------------------------------------------------------------
def test_the_server_estimates_the_efficiency_vector_itself(server, client, pushed) -> None:
    model_id = pushed["model"].id
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = httpx.post(f"{server.url}/models/{model_id}/estimate", json=TINY_ESTIMATE,
                        headers=headers, timeout=SLOW_S)
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["id"]
    assert answer.json()["status"] in ("queued", "running")
    deadline = time.monotonic() + SLOW_S
    while True:
        job = httpx.get(f"{server.url}/jobs/{job_id}", timeout=SLOW_S).json()
        if job["status"] not in ("queued", "running") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert job["status"] == "succeeded", job
    vector = client.pull_efficiency(job["efficiency_id"])
    assert (vector.model, vector.dataset, vector.target_accuracy) == (MODEL, "digits", 0.8)
    assert [e.batch_size for e in vector.entries] == [16, 32]
    assert any(f"job {job_id}" in note for note in vector.notes)
    linked = client.list_efficiency(model_id=model_id)
    assert job["efficiency_id"] in {e.id for e in linked}


def test_estimate_requests_are_checked_before_a_job_starts(server, client, pushed) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    jobs_before = len(client.list_jobs())
    url = f"{server.url}/models/{pushed['model'].id}/estimate"
    unknown = httpx.post(url, json={**TINY_ESTIMATE, "proxy": "no-such-data"},
                         headers=headers, timeout=SLOW_S)
    assert unknown.status_code == 422
    assert "unknown dataset" in unknown.json()["detail"]
    shape = httpx.post(url, json={**TINY_ESTIMATE, "proxy": "digits-32"},
                       headers=headers, timeout=SLOW_S)
    assert shape.status_code == 422
    assert "input shape" in shape.json()["detail"]
    bounds = httpx.post(url, json={**TINY_ESTIMATE, "seeds": 0}, headers=headers, timeout=SLOW_S)
    assert bounds.status_code == 422
    missing = httpx.post(f"{server.url}/models/999999/estimate", json=TINY_ESTIMATE,
                         headers=headers, timeout=SLOW_S)
    assert missing.status_code == 404
    no_root = httpx.post(url, json={**TINY_ESTIMATE, "proxy": "mnist:/etc"},
                         headers=headers, timeout=SLOW_S)
    assert no_root.status_code == 422
    assert "reads no data from paths" in no_root.json()["detail"]
    assert len(client.list_jobs()) == jobs_before


def test_estimate_cli_on_the_server_and_locally_with_push(server, client, pushed,
                                                           tmp_path) -> None:
    common = ["--model", MODEL, "--proxy", "digits", "--target-accuracy", "0.8",
              "--batch-sizes", "16,32", "--seeds", "1", "--sample-budget", "2048",
              "--eval-every", "512", "--server", server.url, "--token", TOKEN]
    result = invoke("estimate", *common, "--on-server", "--out", tmp_path / "remote.json")
    assert result.exit_code == 0, result.output
    remote = EfficiencyVector.load(tmp_path / "remote.json")
    assert any("estimated by the wattcap server" in n for n in remote.notes)

    before = len(client.list_efficiency(model_id=pushed["model"].id))
    result = invoke("estimate", *common, "--push", "--out", tmp_path / "local.json")
    assert result.exit_code == 0, result.output
    local = EfficiencyVector.load(tmp_path / "local.json")
    # same weights, same data, same seeds: the device-side sweep finds what the server found
    assert [e.samples_per_seed for e in local.entries] == [
        e.samples_per_seed for e in remote.entries]
    assert len(client.list_efficiency(model_id=pushed["model"].id)) == before + 1


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_a_server_with_a_data_root_estimates_on_files_under_it_only(tmp_path, artifacts) -> None:
    from tests.data_files import class_images, write_mnist

    root = tmp_path / "datasets"
    images, labels = class_images(200, (1, 28, 28), num_classes=10, seed=3)
    write_mnist(root / "mnist", images, labels)
    outside = tmp_path / "elsewhere"
    write_mnist(outside, images, labels)
    (root / "sneaky").symlink_to(outside, target_is_directory=True)
    proc = start_server(tmp_path / "rooted.sqlite3", "--data-root", root)
    try:
        with WattcapClient(proc.url, token=TOKEN) as client:
            model = client.push_weights(artifacts["weights"], architecture=MODEL)
            url = f"{proc.url}/models/{model.id}/estimate"
            headers = {"Authorization": f"Bearer {TOKEN}"}
            request = {**TINY_ESTIMATE, "target_accuracy": 0.2, "input_shape": [1, 8, 8],
                       "subset_fraction": 0.5}
            for proxy in (f"mnist:{outside}", f"mnist:{root}/sneaky", f"mnist:{root}/../elsewhere"):
                refused = httpx.post(url, json={**request, "proxy": proxy},
                                     headers=headers, timeout=SLOW_S)
                assert refused.status_code == 422, proxy
                assert "outside this server's data root" in refused.json()["detail"]
            shape = httpx.post(url, json={**request, "proxy": f"mnist:{root}/mnist",
                                          "input_shape": None}, headers=headers, timeout=SLOW_S)
            assert shape.status_code == 422 and "input shape" in shape.json()["detail"]
            started = httpx.post(url, json={**request, "proxy": f"mnist:{root}/mnist"},
                                 headers=headers, timeout=SLOW_S)
            assert started.status_code == 202, started.text
            job = client.wait_job(started.json()["id"], timeout_s=300)
            assert job.status == "succeeded", job.error
            vector = client.pull_efficiency(job.efficiency_id)
            assert vector.dataset == f"mnist:{root}/mnist" and vector.input_shape == [1, 8, 8]
    finally:
        proc.stop()


def test_plan_from_a_server_names_its_vector_and_refuses_an_ambiguous_one(
    artifacts: dict[str, Path], tmp_path: Path
) -> None:
    proc = start_server(tmp_path / "server.sqlite3")
    try:
        with WattcapClient(proc.url, token=TOKEN) as own:
            own.push_profile(artifacts["profile"])
            first = own.push_efficiency(artifacts["efficiency"])
            other = EfficiencyVector.load(artifacts["efficiency"])
            other.target_accuracy = 0.9  # the same model, another target: another r_b
            second = own.push_efficiency(other)
        args = ("plan", "--server", proc.url, "--device-name", DEVICE, "--model", MODEL,
                "--power-cap", CAP, "--json")
        refused = invoke(*args)
        assert refused.exit_code == 2
        text = _flat(refused.output)
        assert f"id {first.id}: proxy digits, target 0.8" in text
        assert f"id {second.id}: proxy digits, target 0.9" in text
        assert "name one with --proxy and --target-accuracy" in text
        chosen = invoke(*args, "--target-accuracy", "0.9")
        assert chosen.exit_code == 0, chosen.output
        assert f"efficiency vector: id {second.id} from {proc.url} (proxy digits, target 0.9" \
            in _flat(chosen.stderr)
        assert json.loads(chosen.stdout)["power_cap_w"] == float(CAP)  # stdout stays JSON
    finally:
        proc.stop()
