"""Users' own models (file.py:factory, package.module:factory, nn.Module instances), the
architecture fingerprint that files carry, and profiles made from a user's device spec file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import plan
from wattcap.core.schema import WattcapFileError
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice
from wattcap.devices.workload import measure_workload, workload_for
from wattcap.measure.profile_refresh import refresh_profile
from wattcap.measure.profiling import Profiler
from wattcap.measure.references import emulated_reference_profiles, reference_profiles_for
from wattcap.models import (
    UserModelError,
    architecture_fingerprint,
    get_model_spec,
    model_fingerprint,
    spec_for_module,
    user_model_text,
)
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import PlanSettings
from wattcap.train.loop import TrainConfig, train_to_accuracy

ROOT = Path(__file__).resolve().parents[2]

TINY_NET = """
from torch import nn

def build(num_classes=10, hidden={hidden}):
    return nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(),
                         nn.Linear(hidden, num_classes))

build.input_shape = (1, 8, 8)
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def net_file(tmp_path) -> Path:
    return _write(tmp_path / "models" / "tiny.py", TINY_NET.format(hidden=16))


def _edit(path: Path, text: str) -> None:
    """Rewrite a model file so that its stamp (mtime, size) surely changes."""
    stat = path.stat()
    path.write_text(textwrap.dedent(text))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


# --------------------------------------------------------------------------- resolving


def test_a_factory_in_a_file_becomes_a_model_spec(net_file, monkeypatch):
    monkeypatch.chdir(net_file.parent.parent)
    spec = get_model_spec("models/tiny.py:build")
    assert spec.name == f"{net_file}:build"  # canonical: absolute path
    assert spec.input_shape == (1, 8, 8) and spec.task == "image-classification"
    assert spec.default_num_classes == 10 and spec.reference is False
    model = spec.build(num_classes=5)  # the factory takes num_classes
    assert model(torch.zeros(3, 1, 8, 8)).shape == (3, 5)
    workload = workload_for(spec.name)
    assert workload.input_shape == (1, 8, 8) and workload.param_count == 64 * 16 + 16 + 16 * 10 + 10


def test_options_in_the_spec_text_and_a_module_factory(tmp_path, monkeypatch):
    _write(tmp_path / "zoo" / "__init__.py", "")
    _write(tmp_path / "zoo" / "nets.py", """
        from torch import nn

        class Wide(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 7))

            def forward(self, x):
                return self.body(x)
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    text = user_model_text("zoo.nets:Wide", input_shape="3x4x4")
    assert text == "zoo.nets:Wide[input_shape=3x4x4]"
    spec = get_model_spec(text)
    assert spec.input_shape == (3, 4, 4) and spec.default_num_classes == 7  # read from output
    with pytest.raises(UserModelError, match="outputs 7 classes and its factory takes no "
                       "num_classes, but the data has 10"):
        spec.build(num_classes=10)
    with pytest.raises(UserModelError, match="asked for 10 classes but the model outputs 7"):
        get_model_spec(user_model_text(text, num_classes=10))


def test_a_char_model_with_its_vocabulary(tmp_path):
    path = _write(tmp_path / "charlm.py", """
        from torch import nn

        class CharLM(nn.Module):
            def __init__(self, vocab_size):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, 8)
                self.head = nn.Linear(8, vocab_size)

            def forward(self, x):
                return self.head(self.embed(x))
    """)
    spec = get_model_spec(user_model_text(f"{path}:CharLM", input_shape="16", num_classes=96,
                                          task="char-lm"))
    assert spec.task == "char-lm" and spec.input_dtype == "int64"
    assert spec.input_shape == (16,) and spec.default_num_classes == 96
    x, y = spec.example_batch(2)
    assert spec.build(96)(x).shape == (2, 16, 96) and y.shape == (2, 16)


def test_the_spec_resolves_in_another_process_with_the_same_fingerprint(net_file):
    text = f"{net_file}:build"
    code = ("from wattcap.models import get_model_spec, model_fingerprint; "
            f"s = get_model_spec({text!r}); print(s.input_shape, model_fingerprint({text!r}))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd="/", check=True, timeout=120).stdout.split()
    assert out[-1] == model_fingerprint(text) and "".join(out[:-1]) == "(1,8,8)"


# --------------------------------------------------------------------------- bad factories


@pytest.mark.parametrize(("body", "message"), [
    ("def build():\n    raise RuntimeError('no GPU here')\n",
     "the factory raised RuntimeError: no GPU here"),
    ("def build():\n    return 42\n", "the factory returned int, expected a torch.nn.Module"),
    ("from torch import nn\ndef build():\n    return nn.Linear(5, 3)\n",
     "cannot tell its input shape"),
    ("from torch import nn\ndef build():\n    return nn.Linear(5, 3)\nbuild.input_shape = (9,)\n",
     r"the model failed on an input of shape \(2, 9\)"),
    ("build = 3\n", "'build' is a int, not a callable"),
    ("import nonexistent_pkg_xyz\n", "importing it raised ModuleNotFoundError"),
    ("def other():\n    pass\n", "has no 'build'"),
])
def test_bad_factories_give_one_clear_line(tmp_path, body, message):
    path = _write(tmp_path / "bad.py", body)
    with pytest.raises(UserModelError, match=message) as info:
        get_model_spec(f"{path}:build")
    assert "\n" not in str(info.value)


def test_missing_file_module_and_malformed_specs(tmp_path):
    with pytest.raises(UserModelError, match="nope.py: no such file"):
        get_model_spec(f"{tmp_path}/nope.py:build")
    with pytest.raises(UserModelError, match="no module named 'no_such_pkg_abc'"):
        get_model_spec("no_such_pkg_abc.nets:build")
    with pytest.raises(UserModelError, match="unknown option 'classes=3'"):
        get_model_spec(f"{tmp_path}/x.py:build[classes=3]")
    with pytest.raises(KeyError, match="or your own as package.module:factory"):
        get_model_spec("resnet19")


# --------------------------------------------------------------------------- fingerprints


def test_fingerprint_tracks_names_and_shapes_not_values():
    a, b = nn.Linear(4, 3), nn.Linear(4, 3)
    assert architecture_fingerprint(a) == architecture_fingerprint(b)  # other random weights
    assert architecture_fingerprint(a) != architecture_fingerprint(nn.Linear(4, 2))
    assert architecture_fingerprint(nn.Sequential(a)) != architecture_fingerprint(a)  # names
    bn = nn.BatchNorm1d(3)
    assert architecture_fingerprint(bn) != architecture_fingerprint(
        nn.BatchNorm1d(3, track_running_stats=False))  # buffers count
    state = torch.random.get_rng_state()
    model_fingerprint("resnet18")
    assert torch.equal(state, torch.random.get_rng_state())  # no random draw leaks out


def test_files_carry_the_fingerprint_and_refuse_another_architecture(net_file):
    text = f"{net_file}:build"
    device = EmulatedDevice("jetson-nano")
    profile = Profiler(device, text, batch_sizes=(4, 8)).run(power_cap_w=5.0)
    assert profile.architecture_fingerprint == model_fingerprint(text)
    vector = vector_from_samples(
        {4: [100], 8: [160]}, 1000, model=text, input_shape=[1, 8, 8], dataset="digits",
        task="image-classification", target_accuracy=0.5, seeds=[0],
        architecture_fingerprint=model_fingerprint(text),
    )
    plan(profile, 5.0, efficiency=vector)  # same architecture: accepted

    _edit(net_file, TINY_NET.format(hidden=32))  # the user edits the model afterwards
    new_fingerprint = model_fingerprint(text)
    assert new_fingerprint != profile.architecture_fingerprint
    with pytest.raises(WattcapFileError, match="made for architecture fingerprint"):
        refresh_profile(Profiler(EmulatedDevice("jetson-nano"), text, batch_sizes=(4, 8)),
                        profile)
    train, test = get_dataset("digits").split(0.2, seed=0)
    config = TrainConfig(model=text, batch_size=8, target_accuracy=0.3, sample_budget=64,
                         eval_every_samples=32)
    with EmulatedDevice("jetson-nano") as dev, pytest.raises(WattcapFileError,
                                                             match="architecture fingerprint"):
        train_to_accuracy(config, train, test, device=dev, profile=profile)
    with pytest.raises(WattcapFileError, match="architecture fingerprint"):
        Session(EmulatedDevice("jetson-nano"), model=text,
                planning=PlanSettings(profile=profile, batch_size=8))
    stale = vector.model_copy(update={"architecture_fingerprint": new_fingerprint})
    with pytest.raises(WattcapFileError, match="efficiency vector was made for architecture "
                       f"fingerprint '{new_fingerprint}'"):
        plan(profile, 5.0, efficiency=stale)

    record = train_to_accuracy(config, train, test)
    assert record.architecture_fingerprint == new_fingerprint
    assert record.samples_seen > 0


# --------------------------------------------------------------------------- instances


class _Instance(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).flatten(1))


def test_an_instance_and_example_input_become_a_registered_spec():
    module = _Instance()
    spec = spec_for_module(module, torch.zeros(2, 1, 8, 8))
    assert spec.name.startswith("_Instance-") and spec.input_shape == (1, 8, 8)
    assert spec.default_num_classes == 10 and spec.task == "image-classification"
    assert get_model_spec(spec.name) is spec  # resolvable by name in this process
    copy = spec.build(10)
    assert copy is not module
    assert torch.equal(copy.conv.weight, module.conv.weight)
    with torch.no_grad():
        copy.conv.weight.zero_()
    assert module.conv.weight.abs().sum() > 0  # profiling a copy never touches the original
    assert model_fingerprint(spec.name) == architecture_fingerprint(module)
    workload = measure_workload(copy, *spec.example_batch(2), spec.loss, spec.name)
    assert workload.input_shape == (1, 8, 8)
    with pytest.raises(UserModelError, match="outputs 10 classes, but the data has 3"):
        spec.build(3)
    with pytest.raises(ValueError, match="already used by another architecture"):
        spec_for_module(nn.Sequential(nn.Flatten(), nn.Linear(64, 10)),
                        torch.zeros(2, 1, 8, 8), name=spec.name)
    with pytest.raises(UserModelError, match="expected a torch.nn.Module"):
        spec_for_module("resnet18", torch.zeros(2, 3))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- device spec files


def test_a_profile_from_a_spec_file_plans_without_the_file(tmp_path):
    raw = json.loads((ROOT / "wattcap/devices/specs/jetson-nano.json").read_text())
    raw["name"] = "jetson-nano"  # same name as the bundled one, other physics
    raw["idle_w"] = raw["idle_w"] + 1.0
    spec_file = tmp_path / "hot-nano.json"
    spec_file.write_text(json.dumps(raw))
    raw["name"] = "my-nano"
    mine = tmp_path / "my-nano.json"
    mine.write_text(json.dumps(raw))

    profile = Profiler(EmulatedDevice(str(mine)), "digits-cnn").run(exhaustive=True)
    assert profile.device == "my-nano" and profile.device_spec["idle_w"] == raw["idle_w"]
    mine.unlink()  # planning needs only the profile
    references = reference_profiles_for(profile)
    assert references is not None and {r.device for r in references} == {"my-nano"}
    result = plan(profile, 6.0, reference_profiles=references)
    assert result.choices["baseline-1"].knob_value is not None

    # a spec of the bundled name with other constants gets its own reference profiles
    hot = emulated_reference_profiles(str(spec_file), models=["resnet18"])[0]
    bundled = emulated_reference_profiles("jetson-nano", models=["resnet18"])[0]
    hot_point = hot.lookup(32, hot.knob_values[0])
    bundled_point = bundled.lookup(32, bundled.knob_values[0])
    assert hot_point.avg_power_w == pytest.approx(bundled_point.avg_power_w + 1.0, abs=0.1)


# --------------------------------------------------------------------------- richer outputs

HF_VIT = """
from transformers import ViTConfig, ViTForImageClassification

def build(num_classes=10):
    return ViTForImageClassification(ViTConfig(
        image_size=8, patch_size=4, num_channels=1, hidden_size=16, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=32, num_labels=num_classes))
"""


def test_a_hugging_face_model_from_a_file_is_profiled_and_trained(tmp_path):
    """A Hugging Face model returns a ModelOutput, not a tensor: its logits are what the
    profiler and the training loop get, as for any model (no wrapper in the user's file)."""
    pytest.importorskip("transformers")
    text = user_model_text(f"{_write(tmp_path / 'vit.py', HF_VIT)}:build", input_shape="1x8x8")
    spec = get_model_spec(text)
    assert spec.default_num_classes == 10
    model = spec.build(num_classes=10)
    assert type(model).__name__ == "ViTForImageClassification"  # the user's class, not a wrapper
    assert model(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    profile = Profiler(EmulatedDevice("jetson-nano"), text, batch_sizes=(8, 16)).run(
        power_cap_w=5.0)
    assert {p.batch_size for p in profile.points} == {8, 16}
    train, test = get_dataset("digits").split(0.2, seed=0)
    config = TrainConfig(model=text, batch_size=16, target_accuracy=0.999, sample_budget=256,
                         eval_every_samples=128, seed=0)
    record = train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"))
    assert record.samples_seen == 256 and record.batch_size == 16 and record.device_time_s > 0


def test_a_module_returning_a_dict_of_logits_is_taken_and_left_as_it_is():
    class DictNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Linear(64, 4)

        def forward(self, x):
            return {"logits": self.head(x.flatten(1)), "hidden": x}

    module = DictNet()
    spec = spec_for_module(module, torch.zeros(2, 1, 8, 8), register=False)
    assert spec.default_num_classes == 4
    assert spec.build(4)(torch.zeros(3, 1, 8, 8)).shape == (3, 4)
    assert isinstance(module(torch.zeros(1, 1, 8, 8)), dict)  # the user's instance: no hook
    class Hidden(DictNet):
        def forward(self, x):
            return {"scores": self.head(x.flatten(1))}

    with pytest.raises(UserModelError, match="an output with a `logits` tensor"):
        spec_for_module(Hidden(), torch.zeros(2, 1, 8, 8), register=False)


def test_profile_auto_profiles_the_module_as_built_for_the_data(net_file):
    """A factory whose default head has 10 classes, built for 3: profile='auto' measures the
    module given, so the profile is of that architecture and the same Session accepts it (it
    used to record the name's default build and refuse its own profile)."""
    import importlib.util

    spec_ = importlib.util.spec_from_file_location("tiny_for_auto", net_file)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    net = module.build(num_classes=3)
    text = user_model_text(f"{net_file}:build")
    for _ in range(2):  # measured, then reused from the cache
        session = Session(EmulatedDevice("jetson-nano"), model=net, model_name=text,
                          example_input=torch.zeros(4, 1, 8, 8),
                          planning=PlanSettings(profile="auto"), cap=5.0)
        with session:
            assert session.profile is not None
            assert session.profile.architecture_fingerprint == architecture_fingerprint(net)
            assert architecture_fingerprint(net) != model_fingerprint(text)  # 3 heads, not 10
    assert any("profile reused" in e for e in session.events)


def test_a_file_of_another_architecture_says_so_without_a_rename_hint(net_file, tmp_path):
    other = _write(tmp_path / "other.py", TINY_NET.format(hidden=32))
    device = EmulatedDevice("jetson-nano")
    profile = Profiler(device, f"{other}:build", batch_sizes=(4, 8)).run(power_cap_w=5.0)
    with pytest.raises(WattcapFileError) as info:
        profile.check_matches(model=f"{net_file}:build",
                              architecture_fingerprint=model_fingerprint(f"{net_file}:build"))
    assert "model_name=" not in str(info.value) and "model_name=" not in str(info.value.hint)
    same = Profiler(device, f"{net_file}:build", batch_sizes=(4, 8)).run(power_cap_w=5.0)
    with pytest.raises(WattcapFileError, match="layers or their shapes differ"):
        same.check_matches(architecture_fingerprint=model_fingerprint(f"{other}:build"))
    with pytest.raises(WattcapFileError) as info:  # same architecture, another name: the hint
        same.check_matches(model="my-net",
                           architecture_fingerprint=model_fingerprint(f"{net_file}:build"))
    assert "model_name=" in str(info.value.hint)
