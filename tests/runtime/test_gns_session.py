"""efficiency="gns" on the device: measure the noise scale on the run's own data, then re-plan
the batch size and frequency once, learning rate √-scaled and the optimiser's state kept."""

from __future__ import annotations

import pytest
import torch

from wattcap.algorithms.planner import plan
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice
from wattcap.measure.profiling import Profiler
from wattcap.models import get_model_spec
from wattcap.runtime.gns_replan import GnsSettings
from wattcap.runtime.session import Session, SessionError
from wattcap.runtime.session_config import DeviceHandling, PlanSettings, Reporting
from wattcap.train.loop import BatchStream, TrainConfig, train_to_accuracy

MODEL = "digits-cnn"
CAP_W = 4.5


@pytest.fixture(scope="module")
def profile():
    return Profiler(EmulatedDevice("jetson-nano"), MODEL).run(exhaustive=True)


@pytest.fixture(scope="module")
def data():
    return get_dataset("digits").split(0.2, seed=0)


def test_session_measures_then_replans_keeping_the_optimiser(profile, data) -> None:
    train, _ = data
    spec_lr = 2e-3
    settings = GnsSettings(samples=512, chunks=4)
    torch.manual_seed(0)
    spec = get_model_spec(MODEL)
    net = spec.build(num_classes=train.num_classes)
    with Session("emulated:jetson-nano", model=MODEL,
                 planning=PlanSettings(profile=profile, efficiency=settings, batch_size=64,
                                       lr_ref=spec_lr, batch_size_ref=64),
                 cap=CAP_W, reporting=Reporting(dataset=train.name),
                 device_handling=DeviceHandling(handle_signals=False)) as session:
        assert session.measuring_noise_scale and session.batch_size == 64
        optimizer = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
        session.attach(net, optimizer)
        x, y = train.to_tensors()
        stream = BatchStream(len(train), 0)
        steps_before = 0
        while session.measuring_noise_scale:
            b = session.batch_size
            for _ in range(256 // b):
                idx = torch.from_numpy(stream.indices(session.samples, b))
                with session.step():
                    optimizer.zero_grad()
                    session.backward(lambda a, t: spec.loss(net(a), t), x[idx], y[idx])
                    optimizer.step()
                steps_before += 1
            session.report(0.5)
        assert session.samples == 512  # re-planned at the first report past the window
        vector = session.efficiency
        assert vector is not None and vector.ratio_source == "gns"
        assert vector.noise_scale.b_big == 64 and vector.noise_scale.b_small == 16
        assert vector.noise_scale.steps == steps_before - 1  # Adam's first step: warm-up
        expected = plan(profile, CAP_W, efficiency=vector).choices["wattcap"]
        assert (session.batch_size, session.frequency_hz) == (
            expected.batch_size, expected.knob_value)
        assert session.device.current_frequency_hz() == expected.knob_value
        # √ rule on the live optimiser, and Adam's moments were not reset
        assert optimizer.param_groups[0]["lr"] == pytest.approx(
            spec_lr * (session.batch_size / 64) ** 0.5)
        state = optimizer.state[next(net.parameters())]
        assert int(state["step"]) == steps_before
        assert any("gns re-plan at 512 samples" in e for e in session.events)
    assert session.record is not None
    assert session.record.batch_size == expected.batch_size
    assert any("B_noise" in e for e in session.record.events)


def test_our_loop_follows_the_gns_replan(profile, data) -> None:
    train, test = data
    config = TrainConfig(model=MODEL, batch_size=64, target_accuracy=0.99,
                         sample_budget=1024, eval_every_samples=256, lr_ref=2e-3,
                         batch_size_ref=64)
    with EmulatedDevice("jetson-nano") as device:
        record = train_to_accuracy(config, train, test, device=device, power_cap_w=CAP_W,
                                   profile=profile, efficiency=GnsSettings(samples=512))
    replans = [e for e in record.events if e.startswith("gns re-plan at 512 samples")]
    assert len(replans) == 1
    assert record.samples_seen == 1024  # the cadence held across the change of batch size
    assert [p.samples for p in record.curve] == [256, 512, 768, 1024]
    assert f"-> {record.batch_size}," in replans[0]


def test_gns_needs_a_profile_and_the_attached_optimiser(profile) -> None:
    with pytest.raises(SessionError, match="needs a profile"):
        Session(None, model=MODEL, planning=PlanSettings(batch_size=32, efficiency="gns"))
    net = torch.nn.Linear(3, 2)
    with Session("emulated:jetson-nano", model=MODEL,
                 planning=PlanSettings(profile=profile, efficiency="gns"), cap=CAP_W,
                 device_handling=DeviceHandling(handle_signals=False)) as session, \
            pytest.raises(SessionError, match="attach"):
        session.backward(lambda a, t: net(a).sum(), torch.zeros(4, 3), torch.zeros(4))
    config = TrainConfig(model=MODEL, batch_size=32, target_accuracy=0.9,
                         eval_every_samples=96)
    train = get_dataset("digits").split(0.2, seed=0)
    with pytest.raises(ValueError, match="divide eval_every_samples"):
        train_to_accuracy(config, *train, profile=profile, efficiency="gns")
