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
