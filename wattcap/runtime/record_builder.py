"""The run record of a Session (a Session part): what was trained, how long, at what power and
energy (the hardware counter where there is one), with the watchdog's and drift monitor's events."""

from __future__ import annotations

import time
from typing import Any

from wattcap.core.observed_clock import ObservedFrequency
from wattcap.core.run import RunRecord
from wattcap.devices.clock_clamp import describe_clamp


class RecordBuilder:
    """The run record of a Session: one job of the Session, on its state."""

    def __init__(self, session: Any) -> None:
        # the Session (typed Any: this module must not import it, or the two would cycle)
        self.session = session

    def counter_energy_j(self) -> float | None:
        session = self.session
        if session._counter_start_j is None or session.device is None:
            return None
        now_j = session.device.energy_counter_j()
        if now_j is None:
            return None
        return session._energy_before_j + now_j - session._counter_start_j

    def observed_clock(self) -> ObservedFrequency | None:
        clock = self.session._meter.clock
        if clock.mean_hz is None:
            return None
        return ObservedFrequency(mean_hz=round(clock.mean_hz), min_hz=clock.min_hz,
                                 max_hz=clock.max_hz, readings=clock.readings)

    def build(self) -> RunRecord:
        session = self.session
        guard, monitor, device = session._guard, session._monitor, session.device
        events = list(session.events)
        if guard is not None:
            for v in guard.violations:
                events.append(f"cap exceeded for {v.duration_s:.2f} s at t={v.start_s:.1f} s "
                              f"(max {v.max_power_w:.2f} W)")
            events += [f"watchdog: {note}" for note in guard.notes]
        if monitor is not None:
            events += [f"drift monitor: {note}" for note in monitor.notes]
            for replan in monitor.replans:
                events.append(
                    f"re-planned at t={replan.time_s:.1f} s: {replan.from_hz / 1e6:.1f} -> "
                    f"{replan.to_hz / 1e6:.1f} MHz ({replan.reason}; re-measured "
                    f"{len(replan.points)} points in {replan.remeasure_device_s:.1f} s)")
        events += [describe_clamp(clamp) for clamp in session._guard_part.run_clamps()]
        if device is not None:
            events += [f"power sensor changed: {change}" for change in device.sensor_changes]
            events += [f"device: {event}" for event in device.events]
        if device is not None and device.sensor_error is not None:
            events.append(f"power sensor stopped: {device.sensor_error.message}")
        energy_j = self.counter_energy_j()
        energy_source = None if device is None else "sensor" if energy_j is None else "counter"
        if energy_j is None:
            # to the end of the run: its time since the last reading too (at that power)
            energy_j = session._meter.energy_j if device is None else \
                session._meter.energy_to_j(device.now_s())
            if device is not None and session._meter.measured_energy_j is None:
                energy_source = "none"  # no reading (shorter than a period): not a measured 0 J
        reached_at = session.samples_to_target
        time_to_accuracy_s = None if reached_at is None else session.time_at_samples_s(reached_at)
        return RunRecord(
            config=session.config, model=session.model_name or "unknown",
            batch_size=session.batch_size,
            learning_rate=session.learning_rate, target_accuracy=session.target_accuracy,
            target_metric=session.target_metric,
            sample_budget=session.sample_budget, dataset=session.dataset, method=session.method,
            device=device.name if device else None,
            device_kind=device.kind if device else None, torch_device=session.torch_device,
            frequency_hz=device.run_frequency_hz() if device else None,
            knob_kind=session.knob_kind,
            knob_value=None if session.knob_kind == "gpu_clock" else session.knob_value,
            observed_frequency_hz=self.observed_clock(),
            power_cap_w=session.power_cap_w, reached=reached_at is not None,
            samples_to_target=reached_at, time_to_accuracy_s=time_to_accuracy_s,
            samples_seen=session.samples, steps=session.steps,
            final_accuracy=session.curve[-1].accuracy if session.curve else 0.0,
            curve=session.curve,
            device_time_s=session.device_time_s, energy_j=energy_j,
            peak_power_w=session._meter.peak_w, avg_power_w=session._meter.average_w,
            cap_violations=guard.violations if guard else [],
            frequency_steps=guard.steps if guard else [],
            drift_events=monitor.events if monitor else [],
            replans=monitor.replans if monitor else [], energy_source=energy_source,
            clock_clamps=session._guard_part.run_clamps(),
            events=events, resumed_from_samples=session.resumed_from_samples,
            wall_time_s=time.monotonic() - session._wall_start,
            weights_source=session.weights_source,
            architecture_fingerprint=session.architecture_fingerprint,
        )
