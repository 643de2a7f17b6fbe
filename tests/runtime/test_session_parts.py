"""The Session is a facade over parts; building one touches no hardware and never profiles:
opening a device given by name, profile="auto" and applying the plan happen in start()
(issue 25)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import wattcap.devices as devices
import wattcap.measure.profiling as profiling
from wattcap.runtime.session import Session, SessionError


class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch, tmp_path) -> dict[str, list]:
    """Record every device opened by name and every profiling run."""
    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(tmp_path))  # no cached profile to reuse
    calls: dict[str, list] = {"opened": [], "profiled": []}
    real_get_device, real_run = devices.get_device, profiling.Profiler.run

    def get_device(name, *args, **kwargs):
        calls["opened"].append(name)
        return real_get_device(name, *args, **kwargs)

    def run(self, *args, **kwargs):
        calls["profiled"].append(self.model)
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(devices, "get_device", get_device)
    monkeypatch.setattr(profiling.Profiler, "run", run)
    return calls


def _session() -> Session:
    torch.manual_seed(0)
    return Session("emulated:jetson-nano", model=TinyNet(), model_name="tiny-net",
                   example_input=torch.randn(8, 1, 8, 8), profile="auto", power_cap_w=4.0,
                   target_accuracy=0.9, sample_budget=256)


def test_building_a_session_opens_no_device_and_measures_nothing(spies) -> None:
    session = _session()
    assert spies == {"opened": [], "profiled": []}
    assert session.device is None
    with pytest.raises(SessionError, match="call start"):
        _ = session.batch_size  # planned only once the device is profiled


def test_start_opens_the_device_profiles_and_applies_the_plan(spies) -> None:
    session = _session()
    with session:
        assert spies["opened"] == ["emulated:jetson-nano"]
        # the model first; then the reference models that define the safe frequency
        assert spies["profiled"][0] == "tiny-net"
        assert set(spies["profiled"][1:]) <= {"resnet18", "mobilenetv2", "efficientvit"}
        assert session.profile is not None and session.plan is not None
        assert session.batch_size == session.plan.choices["wattcap"].batch_size
        assert session.device is not None
        assert session.device.current_frequency_hz() == session.frequency_hz
    assert session.record is not None


def test_the_session_delegates_to_parts_with_one_job_each() -> None:
    from wattcap.runtime.cap_control import CapControl
    from wattcap.runtime.checkpointing import Checkpointing
    from wattcap.runtime.device_guard import DeviceGuard
    from wattcap.runtime.gns_part import NoiseScalePart
    from wattcap.runtime.record_builder import RecordBuilder

    session = Session(None, model="digits-cnn", batch_size=8)
    parts = {type(part) for part in (session._cap, session._checkpointing, session._noise,
                                     session._records, session._guard_part)}
    assert parts == {CapControl, Checkpointing, NoiseScalePart, RecordBuilder, DeviceGuard}
    assert all(part.session is session for part in (session._cap, session._records))


def test_a_session_is_built_from_one_config_object(spies) -> None:
    import dataclasses
    import inspect

    from wattcap.runtime.session_config import SessionConfig

    # the documented keywords are exactly the config's fields, with the same defaults
    fields = {f.name: f.default for f in dataclasses.fields(SessionConfig)}
    parameters = {name: p.default for name, p in inspect.signature(Session).parameters.items()}
    assert parameters == fields

    config = SessionConfig("emulated:jetson-nano", model="digits-cnn", power_cap_w=4.0,
                           batch_size=32, frequency_hz=None, target_accuracy=0.9)
    by_config = Session.from_config(config)
    by_keywords = Session("emulated:jetson-nano", model="digits-cnn", power_cap_w=4.0,
                          batch_size=32, target_accuracy=0.9)
    assert by_config.settings == by_keywords.settings == config
    assert (by_config.batch_size, by_config.learning_rate, by_config.identity) == \
        (by_keywords.batch_size, by_keywords.learning_rate, by_keywords.identity)
    # another run alike, one setting changed
    other = Session.from_config(dataclasses.replace(config, batch_size=64))
    assert other.batch_size == 64 and other.learning_rate > by_config.learning_rate
    assert spies["opened"] == []  # a config, like the constructor, opens nothing


@pytest.mark.parametrize(("settings", "message"), [
    ({"power_cap_w": 0.0}, "positive number of watts"),
    ({"power_cap_w": float("nan")}, "positive number of watts"),
    ({"power_cap_w": 5.0, "power_cap": "solar:seed=1"}, "not both"),
    ({"target_accuracy": 1.5}, r"target 1.5 is outside accuracy's range \(0, 1\]"),
    ({"drift_tolerance": -0.1}, "drift_tolerance"),
    ({"max_pause_s": 0}, "max_pause_s"),
    ({"cap_policy": "sometimes"}, "unknown cap_policy"),
])
def test_a_config_is_checked_when_it_is_made(settings: dict, message: str) -> None:
    from wattcap.runtime.session_config import SessionConfig

    with pytest.raises(SessionError, match=message):
        SessionConfig(None, **settings)
