"""Progress reporting: plain lines throttled by an injected clock, and the choice of reporter."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from wattcap.core.progress import PlainProgress, RichProgress, make_progress


class FakeClock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def _plain(total: int | None, clock: FakeClock) -> tuple[PlainProgress, io.StringIO]:
    stream = io.StringIO()
    return PlainProgress("sweep", total, "runs", stream=stream, interval_s=10.0,
                         step_fraction=0.1, clock=clock), stream


def _lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_plain_lines_at_each_tenth_at_most_every_ten_seconds_between_and_at_the_end() -> None:
    clock = FakeClock()
    report, stream = _plain(100, clock)
    with report:
        assert _lines(stream) == ["sweep: 0/100 runs (0%), 0:00:00 elapsed"]
        clock.now_s += 1
        report.update(5, "b=4")                   # below the first tenth, 1 s later: quiet
        clock.now_s += 1
        report.update(10, "b=8")                  # the first tenth: a line
        clock.now_s += 1
        report.update(19)                         # same tenth, 1 s after the last line: quiet
        clock.now_s = 100.0 + 2 + 9.9
        report.update(19, "still b=8")            # 9.9 s since the last line: quiet
        clock.now_s = 100.0 + 2 + 10
        report.update(19)                         # 10 s since the last line: a line
        clock.now_s += 1
        report.update(55)                         # jumps four tenths: one line, not four
        clock.now_s += 1
        report.update(100, "done b=128")          # the whole: a line
    assert _lines(stream) == [
        "sweep: 0/100 runs (0%), 0:00:00 elapsed",
        "sweep: 10/100 runs (10%), 0:00:02 elapsed; b=8",
        "sweep: 19/100 runs (19%), 0:00:12 elapsed; still b=8",
        "sweep: 55/100 runs (55%), 0:00:13 elapsed; still b=8",
        "sweep: 100/100 runs (100%), 0:00:14 elapsed; done b=128",
    ]  # leaving did not repeat the last line: it already showed the end state


def test_plain_end_line_shows_a_state_the_throttle_held_back() -> None:
    clock = FakeClock()
    report, stream = _plain(200, clock)
    with report:
        clock.now_s += 3
        report.update(7, "b=4 seed=1: 512 samples")
    assert _lines(stream)[-1] == "sweep: 7/200 runs (3%), 0:00:03 elapsed; b=4 seed=1: 512 samples"
    assert len(_lines(stream)) == 2


def test_plain_without_a_total_prints_only_on_time_and_at_the_end() -> None:
    clock = FakeClock()
    report, stream = _plain(None, clock)
    with report:
        for _ in range(25):
            clock.now_s += 1
            report.advance()
    # start, after 10 s and 20 s, and the end state at 25 s
    assert [line.split(",")[0] for line in _lines(stream)] == [
        "sweep: 0 runs", "sweep: 10 runs", "sweep: 20 runs", "sweep: 25 runs"]
    assert "%" not in stream.getvalue()


def test_plain_says_when_the_work_stopped_on_an_error() -> None:
    clock = FakeClock()
    report, stream = _plain(10, clock)
    with pytest.raises(KeyError), report:
        report.update(3)
        raise KeyError("boom")
    assert _lines(stream)[-1] == "sweep: 3/10 runs (30%), 0:00:00 elapsed (stopped)"


def test_updates_before_start_or_after_the_end_print_nothing() -> None:
    clock = FakeClock()
    report, stream = _plain(10, clock)
    report.update(5)
    assert stream.getvalue() == ""
    with report:
        pass
    before = stream.getvalue()
    report.update(10)
    assert stream.getvalue() == before


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        PlainProgress("x", -1, "runs")
    with pytest.raises(ValueError):
        PlainProgress("x", 10, "runs", interval_s=0)
    with pytest.raises(ValueError):
        PlainProgress("x", 10, "runs", step_fraction=1.5)


def test_a_pipe_gets_plain_lines_and_a_terminal_gets_a_bar() -> None:
    piped = Console(file=io.StringIO())
    with make_progress(piped, "profiling", 4, "points") as report:
        report.update(4, "b=4")
    assert isinstance(report, PlainProgress)
    assert piped.file.getvalue().splitlines()[-1].startswith("profiling: 4/4 points (100%)")

    terminal = Console(file=io.StringIO(), force_terminal=True, width=120)
    with make_progress(terminal, "profiling", 4, "points") as report:
        report.update(3, "b=8 f=921.6 MHz")
    assert isinstance(report, RichProgress)
    drawn = terminal.file.getvalue()
    assert "\x1b[" in drawn  # a live terminal display, not plain lines
    assert "3/4 points" in drawn and "b=8 f=921.6 MHz" in drawn


def test_a_reporter_follows_the_one_progress_protocol() -> None:
    from wattcap.core.progress import JobProgress

    piped = Console(file=io.StringIO(), force_terminal=False, width=200)
    with make_progress(piped, "sweep", 4, "runs") as report:
        report.show(JobProgress(1, 4, "runs", "b=8 seed=0: 512 samples to target"))
        assert (report.completed, report.total, report.detail) == \
            (1, 4, "b=8 seed=0: 512 samples to target")
        report.show(JobProgress(2, 6, "runs"))  # a grown total (retries); a message-less step
        assert (report.completed, report.total, report.detail) == \
            (2, 6, "b=8 seed=0: 512 samples to target")


def test_a_session_status_is_a_progress_update() -> None:
    from wattcap.runtime.session import SessionStatus

    status = SessionStatus(samples=512, steps=16, device_time_s=3.25, accuracy=0.8,
                           target_accuracy=0.9, power_w=4.5, power_cap_w=5.0,
                           frequency_hz=614_400_000, batch_size=32, sample_budget=2048)
    assert (status.done, status.total, status.unit, status.item) == (512, 2048, "samples",
                                                                     status)
    assert status.detail == ("accuracy 80.0% (target 90%), 4.50 W (cap 5 W), b=32 at 614 MHz, "
                             "3.2 s of device time")
    deviceless = dataclasses.replace(status, device_time_s=0.0, frequency_hz=None, power_w=None)
    assert deviceless.detail == "accuracy 80.0% (target 90%), b=32"  # no device: no device time
    piped = Console(file=io.StringIO(), force_terminal=False, width=200)
    with make_progress(piped, "training", 2048, "samples") as report:
        report.show(status)
        assert report.completed == 512 and "614 MHz" in report.detail


def test_every_long_job_takes_the_one_progress_callback() -> None:
    import inspect

    from wattcap.experiments.compare import estimate_proxy_efficiency, math_runs, run_comparison
    from wattcap.measure.profiling import Profiler
    from wattcap.train.efficiency import estimate_efficiency
    from wattcap.train.noise_scale import estimate_efficiency_gns

    for job in (Profiler, estimate_efficiency, estimate_efficiency_gns, math_runs,
                estimate_proxy_efficiency, run_comparison):
        annotation = str(inspect.signature(job).parameters["progress"].annotation)
        assert annotation.replace("ProgressCallback", "OnProgress") == "OnProgress | None", \
            (job, annotation)


def test_a_percentage_is_never_rounded_up_to_100() -> None:
    from wattcap.core.progress import percent

    assert percent(0.996) == "99%" and percent(1.0) == "100%"
    assert percent(0.9996, 1) == "99.9%" and percent(0.3) == "30%"
    line = PlainProgress("sweep", 1000, "runs", stream=io.StringIO())
    line.completed = 996
    assert "(99%)" in line.line()


def test_before_the_first_unit_a_jobs_message_is_shown_at_once() -> None:
    """The first unit of a sweep may take minutes: what the job is about to do is printed as
    soon as the job says it, not when the throttle next lets a line through."""
    clock = FakeClock()
    report, stream = _plain(6, clock)
    with report:
        report.update(0, "6 runs; the first trains the whole budget")  # no time passed: shown
        report.update(0, "6 runs; the first trains the whole budget")  # nothing new: quiet
        clock.now_s += 90
        report.update(1, "b=128 seed=0")                               # the first tenth
        clock.now_s += 1
        report.update(1, "a message once a unit is done")              # throttled as before
    assert _lines(stream)[:3] == [
        "sweep: 0/6 runs (0%), 0:00:00 elapsed",
        "sweep: 0/6 runs (0%), 0:00:00 elapsed; 6 runs; the first trains the whole budget",
        "sweep: 1/6 runs (16%), 0:01:30 elapsed; b=128 seed=0",
    ]
    assert len(_lines(stream)) == 4  # and the end state


def test_a_proxy_sweep_says_what_it_will_do_before_its_first_run() -> None:
    """`estimate`'s first run (the automatic target's, the whole budget) is its longest: the
    line before it says how many runs there are and that this one is long. Each run "takes" a
    minute on the injected clock, so the announcement's time is read from the reporter."""
    from wattcap.train.efficiency import estimate_efficiency

    clock = FakeClock()
    report, stream = _plain(4, clock)

    def show(update: object) -> None:
        if getattr(update, "item", None) is not None:
            clock.now_s += 60  # a run finished: a minute went by
        report.show(update)  # type: ignore[arg-type]

    with report:
        estimate_efficiency("digits-cnn", "digits", "auto", batch_sizes=(16, 32), seeds=2,
                            sample_budget=256, eval_every_samples=128, budget_extension=None,
                            lr_ref=1e-3, batch_size_ref=32, progress=show)
    first, announced, after = _lines(stream)[:3]
    assert first == "sweep: 0/4 runs (0%), 0:00:00 elapsed"
    assert announced == ("sweep: 0/4 runs (0%), 0:00:00 elapsed; 4 runs (2 batch size(s) x 2 "
                         "seed(s)); the first, b=32 seed 0, trains the whole 256-sample budget "
                         "to set the proxy's target")
    assert after.startswith("sweep: 1/4 runs (25%), 0:01:00 elapsed; b=32 seed=0")
