"""One identity (issue 27 item 1): checkpoints and recorded runs are keyed by SweepInputs —
the model by name, architecture and source, the weights and the data's files by content."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from wattcap.train.run_store import SweepInputs, data_stamp


def test_data_files_are_identified_by_content_hashed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be\n" * 50)
    spec = f"text:{corpus}"
    first = data_stamp(spec)
    assert first is not None and first[0][0] == "corpus.txt"
    index = json.loads((tmp_path / "cache" / "file-sha256.json").read_text())
    assert index[str(corpus.resolve())][2] == first[0][1]  # hashed once, kept by size+mtime
    stat = corpus.stat()
    corpus.write_text("to be or not to bE\n" * 50)  # the same size, another content
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000))
    assert data_stamp(spec) != first
    assert data_stamp("digits") is None and data_stamp("no-such-data") is None
    a = SweepInputs("digits-cnn", None, spec)
    assert a.key(seed=0) == SweepInputs("digits-cnn", None, spec).key(seed=0)
    assert a.key(seed=0) != a.key(seed=1)


def test_checkpoints_and_recorded_runs_share_the_identity(tmp_path: Path) -> None:
    from wattcap.core.run import TrainConfig
    from wattcap.data import get_dataset
    from wattcap.train.loop import run_identity

    train, test = get_dataset("digits").split(0.2, seed=0)
    config = TrainConfig(model="digits-cnn", batch_size=16, target_accuracy=0.9,
                         sample_budget=256)
    identity = run_identity(config, train, test, None)
    shared = SweepInputs("digits-cnn", None, train.name).identity()
    assert {k: identity[k] for k in shared} == shared  # the same inputs, built in one place
    assert {"model", "architecture", "model_source_sha256", "weights_sha256",
            "data_files", "config", "train_data", "test_data"} <= set(identity)


def _save_tensors(path: Path, order: list[str], metadata: dict[str, str]) -> Path:
    """The same two tensors, written with their header in `order` and `metadata`."""
    import torch
    from safetensors.torch import save_file

    tensors = {"conv.weight": torch.arange(12, dtype=torch.float32).reshape(3, 4),
               "fc.bias": torch.tensor([1.5, -2.0], dtype=torch.float32)}
    save_file({k: tensors[k] for k in order}, str(path), metadata=metadata)
    return path


def test_weights_are_identified_by_their_tensors_not_the_files_bytes(tmp_path: Path) -> None:
    """A pre-training saved twice (another metadata dict, another key order) is the same
    weights; one changed value, dtype or name is other weights."""
    import torch
    from safetensors.torch import save_file

    from wattcap.core.schema import WattcapFileError
    from wattcap.models.weights import file_sha256, weights_content_sha256

    a = _save_tensors(tmp_path / "a.safetensors", ["conv.weight", "fc.bias"],
                      {"model": "m", "test_accuracy": "0.99"})
    b = _save_tensors(tmp_path / "b.safetensors", ["fc.bias", "conv.weight"],
                      {"test_accuracy": "0.99", "model": "m", "epochs": "2"})
    assert file_sha256(a) != file_sha256(b)
    assert weights_content_sha256(a) == weights_content_sha256(b)
    other = tmp_path / "other.safetensors"
    for changed in ({"conv.weight": torch.arange(12, dtype=torch.float32).reshape(3, 4),
                     "fc.bias": torch.tensor([1.5, -2.5])},
                    {"conv.weight": torch.arange(12, dtype=torch.float64).reshape(3, 4),
                     "fc.bias": torch.tensor([1.5, -2.0])},
                    {"conv.weight": torch.arange(12, dtype=torch.float32).reshape(4, 3),
                     "fc.bias": torch.tensor([1.5, -2.0])},
                    {"conv.weights": torch.arange(12, dtype=torch.float32).reshape(3, 4),
                     "fc.bias": torch.tensor([1.5, -2.0])}):
        save_file(changed, str(other))
        assert weights_content_sha256(other) != weights_content_sha256(a)
    (tmp_path / "w.pt").write_bytes(b"PK\x03\x04 a zip")
    with pytest.raises(WattcapFileError, match="not a safetensors weights file.*zip"):
        weights_content_sha256(tmp_path / "w.pt")


def test_a_header_in_another_order_is_the_same_weights(tmp_path: Path) -> None:
    """Written by another tool, a header may list the tensors in any order and carry its
    metadata anywhere: the identity reads each tensor by its offsets."""
    import struct

    from wattcap.models.weights import weights_content_sha256

    a = _save_tensors(tmp_path / "a.safetensors", ["conv.weight", "fc.bias"], {"model": "m"})
    raw = a.read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + size])
    reordered = {"fc.bias": header["fc.bias"], "__metadata__": {"model": "m", "x": "y"},
                 "conv.weight": header["conv.weight"]}
    text = json.dumps(reordered).encode()
    text += b" " * (-len(text) % 8)
    b = tmp_path / "b.safetensors"
    b.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + size:])
    assert b.read_bytes() != raw
    assert weights_content_sha256(b) == weights_content_sha256(a)


def _record(config: object) -> object:
    """A real (tiny) run of `config` on digits."""
    from wattcap.data import get_dataset
    from wattcap.train.loop import train_to_accuracy

    train, test = get_dataset("digits").split(0.2, seed=0)
    return train_to_accuracy(config, train, test)  # type: ignore[arg-type]


def test_runs_recorded_by_the_file_hash_or_in_a_shared_folder_are_reused(
    tmp_path: Path
) -> None:
    """Runs an earlier wattcap recorded (weights keyed by the file's sha256) and runs that
    `estimate` keeps in the cache's folder are found by their identity; a run found in the
    shared folder is copied into the sweep's own."""
    from wattcap.core.run import TrainConfig
    from wattcap.train.run_store import RunStore

    weights = _save_tensors(tmp_path / "w.safetensors", ["conv.weight", "fc.bias"], {})
    resaved = _save_tensors(tmp_path / "again.safetensors", ["fc.bias", "conv.weight"],
                            {"pretrained": "again"})
    config = TrainConfig(model="digits-cnn", batch_size=16, target_accuracy=0.9,
                         sample_budget=256)
    inputs = SweepInputs("digits-cnn", weights, "digits")
    earlier = inputs.earlier_key(config=config.identity_fields())
    assert earlier is not None and earlier != inputs.key(config=config.identity_fields())
    assert SweepInputs("digits-cnn", None, "digits").earlier_key(seed=0) is None
    old_store = RunStore(tmp_path / "old", inputs)
    old_path = old_store.path(config).with_name(
        old_store.path(config).name.replace(inputs.key(config=config.identity_fields()),
                                            earlier))
    _record(config).save(old_path)  # type: ignore[attr-defined]
    assert old_store.recorded(config) is not None  # found under the earlier key

    shared = RunStore(tmp_path / "cache-runs", SweepInputs("digits-cnn", resaved, "digits"))
    shared.save(config, _record(config))  # type: ignore[arg-type]
    mine = RunStore(tmp_path / "cmp" / "runs", inputs, shared=(tmp_path / "cache-runs",))
    assert mine.recorded(config) is not None  # the same tensors, saved again: the same run
    assert mine.path(config).exists()  # and now kept in the sweep's own folder
    other = TrainConfig(model="digits-cnn", batch_size=16, target_accuracy=0.9,
                        sample_budget=512)
    assert mine.recorded(other) is None
    assert RunStore(tmp_path / "solo", inputs).recorded(config) is None
