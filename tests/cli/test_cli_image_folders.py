"""A newcomer's own model and image folder on the command line: `compare` without --weights
pre-trains into --out with the data converted to the model's input, a data set too small for
compare's batch sizes is refused before any training, a dry run writes nothing into the data
folder, and a folder of mixed image sizes is resized by --input-shape."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.cli.cli_run import flat, invoke
from wattcap.data.pixel_cache import CACHE_FOLDER

#: a user's model file: 3x16x16 inputs, the head sized by num_classes
NET = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, num_classes)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        return self.head(nn.functional.max_pool2d(x, 2).flatten(1))

def build(num_classes=10):
    return Net(num_classes)
"""


def _photos(root: Path, n: int, sizes: list[tuple[int, int]] | None = None) -> Path:
    """`n` PNGs in 3 class folders, 16x16 or (height, width) taken in turn from `sizes`."""
    rng = np.random.default_rng(0)
    for i in range(n):
        height, width = (16, 16) if sizes is None else sizes[i % len(sizes)]
        path = root / ("cat", "dog", "emu")[i % 3] / f"{i}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path)
    return root


@pytest.fixture
def net(tmp_path: Path) -> str:
    path = tmp_path / "u" / "net.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(NET))
    return f"{path}:build"


def test_compare_pretrains_a_user_model_into_out_with_the_data_converted(
        tmp_path: Path, net: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import wattcap.train.loop as loop

    real = loop.pretrain
    calls: list[dict] = []

    def pretrain_then_stop(*args, **kwargs):  # the real pre-training, then no sweep
        calls.append({"args": args, "kwargs": kwargs, "meta": real(*args, **kwargs)})
        raise ValueError("stopped after the pre-training")

    monkeypatch.setattr(loop, "pretrain", pretrain_then_stop)
    out = tmp_path / "cmp"
    result = invoke("compare", "--quick", "--model", net, "--input-shape", "3x16x16",
                    "--proxy", "shapes", "--targets", "digits-5-9-32", "--out", out)
    text = flat(result.output)
    assert "stopped after the pre-training" in text, result.output
    assert len(calls) == 1
    model, dataset, path = calls[0]["args"]
    assert model == f"{net}[input_shape=3x16x16]" and dataset == "digits-0-4-32"
    # the digits (1x32x32) were converted to the model's 3x16x16: it trained and saved
    assert calls[0]["kwargs"]["data_options"] == {"input_shape": (3, 16, 16)}
    path = Path(path)
    assert path.parent == out and path.is_file()
    assert not set(path.name) & set(":[]/=") and path.name.endswith("-pretrained.safetensors")
    from wattcap.models.weights import read_metadata

    assert read_metadata(path)["model"] == model
    # the model's text is printed as it is, not eaten as rich markup
    assert f"pre-training {model} on digits-0-4-32" in text


def test_compare_refuses_a_data_set_too_small_for_its_batch_sizes_before_any_run(
        tmp_path: Path, net: str) -> None:
    photos = _photos(tmp_path / "photos", 60)  # 48 training samples
    out = tmp_path / "cmp"
    result = invoke("compare", "--quick", "--model", net, "--input-shape", "3x16x16",
                    "--proxy", "shapes", "--targets", f"imagefolder:{photos}", "--out", out)
    text = flat(result.output)
    assert result.exit_code == 2, result.output
    assert (f"dataset imagefolder:{photos}: batch size 128 is larger than the training split "
            "(48 samples)") in text
    assert "--test-fraction" in text
    assert "`wattcap profile ... --batch-sizes 4,8,16,32`" in text
    assert "pre-training" not in text and not out.exists()  # nothing trained, nothing written
    # the flags the hint names exist
    for command in ("compare", "profile", "estimate"):
        help_text = invoke(command, "--help").output
        assert ("--test-fraction" in help_text) if command == "compare" else \
            ("--batch-sizes" in help_text)


def test_train_dry_run_writes_no_pixel_cache(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(tmp_path / "cache"))
    profile = tmp_path / "p.json"
    result = invoke("profile", "--model", "digits-cnn", "--batch-sizes", "8", "--out", profile)
    assert result.exit_code == 0, result.output
    photos = _photos(tmp_path / "photos3", 30)
    args = ["train", "--profile", profile, "--model", "digits-cnn", "--data",
            f"imagefolder:{photos}", "--input-shape", "1x8x8", "--power-cap", "none",
            "--target-accuracy", "0.5"]
    result = invoke(*args, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "dry run: nothing changed" in result.output
    assert not (photos / CACHE_FOLDER).exists()
    assert not (tmp_path / "cache" / "datasets").exists()
    from wattcap.cli.common import DRY_RUN

    assert DRY_RUN.get() is False  # over with the command


def test_a_folder_of_mixed_image_sizes_is_resized_by_input_shape(tmp_path: Path) -> None:
    photos = _photos(tmp_path / "photos2", 24, sizes=[(24, 20), (24, 21)])
    weights = tmp_path / "w.safetensors"
    result = invoke("estimate", "--model", "digits-cnn", "--proxy", f"imagefolder:{photos}",
                    "--target-accuracy", "0.5", "--out", tmp_path / "e.json")
    text = flat(result.output)
    assert result.exit_code == 2, result.output
    assert "the images are not all the same size; give --input-shape 1x8x8" in text
    assert "size=(height, width)" not in text
    assert not (photos / CACHE_FOLDER).exists()  # no empty cache folder left behind
    result = invoke("pretrain", "--model", "digits-cnn", "--data", f"imagefolder:{photos}",
                    "--input-shape", "1x8x8", "--epochs", "1", "--batch-size", "4",
                    "--out", weights)
    assert result.exit_code == 0, result.output
    assert weights.is_file()
