"""Files travel (issue 27 item 2, for profiles): a user model is its file name, factory,
options and architecture, not the folder its file sits in — a copied project still plans with
its profile; a changed architecture is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wattcap.core.profile import portable_model_name
from wattcap.core.schema import WattcapFileError

NET = """from torch import nn
def make(num_classes=10):
    return nn.Sequential(nn.Flatten(), nn.Linear(64, {hidden}), nn.ReLU(),
                         nn.Linear({hidden}, num_classes))
"""


def test_a_copied_project_keeps_its_profile_and_a_changed_model_is_refused(
    tmp_path: Path,
) -> None:
    from wattcap.devices import EmulatedDevice
    from wattcap.measure.profiling import Profiler
    from wattcap.models import model_fingerprint, user_model_text

    here = tmp_path / "project"
    here.mkdir()
    (here / "net.py").write_text(NET.format(hidden=32))
    model = user_model_text(f"{here / 'net.py'}:make", input_shape="1x8x8")
    profile = Profiler(EmulatedDevice("jetson-nano"), model, batch_sizes=(8,)).run(
        exhaustive=True)

    there = tmp_path / "elsewhere" / "project"
    shutil.copytree(here, there)
    moved = user_model_text(f"{there / 'net.py'}:make", input_shape="1x8x8")
    assert moved != model and portable_model_name(moved) == portable_model_name(model)
    profile.check_matches(device="jetson-nano", model=moved,
                          architecture_fingerprint=model_fingerprint(moved))

    (there / "net.py").write_text(NET.format(hidden=48))  # another architecture
    changed = user_model_text(f"{there / 'net.py'}:make", input_shape="1x8x8")
    with pytest.raises(WattcapFileError, match="model"):
        profile.check_matches(model=changed, architecture_fingerprint=model_fingerprint(changed))


def test_registered_models_and_other_factories_still_must_match() -> None:
    assert portable_model_name("resnet18") is None
    assert portable_model_name("/a/net.py:make") == portable_model_name("/b/net.py:make")
    assert portable_model_name("/a/net.py:make") != portable_model_name("/a/net.py:build")
    assert portable_model_name("/a/net.py:make") != portable_model_name("/a/other.py:make")


def _user_model(folder: Path, source: str) -> str:
    from wattcap.models import user_model_text

    folder.mkdir(parents=True)
    (folder / "net.py").write_text(source)
    return user_model_text(f"{folder / 'net.py'}:make", input_shape="1x8x8")


def test_vectors_and_checkpoints_travel_with_the_project_and_refuse_a_changed_source(
    tmp_path: Path,
) -> None:
    """An efficiency vector and a checkpoint of a user model belong to its file name,
    architecture and source by content: a copied project keeps them; the same architecture
    with another forward (another source) is refused by both."""
    from wattcap.algorithms.efficiency import vector_from_samples
    from wattcap.core.run import TrainConfig
    from wattcap.data import get_dataset
    from wattcap.models import model_fingerprint, model_identity, model_source_sha256
    from wattcap.train.loop import train_to_accuracy

    source = NET.format(hidden=32)
    model = _user_model(tmp_path / "here" / "project", source)
    moved = _user_model(tmp_path / "there" / "project", source)
    changed = _user_model(tmp_path / "changed" / "project", source.replace("ReLU", "Tanh"))
    assert model_fingerprint(changed) == model_fingerprint(model)  # the same shapes
    assert model_identity(moved) == model_identity(model) != model_identity(changed)

    vector = vector_from_samples(
        {8: [300], 32: [400]}, sample_budget=1024, model=model, input_shape=[1, 8, 8],
        dataset="digits", task="image-classification", target_accuracy=0.8, seeds=[0])
    vector.architecture_fingerprint = model_fingerprint(model)
    vector.model_source_sha256 = model_source_sha256(model)
    vector.check_matches(model=moved, architecture_fingerprint=model_fingerprint(moved),
                         model_source_sha256=model_source_sha256(moved))
    with pytest.raises(WattcapFileError, match="another version of the model's source"):
        vector.check_matches(model=changed, architecture_fingerprint=model_fingerprint(changed),
                             model_source_sha256=model_source_sha256(changed))

    train, test = get_dataset("digits").split(0.2, seed=0)
    checkpoints = tmp_path / "ckpt"

    def config(name: str) -> TrainConfig:
        return TrainConfig(model=name, batch_size=16, target_accuracy=0.9999,
                           sample_budget=256, eval_every_samples=128, max_eval_samples=64)

    train_to_accuracy(config(model), train, test, checkpoint_dir=checkpoints)
    again = train_to_accuracy(config(moved), train, test, checkpoint_dir=checkpoints)
    assert again.resumed_from_samples == 256  # the copied project's run is the same run
    with pytest.raises(WattcapFileError, match=r"differs in .*model_source_sha256"):
        train_to_accuracy(config(changed), train, test, checkpoint_dir=checkpoints)
