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
