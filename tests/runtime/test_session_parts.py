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
from wattcap.runtime.session_config import Goal, PlanSettings


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
                   example_input=torch.randn(8, 1, 8, 8), planning=PlanSettings(profile="auto"),
                   cap=4.0, goal=Goal(target_accuracy=0.9, sample_budget=256))


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

    session = Session(None, model="digits-cnn", planning=PlanSettings(batch_size=8))
    parts = {type(part) for part in (session._cap, session._checkpointing, session._noise,
                                     session._records, session._guard_part)}
    assert parts == {CapControl, Checkpointing, NoiseScalePart, RecordBuilder, DeviceGuard}
    assert all(part.session is session for part in (session._cap, session._records))


def test_a_session_is_built_from_one_config_object(spies) -> None:
    import dataclasses
    import inspect

    from wattcap.runtime.session_config import CapSettings, SessionConfig

    # the constructor's arguments are exactly the config's fields, with the same defaults
    fields = [f.name for f in dataclasses.fields(SessionConfig)]
    assert list(inspect.signature(Session).parameters) == fields
    assert Session(None, planning=PlanSettings(batch_size=8)).settings == \
        SessionConfig(None, planning=PlanSettings(batch_size=8))

    config = SessionConfig("emulated:jetson-nano", model="digits-cnn",
                           planning=PlanSettings(batch_size=32), cap=CapSettings(power_cap=4.0),
                           goal=Goal(target_accuracy=0.9))
    by_config = Session.from_config(config)
    by_keywords = Session("emulated:jetson-nano", model="digits-cnn",
                          planning=PlanSettings(batch_size=32), cap=4.0,
                          goal=Goal(target_accuracy=0.9))
    assert by_config.settings == by_keywords.settings == config
    assert (by_config.batch_size, by_config.learning_rate, by_config.identity) == \
        (by_keywords.batch_size, by_keywords.learning_rate, by_keywords.identity)
    # another run alike, one setting changed
    other = Session.from_config(dataclasses.replace(
        config, planning=dataclasses.replace(config.planning, batch_size=64)))
    assert other.batch_size == 64 and other.learning_rate > by_config.learning_rate
    assert spies["opened"] == []  # a config, like the constructor, opens nothing


def test_the_constructor_takes_a_few_typed_parts() -> None:
    import inspect

    parameters = inspect.signature(Session).parameters
    assert len(parameters) <= 12, f"Session takes {len(parameters)} parameters: {list(parameters)}"


def test_the_shorthands_become_their_parts(tmp_path) -> None:
    from wattcap.runtime.session_config import (
        CapSettings,
        CheckpointSettings,
        Reporting,
        SessionConfig,
    )

    def progress(status: object) -> None:
        del status

    config = SessionConfig(None, cap="solar:seed=1", checkpoint=tmp_path,  # type: ignore[arg-type]
                           reporting=progress)
    assert config.cap == CapSettings(power_cap="solar:seed=1")
    assert config.cap.moving == "solar:seed=1" and config.cap.constant_w is None
    assert config.checkpoint == CheckpointSettings(directory=tmp_path)
    assert config.reporting == Reporting(progress=progress)
    assert CapSettings(power_cap=5).constant_w == 5.0 and CapSettings(power_cap=5).moving is None
    with pytest.raises(SessionError, match="must be a Goal"):
        SessionConfig(None, goal=0.9)  # type: ignore[arg-type]


@pytest.mark.parametrize(("part", "settings", "message"), [
    ("cap", {"power_cap": 0.0}, "positive number of watts"),
    ("cap", {"power_cap": float("nan")}, "positive number of watts"),
    ("goal", {"target_accuracy": 1.5}, r"target 1.5 is outside accuracy's range \(0, 1\]"),
    ("cap", {"drift_tolerance": -0.1}, "drift_tolerance"),
    ("cap", {"max_pause_s": 0}, "max_pause_s"),
    ("cap", {"policy": "sometimes"}, "unknown cap policy"),
    ("planning", {"risk": 1.0}, "risk must be a quantile"),
    ("cap", {"batch_size_hold_s": -1.0}, "batch_size_hold_s"),
])
def test_a_config_is_checked_when_it_is_made(part: str, settings: dict, message: str) -> None:
    from wattcap.runtime.session_config import CapSettings, Goal, PlanSettings

    kind = {"cap": CapSettings, "goal": Goal, "planning": PlanSettings}[part]
    with pytest.raises(SessionError, match=message):
        kind(**settings)


def test_profile_auto_measures_in_rounds_where_the_device_calls_for_them(
        spies, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """profile="auto" on real hardware measures 2 rounds (the emulator standing in, its
    default made real hardware's), and says so in the run's events; where the first round
    took longer than allowed, one round, also said."""
    import wattcap.measure.profile_rounds as rounds_module

    monkeypatch.setattr(rounds_module, "default_rounds", lambda device: 2)
    with _session() as session:
        assert session.profile is not None and session.profile.rounds == 2
        assert any("2 rounds" in event for event in session.events)
    monkeypatch.setattr(rounds_module, "DEFAULT_ROUNDS_MAX_FIRST_S", 0.0)
    # a cache of its own: the profile above must not be reused
    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(tmp_path_factory.mktemp("one-round")))
    with _session() as session:
        assert session.profile is not None and session.profile.rounds == 1
        assert any("one round only" in event for event in session.events), session.events
