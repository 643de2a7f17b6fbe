"""Users' own data and models on the command line: every data spec on small files in the real
formats, a user model profiled, estimated and trained on the emulated Nano, a user device
spec file, and each bad input refused with one line and exit code != 0 before any work."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.cli.cli_run import flat, invoke
from tests.data_files import (
    class_images,
    english_text,
    write_cifar10_binary,
    write_cifar10_python,
    write_cifar100_python,
    write_image_folder,
    write_mnist,
    write_stl10,
    write_svhn,
)
from wattcap.cli.train import NOT_REACHED_EXIT_CODE
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord

ROOT = Path(__file__).resolve().parents[2]

TINY_CNN = """
import torch
from torch import nn

class Tiny(nn.Module):
    input_shape = (1, 8, 8)

    def __init__(self, num_classes=10, hidden={hidden}):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.head = nn.Linear(8 * 4 * 4, num_classes)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        return self.head(nn.functional.max_pool2d(x, 2).flatten(1))

def build(num_classes=10):
    return Tiny(num_classes)
"""

CHAR_LM = """
from torch import nn

def make(vocab_size):
    return nn.Sequential(nn.Embedding(vocab_size, 16), nn.Linear(16, vocab_size))
"""


def _refused(result, *fragments: str) -> str:
    """Exit code != 0, one error line holding every fragment, no traceback."""
    out = flat(result.output)
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in out, result.output
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("user") / "tiny.py"
    path.write_text(textwrap.dedent(TINY_CNN.format(hidden=8)))
    return path


@pytest.fixture(scope="module")
def digits32_profile(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli-data") / "digits32.json"
    result = invoke("profile", "--model", "digits32-cnn", "--batch-sizes", "16,32",
                    "--exhaustive", "--out", out)
    assert result.exit_code == 0, result.output
    return out


# --------------------------------------------------------------------------- every data spec


def _write_spec(fmt: str, root: Path) -> str:
    """Small files of ``fmt`` in the official layout; returns the data spec."""
    if fmt == "text":
        path = root / "austen.txt"
        path.write_text(english_text(6000, seed=1))
        return f"text:{path}"
    shape = {"mnist": (1, 28, 28), "fashion-mnist": (1, 28, 28),
             "stl10": (3, 96, 96)}.get(fmt, (3, 32, 32))
    images, labels = class_images(40, shape, num_classes=4, seed=2)
    if fmt == "cifar10":
        write_cifar10_python(root, images, labels)
    elif fmt == "cifar10-binary":
        write_cifar10_binary(root, images, labels)
        return f"cifar10:{root}"
    elif fmt == "cifar100":
        write_cifar100_python(root, images, labels * 25)
    elif fmt == "svhn":
        write_svhn(root, images, labels)
    elif fmt in ("mnist", "fashion-mnist"):
        write_mnist(root, images, labels)
    elif fmt == "stl10":
        write_stl10(root, images, labels)
    elif fmt == "imagefolder":
        write_image_folder(root, images, labels, ("cat", "dog", "emu", "fox"))
    return f"{fmt}:{root}"


@pytest.mark.parametrize("fmt", ["cifar10", "cifar10-binary", "cifar100", "svhn", "mnist",
                                 "fashion-mnist", "stl10", "imagefolder"])
def test_every_image_spec_pretrains_through_the_cli(tmp_path, fmt):
    spec = _write_spec(fmt, tmp_path / "data")
    out = tmp_path / "w.safetensors"
    # digits-cnn takes 1x8x8: every format is converted (channels and size) batch by batch
    result = invoke("pretrain", "--model", "digits-cnn", "--data", spec, "--input-shape",
                    "1x8x8", "--epochs", "1", "--batch-size", "8", "--subset-fraction", "0.5",
                    "--out", out)
    assert result.exit_code == 0, result.output
    assert "pre-trained on" in result.output and out.exists()
    from wattcap.models.weights import read_metadata

    meta = read_metadata(out)
    assert meta["dataset"] == spec and meta["model"] == "digits-cnn"
    classes = {"cifar100": 100, "imagefolder": 4}.get(fmt, 10)  # a folder: its class folders
    assert int(meta["num_classes"]) == classes


def test_text_spec_with_a_user_char_model(tmp_path):
    spec = _write_spec("text", tmp_path)
    model = tmp_path / "charlm.py"
    model.write_text(textwrap.dedent(CHAR_LM))
    out = tmp_path / "lm.safetensors"
    result = invoke("pretrain", "--model", f"{model}:make", "--vocab-size", "96",
                    "--input-shape", "32", "--data", spec, "--epochs", "1", "--out", out)
    assert result.exit_code == 0, result.output
    from wattcap.models.weights import read_metadata

    canonical = f"{model}:make[input_shape=32,num_classes=96,task=char-lm]"
    assert read_metadata(out)["model"] == canonical


# --------------------------------------------------------------------------- a user's model


def test_user_model_profiled_estimated_and_trained_on_the_emulated_nano(tmp_path, tiny_model):
    text = f"{tiny_model}:build"
    profile = tmp_path / "p.json"
    result = invoke("profile", "--model", text, "--exhaustive", "--batch-sizes", "8,16",
                    "--out", profile)
    assert result.exit_code == 0, result.output
    table = ProfileTable.load(profile)
    assert table.model == text and table.input_shape == [1, 8, 8]
    assert table.architecture_fingerprint is not None

    eff = tmp_path / "eff.json"
    result = invoke("estimate", "--model", text, "--proxy", "digits-0-4", "--target-accuracy",
                    "0.6", "--batch-sizes", "8,16", "--seeds", "1", "--sample-budget", "1024",
                    "--out", eff)
    assert result.exit_code == 0, result.output
    vector = EfficiencyVector.load(eff)
    assert vector.architecture_fingerprint == table.architecture_fingerprint

    run = tmp_path / "run.json"
    result = invoke("train", "--profile", profile, "--efficiency", eff, "--model", text,
                    "--data", "digits-5-9", "--power-cap", "none", "--target-accuracy", "0.6",
                    "--sample-budget", "1024", "--out", run)
    record = RunRecord.load(run)
    # the record is written either way; the exit code says whether the target was reached
    assert result.exit_code == (0 if record.reached else NOT_REACHED_EXIT_CODE), result.output
    assert record.model == text
    assert record.architecture_fingerprint == vector.architecture_fingerprint
    assert record.samples_seen > 0

    # a profile of another architecture is refused: here, the same file after an edit
    edited = tmp_path / "edited"
    edited.mkdir()
    other = edited / "tiny.py"
    other.write_text(textwrap.dedent(TINY_CNN.format(hidden=8)).replace(
        "nn.Conv2d(1, 8, 3", "nn.Conv2d(1, 6, 3").replace("8 * 4 * 4", "6 * 4 * 4"))
    moved = table.model_copy(update={"model": f"{other}:build"})
    moved.save(tmp_path / "moved.json")
    result = invoke("train", "--profile", tmp_path / "moved.json", "--model", f"{other}:build",
                    "--data", "digits-5-9", "--power-cap", "none", "--target-accuracy", "0.6")
    _refused(result, "architecture fingerprint")
    result = invoke("train", "--profile", profile, "--model", "digits-cnn", "--data",
                    "digits-5-9", "--power-cap", "none", "--target-accuracy", "0.6")
    _refused(result, "the profile was made for model", "digits-cnn")


def test_a_profile_from_a_user_device_spec_plans_without_traceback(tmp_path):
    raw = json.loads((ROOT / "wattcap/devices/specs/jetson-nano.json").read_text())
    raw["name"] = "lab-nano"
    spec_file = tmp_path / "lab-nano.json"
    spec_file.write_text(json.dumps(raw))
    profile = tmp_path / "p.json"
    result = invoke("profile", "--device", f"emulated:{spec_file}", "--model", "digits-cnn",
                    "--exhaustive", "--batch-sizes", "16,32", "--out", profile)
    assert result.exit_code == 0, result.output
    spec_file.unlink()
    result = invoke("plan", "--profile", profile, "--power-cap", "4")
    assert result.exit_code == 0, result.output
    assert "lab-nano" in result.output and "baseline-1" in result.output
    result = invoke("profile", "--device", f"emulated:{spec_file}", "--model", "digits-cnn",
                    "--out", tmp_path / "q.json")
    _refused(result, "lab-nano.json", "no such file")


# --------------------------------------------------------------------------- bad input


def test_a_percentage_target_is_refused_before_the_plan(digits32_profile):
    result = invoke("train", "--profile", digits32_profile, "--model", "digits32-cnn",
                    "--data", "digits-5-9-32", "--power-cap", "5", "--target-accuracy", "90")
    out = _refused(result, "--target-accuracy is a fraction in (0, 1], got 90; 90 % is 0.9")
    assert "batch size" not in out  # no plan was printed


def test_data_of_another_shape_is_refused_before_training(digits32_profile):
    result = invoke("train", "--profile", digits32_profile, "--model", "digits32-cnn",
                    "--data", "digits-5-9", "--power-cap", "5", "--target-accuracy", "0.9")
    out = _refused(result, "has input shape 1x8x8 but model digits32-cnn expects 1x32x32",
                   "--input-shape 1x32x32")
    assert "batch size" not in out
    result = invoke("train", "--profile", digits32_profile, "--model", "digits32-cnn",
                    "--data", "digits-5-9", "--input-shape", "1x32x32", "--power-cap", "5",
                    "--target-accuracy", "0.5", "--sample-budget", "256", "--dry-run")
    assert result.exit_code == 0, result.output  # converted, it fits


def test_missing_path_and_folder_of_another_format(tmp_path):
    result = invoke("estimate", "--model", "digits-cnn", "--proxy",
                    f"cifar10:{tmp_path / 'nowhere'}", "--target-accuracy", "0.5",
                    "--out", tmp_path / "e.json")
    _refused(result, "--proxy:", "nowhere: no such file or directory")
    mnist = tmp_path / "mnist"
    images, labels = class_images(4, (1, 28, 28))
    write_mnist(mnist, images, labels)
    result = invoke("train", "--profile", tmp_path / "absent.json", "--model", "digits-cnn",
                    "--data", f"svhn:{mnist}", "--power-cap", "5", "--target-accuracy", "0.5")
    _refused(result, "not svhn data: expected SVHN cropped digits: train_32x32.mat",
             f"looks like mnist data (found train-images-idx3-ubyte): use mnist:{mnist}")


def test_empty_class_and_text_with_nothing_left(tmp_path):
    images, labels = class_images(4, (3, 8, 8), num_classes=2)
    write_image_folder(tmp_path / "img", images, labels, ("cat", "dog"))
    (tmp_path / "img" / "train" / "emu").mkdir()
    result = invoke("pretrain", "--model", "digits-cnn", "--data",
                    f"imagefolder:{tmp_path / 'img'}", "--out", tmp_path / "w.safetensors")
    _refused(result, "emu: class folder holds no images")
    greek = tmp_path / "greek.txt"
    greek.write_text("αβγδεζηθ\t«»" * 30, encoding="utf-8")
    result = invoke("estimate", "--model", "char-transformer", "--proxy", f"text:{greek}",
                    "--target-accuracy", "0.5", "--out", tmp_path / "e.json")
    _refused(result, "greek.txt: no character left after the vocabulary filter")


@pytest.mark.parametrize(("body", "fragment"), [
    ("def build():\n    raise RuntimeError('cuda missing')\n",
     "the factory raised RuntimeError: cuda missing"),
    ("def build():\n    return 'a model'\n",
     "the factory returned str, expected a torch.nn.Module"),
])
def test_bad_factories_are_refused(tmp_path, body, fragment):
    path = tmp_path / "bad.py"
    path.write_text(body)
    result = invoke("profile", "--model", f"{path}:build", "--out", tmp_path / "p.json")
    _refused(result, fragment)
    assert not (tmp_path / "p.json").exists()


def test_model_options_that_do_not_apply_are_refused(tmp_path, tiny_model):
    result = invoke("profile", "--model", "resnet18", "--num-classes", "10",
                    "--out", tmp_path / "p.json")
    _refused(result, "--num-classes and --vocab-size are for your own model")
    result = invoke("profile", "--model", "resnet18", "--input-shape", "1x28x28",
                    "--out", tmp_path / "p.json")
    _refused(result, "model resnet18 takes input shape 3x32x32; --input-shape 1x28x28")
    result = invoke("pretrain", "--model", f"{tiny_model}:build", "--data", "digits",
                    "--subset-fraction", "1.5", "--out", tmp_path / "w.safetensors")
    _refused(result, "--subset-fraction must be in (0, 1], got 1.5")


def test_subset_and_test_fractions_reach_the_data(tmp_path):
    images, labels = class_images(200, (3, 32, 32), num_classes=4, seed=4)
    write_svhn(tmp_path, images, labels)
    eff = tmp_path / "e.json"
    result = invoke("estimate", "--model", "digits-cnn", "--proxy", f"svhn:{tmp_path}",
                    "--input-shape", "1x8x8", "--subset-fraction", "0.5", "--test-fraction",
                    "0.25", "--target-accuracy", "0.3", "--batch-sizes", "8,16", "--seeds",
                    "1", "--sample-budget", "256", "--eval-every", "64", "--workers", "1",
                    "--out", eff)
    assert result.exit_code == 0, result.output
    vector = EfficiencyVector.load(eff)
    assert vector.dataset == f"svhn:{tmp_path}"
    assert all(e.samples_mean is None or e.samples_mean <= 256 for e in vector.entries)
    assert np.isfinite([e.ratio_mean for e in vector.entries if e.ratio_mean is not None]).all()


def test_compare_and_sensitivity_check_their_datasets_before_any_run(tmp_path):
    result = invoke("compare", "--out", tmp_path / "cmp", "--quick", "--model", "digits-cnn",
                    "--proxy", "digits", "--targets", f"cifar10:{tmp_path / 'nowhere'}")
    _refused(result, "nowhere: no such file or directory")
    assert not (tmp_path / "cmp").exists()  # nothing was written or trained
    result = invoke("sensitivity", "--out", tmp_path / "sens", "--model", "digits32-cnn",
                    "--proxies", "digits", "--targets", "digits-5-9-32")
    _refused(result, "dataset digits: data digits has input shape 1x8x8 but model "
             "digits32-cnn expects 1x32x32")
    result = invoke("compare", "--out", tmp_path / "cmp", "--weights", tmp_path / "none.st")
    _refused(result, "--weights", "none.st: no such file")


def test_a_batch_size_larger_than_the_split_is_refused_before_any_run(tmp_path) -> None:
    out = tmp_path / "eff.json"
    # digits at a tenth: 144 training samples; b=256 cannot be a batch of distinct samples
    result = invoke("estimate", "--model", "digits-cnn", "--proxy", "digits", "--target-accuracy",
                    "0.5", "--batch-sizes", "16,256", "--seeds", "1", "--subset-fraction", "0.1",
                    "--out", out)
    _refused(result, "--proxy: batch size 256 is larger than the training split (144 samples)",
             # what to do, with flags that exist: train's batch size comes from the profile
             "batch sizes of at most 144: `wattcap estimate ... --batch-sizes "
             "4,8,16,32,64,128`", "re-profile with `wattcap profile ... --batch-sizes")
    assert not out.exists() and "estimating" not in result.output
    assert "--batch-sizes" in invoke("profile", "--help").output


def test_a_split_of_few_steps_is_warned_about(tmp_path) -> None:
    out = tmp_path / "eff.json"
    result = invoke("estimate", "--model", "digits-cnn", "--proxy", "digits", "--target-accuracy",
                    "0.3", "--batch-sizes", "8,64", "--seeds", "1", "--subset-fraction", "0.1",
                    "--sample-budget", "256", "--eval-every", "128", "--out", out)
    assert result.exit_code == 0, result.output
    assert "warning: --proxy: 144 training samples are fewer than 4 steps of batch size 64" \
        in flat(result.output)


def test_the_library_refuses_it_too() -> None:
    import numpy as np

    from wattcap.core.run import TrainConfig
    from wattcap.data import get_dataset
    from wattcap.data.specs import DataMismatchError
    from wattcap.train.loop import train_to_accuracy

    train, test = get_dataset("digits").split(0.2, seed=0)
    small = train.subset(np.arange(50))
    with pytest.raises(DataMismatchError, match="batch size 64 is larger than the training"):
        train_to_accuracy(TrainConfig(model="digits-cnn", batch_size=64, sample_budget=128,
                                      target_accuracy=0.9),
                          small, test)


def test_a_one_class_image_folder_is_refused_before_any_cache(tmp_path, monkeypatch) -> None:
    from tests.data_files import write_image_folder

    cache = tmp_path / "cache"
    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(cache))
    images = np.zeros((6, 3, 8, 8), dtype=np.uint8)
    folder = write_image_folder(tmp_path / "data", images, np.zeros(6, dtype=np.int64), ["cat"])
    out = tmp_path / "w.safetensors"
    result = invoke("pretrain", "--model", "resnet18", "--data", f"imagefolder:{folder}",
                    "--input-shape", "3x32x32", "--epochs", "1", "--out", out)
    _refused(result, "one class sub-folder (cat)", "at least two")
    assert not out.exists()
    # nothing decoded, nothing cached
    assert not any(p.suffix in (".npy", ".tmp") for p in cache.rglob("*")) if cache.exists() \
        else True


def test_a_torch_save_file_gets_the_servers_message_in_the_cli(tmp_path) -> None:
    import torch

    from wattcap.server.validate import PayloadError, parse_safetensors_header

    path = tmp_path / "w.pt"
    torch.save({"weight": torch.zeros(2)}, path)
    with pytest.raises(PayloadError) as server:
        parse_safetensors_header(path.read_bytes())
    guess = "(it is a zip archive: torch.save output? Convert it with safetensors' save_file)"
    assert guess in str(server.value)
    result = invoke("estimate", "--model", "digits-cnn", "--proxy", "digits", "--weights", path,
                    "--out", tmp_path / "e.json")
    _refused(result, f"--weights {path}: not a safetensors weights file {guess}")
