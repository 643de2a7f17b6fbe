"""The server's parts in-process (no subprocess, no network): the upload checks, the SQLite
store, the app's auth for a read-only server and its docs, and that the core CLI needs none of
the server's dependencies. The real server over loopback is tested in test_server.py.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.core.efficiency import EfficiencyVector
from wattcap.models import build_model
from wattcap.server.schemas import EstimateRequest
from wattcap.server.store import Store
from wattcap.server.validate import (
    ChecksumError,
    PayloadError,
    check_efficiency,
    check_profile,
    check_weights,
    parse_safetensors_header,
    sha256_hex,
    verify_checksum,
)

MODEL = "digits-cnn"


def _has_server_extra() -> bool:
    try:
        import fastapi  # noqa: F401
    except ImportError:
        return False
    return True


#: the app's tests need the `server` extra; the checks and the store above it do not
needs_server_extra = pytest.mark.skipif(not _has_server_extra(),
                                        reason="needs the server extra (fastapi)")


def _weights(model: str = MODEL, num_classes: int = 10, seed: int = 0,
             metadata: dict[str, str] | None = None) -> bytes:
    from safetensors.torch import save

    torch.manual_seed(seed)
    net = build_model(model, num_classes)
    state = {k: v.detach().contiguous() for k, v in net.state_dict().items()}
    return save(state, metadata=metadata)


class _OpensAFile:
    """Unpickling this calls open(path, 'w'): proof of unpickling if the file appears."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):  # noqa: ANN204
        return (open, (str(self.path), "w"))


# -- weights ---------------------------------------------------------------------------------
def test_good_weights_pass_and_report_the_model() -> None:
    checked = check_weights(_weights(metadata={"model": MODEL, "num_classes": "10"}), MODEL)
    assert checked.input_shape == [1, 8, 8]
    assert checked.task == "image-classification"
    assert checked.num_classes == 10
    assert checked.metadata["model"] == MODEL


def test_weights_of_the_wrong_shapes_are_refused() -> None:
    with pytest.raises(PayloadError, match="wrong shape.*head"):
        check_weights(_weights(num_classes=5), MODEL, num_classes=10)


def test_weights_of_another_architecture_are_refused() -> None:
    with pytest.raises(PayloadError, match="missing .* tensors|unexpected"):
        check_weights(_weights("digits32-cnn"), MODEL)


def test_metadata_naming_another_model_is_refused() -> None:
    with pytest.raises(PayloadError, match="metadata says model 'resnet18'"):
        check_weights(_weights(metadata={"model": "resnet18"}), MODEL)


def test_a_pickle_posing_as_weights_is_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    payload = pickle.dumps({"weight": _OpensAFile(marker)})
    with pytest.raises(PayloadError, match="pickle"):
        check_weights(payload, MODEL)
    assert not marker.exists()


def test_torch_save_output_is_refused_as_a_zip_archive() -> None:
    buffer = io.BytesIO()
    torch.save(build_model(MODEL).state_dict(), buffer)
    with pytest.raises(PayloadError, match="zip archive"):
        check_weights(buffer.getvalue(), MODEL)


def test_safetensors_with_bytes_outside_its_tensors_are_refused() -> None:
    good = _weights()
    with pytest.raises(PayloadError, match="longer than its tensors"):
        parse_safetensors_header(good + b"\x00" * 16)
    (header_len,) = struct.unpack("<Q", good[:8])
    with pytest.raises(PayloadError, match="declare"):
        parse_safetensors_header(struct.pack("<Q", header_len + 10**6) + good[8:])


def test_checksums_are_verified() -> None:
    data = b"abc"
    assert verify_checksum(data, sha256_hex(data).upper(), required=True) == sha256_hex(data)
    with pytest.raises(ChecksumError, match="mismatch"):
        verify_checksum(data, "0" * 64, required=False)
    with pytest.raises(ChecksumError, match="must declare"):
        verify_checksum(data, None, required=True)


# -- JSON payloads ---------------------------------------------------------------------------
def _vector_json(**changes: object) -> str:

    vector = vector_from_samples(
        {16: [400], 32: [512]}, sample_budget=2048, model=MODEL, input_shape=[1, 8, 8],
        dataset="digits", task="image-classification", target_accuracy=0.8, seeds=[0])
    raw = json.loads(vector.to_json())
    raw.update(changes)
    return json.dumps(raw)


def test_json_payloads_are_validated_like_files() -> None:
    assert check_efficiency(_vector_json()).model == MODEL
    newer = EfficiencyVector.SCHEMA_VERSION + 1
    with pytest.raises(PayloadError, match=f"schema version {newer}"):
        check_efficiency(_vector_json(schema_version=newer))
    with pytest.raises(PayloadError, match="input shape"):
        check_efficiency(_vector_json(input_shape=[3, 32, 32]))
    with pytest.raises(PayloadError, match="expected 'wattcap.profile'"):
        check_profile(_vector_json())
    with pytest.raises(PayloadError, match="not valid JSON"):
        check_profile('{"kind": ')


def test_uploads_naming_user_code_never_import_it(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    code = tmp_path / "evil.py"
    code.write_text(f"open({str(marker)!r}, 'w').close()\n"
                    "from torch import nn\n"
                    "def build():\n    return nn.Linear(64, 10)\n")
    with pytest.raises(PayloadError, match="is a user's code; only built-in models"):
        check_weights(_weights(), f"{code}:build")
    with pytest.raises(PayloadError, match="only built-in models"):
        check_weights(_weights(), "os:abort")
    vector = check_efficiency(_vector_json(model=f"{code}:build"))
    assert vector.model == f"{code}:build"  # stored as data, unchecked: the server has no code
    assert not marker.exists()


# -- store -----------------------------------------------------------------------------------
def test_store_is_durable_by_configuration_and_idempotent(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    db = store._db
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    data = _weights(metadata={"model": MODEL})
    checked = check_weights(data, MODEL)
    first, created = store.add_model(checked, data, sha256_hex(data))
    again, created_again = store.add_model(checked, data, sha256_hex(data))
    assert (created, created_again) == (True, False)
    assert again.id == first.id
    assert store.get_weights(first.id) == (data, sha256_hex(data))
    assert [m.id for m in store.list_models(architecture=MODEL, input_shape=[1, 8, 8])] == [
        first.id]
    assert store.list_models(architecture="resnet18") == []
    assert store.integrity_check() == "ok"
    store.close()


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    data = _weights()
    checked = check_weights(data, MODEL)
    with pytest.raises(RuntimeError), store._write() as db:
        db.execute("INSERT INTO models (architecture, input_shape, task, num_classes, sha256, "
                   "size_bytes, metadata, weights, created_at) VALUES "
                   "('x', '[]', 't', 2, 's', 0, '{}', x'', 'now')")
        raise RuntimeError("crash mid-transaction")
    assert store.list_models() == []
    assert store.add_model(checked, data, sha256_hex(data))[1]
    store.close()


@needs_server_extra
def test_jobs_left_running_by_a_dead_server_are_marked_interrupted(tmp_path: Path) -> None:
    from wattcap.server.app import ServerSettings, create_app

    path = tmp_path / "db.sqlite3"
    store = Store(path)
    data = _weights()
    model, _ = store.add_model(check_weights(data, MODEL), data, sha256_hex(data))
    job = store.create_job(model.id, EstimateRequest(proxy="digits", target_accuracy=0.8))
    store.update_job(job.id, status="running")
    store.close()
    app = create_app(ServerSettings(db=path, token="a-long-token"))
    after = app.state.store.get_job(job.id)
    assert after.status == "interrupted"
    assert "stopped" in after.error
    app.state.store.close()


# -- app in-process --------------------------------------------------------------------------
@needs_server_extra
@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_a_server_without_token_is_read_only_and_documents_its_api(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from wattcap.server.app import ServerSettings, create_app

    app = create_app(ServerSettings(db=tmp_path / "db.sqlite3"))
    with TestClient(app) as client:
        health = client.get("/health").json()
        assert health["writes_enabled"] is False
        refused = client.post("/profiles", content=b"{}",
                              headers={"Authorization": "Bearer whatever-token"})
        assert refused.status_code == 403
        assert "without a token" in refused.json()["detail"]
        assert client.get("/profiles").json() == []
        assert client.get("/docs").status_code == 200
        paths = set(client.get("/openapi.json").json()["paths"])
        assert {"/models", "/models/{model_id}/weights", "/models/{model_id}/estimate",
                "/efficiency-vectors", "/profiles/{profile_id}", "/jobs/{job_id}",
                "/health"} <= paths
        schema = client.get("/openapi.json").json()
        body = schema["paths"]["/profiles"]["post"]["requestBody"]["content"]
        ref = body["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        assert ref in schema["components"]["schemas"]  # the documented body resolves
    app.state.store.close()


@needs_server_extra
def test_settings_refuse_private_reads_without_a_token(tmp_path: Path) -> None:
    from wattcap.server.app import ServerSettings

    with pytest.raises(ValueError, match="private reads need a token"):
        ServerSettings(db=tmp_path / "db", private_reads=True)
    with pytest.raises(ValueError, match="at least 8"):
        ServerSettings(db=tmp_path / "db", token="short")


def test_the_core_cli_imports_without_the_server_extra(tmp_path: Path) -> None:
    # fastapi, uvicorn and httpx made unimportable: the core CLI must still work, and a server
    # command must say how to install what it needs.
    code = """
import sys
for name in ("fastapi", "uvicorn", "httpx", "starlette"):
    sys.modules[name] = None
from typer.testing import CliRunner
from wattcap.cli import app
runner = CliRunner()
assert runner.invoke(app, ["devices"]).exit_code == 0
result = runner.invoke(app, ["serve", "--db", sys.argv[1]])
assert result.exit_code == 2, result.output
assert "wattcap[server]" in result.output, result.output
print("OK")
"""
    db = tmp_path / "never-created.sqlite3"
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True,
                         timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin",
                                           "WATTCAP_CACHE_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("OK")
    assert not db.exists()


def test_profiles_are_found_by_their_power_modes_name_or_id(tmp_path: Path) -> None:
    """A mode by name (any case, with or without MODE_) or by the id nvpmodel gives it, where
    the profile's own table of modes says which id its mode has; a profile without that table
    is found by name only (ids differ between boards)."""
    from wattcap.core.profile import ProfileTable

    examples = Path(__file__).resolve().parents[2] / "examples"
    base = ProfileTable.load(examples / "fleet" / "profile-jetson-nano.json")
    store = Store(tmp_path / "db.sqlite3")
    ids = {}
    for name, update in {
        "maxn": {"power_mode": "MAXN", "power_modes": {0: "MAXN", 1: "5W"}},
        "5w": {"power_mode": "MODE_5W", "power_modes": {0: "MAXN", 1: "MODE_5W"}},
        "bare": {"power_mode": "MAXN", "power_modes": None},
    }.items():
        body = base.model_copy(update=update).model_dump_json()
        ids[name] = store.add_profile(ProfileTable.model_validate_json(body), body,
                                      sha256_hex(body.encode()))[0].id

    def found(mode: str) -> set[str]:
        got = {p.id for p in store.list_profiles(power_mode=mode)}
        return {name for name, i in ids.items() if i in got}

    assert found("maxn") == {"maxn", "bare"}
    assert found("5W") == found("MODE_5W") == {"5w"}
    assert found("1") == {"5w"}
    assert found("0") == {"maxn"}
    assert found("2") == set() and found("²") == set()  # a digit int() refuses: no match
    assert {p.id for p in store.list_profiles(device="jetson-nano", power_mode="1")} == {
        ids["5w"]}
    store.close()
