"""`wattcap profile` (measure, dry-run, refresh) and `wattcap plot-profile`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from wattcap.cli.cap_checks import warn_if_cap_below_every_point, warn_if_cap_below_idle
from wattcap.cli.common import (
    check_device_extra,
    console,
    fail,
    load_or_fail,
    open_device,
    parse_batch_sizes,
    parse_cap,
    parse_drift,
    progress,
    watts,
)
from wattcap.cli.inputs import resolve_model
from wattcap.cli.options import (
    BatchSizesOpt,
    DeviceOpt,
    DevicePowerModeOpt,
    DriftOpt,
    DryRunOpt,
    EfficiencyOpt,
    InputShapeOpt,
    NumClassesOpt,
    PowerCapOpt,
    PowerLimitsOpt,
    ProfileKnobOpt,
    VocabSizeOpt,
)
from wattcap.cli.resume import resumable

if TYPE_CHECKING:
    from wattcap.core.profile import ProfilePoint, ProfileTable
    from wattcap.devices import Device
    from wattcap.measure.profile_refresh import RefreshResult


def emulate_power_limit(dev: Device) -> None:
    """An emulated board has no power limit of its own (a Jetson has none): for a power-limit
    table, wattcap emulates one as NVML enforces it, and says so."""
    from wattcap.devices import EmulatedDevice

    # a spec with a power limit range (a datacenter GPU) has its own limit: nothing to say
    if isinstance(dev, EmulatedDevice) and not dev.power_limit_emulated:
        dev.power_limit_emulated = True
        console.print("[dim]the emulated board has no power limit of its own: wattcap emulates "
                      "one as NVML enforces it (each step at the highest clock whose average "
                      "power stays under it)[/]")


def print_device_readout(dev: Device) -> None:
    """What a dry run reads from the device: identity, clocks, sensor, memory."""
    from wattcap.devices import DeviceError

    freqs = dev.frequencies_hz()
    mode = getattr(dev, "power_mode", None)
    mode = mode() if callable(mode) else mode
    console.print(f"device {dev.name} ({dev.kind}" + (f", power mode {mode})" if mode else ")"))
    console.print(f"  {len(freqs)} GPU frequencies: "
                  + ", ".join(f"{f / 1e6:.1f}" for f in freqs) + " MHz")
    try:
        console.print(f"  current frequency {dev.current_frequency_hz() / 1e6:.1f} MHz")
    except (DeviceError, OSError) as err:
        console.print(f"  current frequency unreadable: {escape(str(err))}", highlight=False)
    try:
        console.print(f"  power now {dev.read_power_w():.2f} W on {dev.sensor_rail}, a new "
                      f"reading every {dev.sensor_period_s * 1e3:.0f} ms")
    except DeviceError as err:
        console.print(f"  [yellow]power unreadable:[/] {escape(str(err))}", highlight=False)
    console.print(f"  memory usable for training {dev.memory_bytes() / 2**30:.2f} GiB")


def print_refresh(result: RefreshResult, source: Path, out: Path) -> None:
    """The re-measured points next to the old ones, and what that means for planning."""
    cap = result.power_cap_w
    title = (f"{result.table.model} on {result.table.device}: frontier re-measured "
             + (f"for a cap of {cap:g} W" if cap is not None else "(no cap)"))
    table = Table(title=title)
    for column in ("batch", "MHz", "old peak W", "new peak W", "peak change",
                   "old ms/sample", "new ms/sample", "time change", "under cap"):
        table.add_column(column, justify="right")
    for change in result.changes:
        old, new = change.old, change.new
        table.add_row(
            str(new.batch_size), f"{new.knob_value / 1e6:.1f}",
            f"{old.peak_power_w:.2f}" if old else "—", f"{new.peak_power_w:.2f}",
            f"{change.power_change:+.1%}" if old else "new",
            f"{old.seconds_per_sample * 1e3:.3f}" if old else "—",
            f"{new.seconds_per_sample * 1e3:.3f}",
            f"{change.time_change:+.1%}" if old else "new",
            "yes" if cap is None or new.peak_power_w <= cap else "[red]no[/]",
        )
    console.print(table)
    for b, (old_hz, new_hz) in sorted(result.frontier_moved().items()):
        now = f"{new_hz / 1e6:.1f} MHz" if new_hz else "none measured under the cap"
        console.print(f"  [yellow]b={b}: highest feasible frequency {old_hz / 1e6:.1f} MHz -> "
                      f"{now}[/]")
    if result.skipped:
        console.print(f"  [dim]not re-measured (no longer fits or frequency not offered): "
                      f"batch sizes {result.skipped}[/]")
    # the spread between rounds of the re-measured points only (the others keep their own)
    remeasured = result.table.model_copy(update={"points": [c.new for c in result.changes]})
    _print_rounds(remeasured, result.round_device_s, result.round_gap_s, result.rounds_skipped)
    largest = max((abs(c) for ch in result.changes
                   for c in (ch.time_change, ch.power_change) if c is not None), default=0.0)
    if largest > 0.1:
        console.print(f"[bold yellow]the device changed since {source} was measured[/] (up to "
                      f"{largest:.0%}): plan again with {out}")
    else:
        console.print(f"no change beyond 10 % (largest {largest:.1%}): the profile still holds")


def _spec_name(name_or_path: str) -> str | None:
    """The device name of an emulated spec (bundled name or spec file), None if unreadable."""
    from wattcap.devices.spec import load_spec

    try:
        return load_spec(name_or_path).name
    except (KeyError, ValueError):
        return None


def _point_detail(point: ProfilePoint | None, label: str, cap_w: float | None) -> str:
    """The latest measured point, its peak power against the cap when there is one."""
    if point is None:
        return label
    versus = f" (cap {cap_w:g} W)" if cap_w is not None else ""
    return f"{label}: peak {point.peak_power_w:.2f} W{versus}"


def profile(
    device: DeviceOpt = "emulated:jetson-nano",
    model: Annotated[str | None, typer.Option(
        help="Registered model name (default resnet18; with --refresh, the profile's model), "
        "or your own: path/to/file.py:factory or package.module:factory.")] = None,
    out: Annotated[Path | None, typer.Option(
        help="The profile (JSON) to write (with --refresh, default: overwrite FILE).")] = None,
    power_cap: PowerCapOpt = None,
    exhaustive: Annotated[bool, typer.Option(help="Measure every (b, f).")] = False,
    few_points: Annotated[bool, typer.Option(
        "--few-points", help="Measure a few points (10 % of the grid) and predict the rest "
        "with a fitted device model, measuring where the cap's frontier is uncertain.")] = False,
    max_points: Annotated[int | None, typer.Option(
        help="With --few-points: most points to measure (default 10 % of the grid).")] = None,
    power_mode: DevicePowerModeOpt = None,
    knob: ProfileKnobOpt = "gpu-clock",
    power_limits: PowerLimitsOpt = None,
    batch_sizes: BatchSizesOpt = "4,8,16,32,64,128",
    refresh: Annotated[Path | None, typer.Option(
        "--refresh", metavar="FILE", help="Re-measure only the feasible frontier of this "
        "profile and show what changed (the device may have drifted).")] = None,
    dry_run: DryRunOpt = False,
    drift: DriftOpt = None,
    input_shape: InputShapeOpt = None,
    num_classes: NumClassesOpt = None,
    vocab_size: VocabSizeOpt = None,
    rounds: Annotated[int | None, typer.Option(
        help="Measure every point in this many rounds, apart in time, and merge them: time "
        "per sample the mean, its spread the larger of one window's error and the spread "
        "between rounds (what plans read for their margin and near ties), peak power the "
        "largest; a few-point profile measures its measured points again and predicts the rest "
        "from them all; with --refresh, each later round measures the re-measured frontier "
        "again. Default: 2 on real hardware (1 where the first round took over 15 minutes, "
        "said so), 1 on an emulated device.",
        show_default=False)] = None,
    round_gap_s: Annotated[float | None, typer.Option(
        help="With --rounds: seconds the device idles between rounds (default 60 on real "
        "hardware; 0 on an emulated device, whose virtual clock changes nothing while it "
        "idles).")] = None,
) -> None:
    """Measure peak power and time per sample over (batch size, knob value; --knob: the
    GPU clock, the power limit or the power mode): pruned for --power-cap (the cap whose
    frontier --refresh re-measures), else every point."""
    from wattcap.core.profile import ProfileTable
    from wattcap.devices import DeviceError

    cap = parse_cap(power_cap)
    check_device_extra(device)
    previous = load_or_fail(ProfileTable, refresh) if refresh is not None else None
    if previous is not None:
        model = model or previous.model
        emulated_spec = device.partition(":")[2] or "jetson-nano"
        if device.startswith("emulated") and _spec_name(emulated_spec) == previous.device:
            # The emulated device in the profile's power mode (its frequency list) by default.
            power_mode = power_mode or previous.power_mode
    model = resolve_model(model or "resnet18", input_shape, num_classes, vocab_size).name
    if out is None and refresh is None and not dry_run:
        fail("--out is required (the profile JSON to write)")
    if few_points and (exhaustive or refresh is not None):
        fail("--few-points cannot be combined with --exhaustive or --refresh")
    if max_points is not None and (not few_points or max_points < 3):
        fail("--max-points needs --few-points and at least 3 points")
    if knob not in ("gpu-clock", "power-mode", "power-limit"):
        fail(f"--knob must be gpu-clock, power-mode or power-limit, not {knob!r}")
    if knob != "gpu-clock" and (few_points or refresh is not None or cap is not None):
        fail(f"--knob {knob} measures every (batch size, knob value): no --few-points, "
             "--refresh or --power-cap")
    if rounds is not None:
        _check_rounds(rounds, round_gap_s)
    limits_w = _power_limits(power_limits) if knob == "power-limit" else None
    sizes = parse_batch_sizes(batch_sizes)
    try:
        if drift is not None and not device.startswith("emulated"):
            raise ValueError("--drift only applies to emulated devices")
        dev = open_device(device, power_mode=power_mode, dry_run=dry_run,
                         drift=parse_drift(drift))
    except (KeyError, ValueError, DeviceError) as err:
        fail(str(err).strip("'\""))
    rounds_by_default = rounds is None
    if rounds is None:
        from wattcap.measure.profile_rounds import default_rounds

        rounds = default_rounds(dev)
        _check_rounds(rounds, round_gap_s, by_default=True)
    if previous is not None:
        from wattcap.models import model_fingerprint

        previous.check_matches(device=dev.name, model=model, source=str(refresh),
                               architecture_fingerprint=model_fingerprint(model))
    if dry_run:
        _print_dry_run(dev, model, sizes, cap, exhaustive, previous, refresh,
                       max_points if few_points else None, few_points, rounds, knob, limits_w)
    elif previous is not None:
        assert refresh is not None
        _refresh(dev, model, previous, refresh, out or refresh, cap, rounds=rounds,
                 round_gap_s=round_gap_s, rounds_by_default=rounds_by_default)
    else:
        assert out is not None
        _measure(dev, model, sizes, out, cap, exhaustive, few_points, max_points,
                 knob=knob, limits_w=limits_w, rounds=rounds, round_gap_s=round_gap_s,
                 rounds_by_default=rounds_by_default)


def _refresh(dev: Device, model: str, previous: ProfileTable, source: Path, out: Path,
             cap: float | None, rounds: int = 1, round_gap_s: float | None = None,
             rounds_by_default: bool = False) -> None:
    """Re-measure the feasible frontier of a profile (in `rounds` rounds, the later ones left
    out where the default asked for them and the first took long) and show what changed."""
    from wattcap.measure.profile_refresh import refresh_profile
    from wattcap.measure.profiling import Profiler

    max_first_s = _announce_default_rounds(dev, rounds, round_gap_s) \
        if rounds_by_default else None
    rows = tuple(previous.batch_sizes)
    grid = len(rows) * len(dev.frequencies_hz()) * rounds
    in_rounds = f", in {rounds} rounds" if rounds > 1 else ""
    with resumable(_NOTHING_KEPT), dev, progress(
            f"profiling {model} on {dev.name} (refresh{in_rounds}, at most {grid} points)", grid,
            "points") as report:
        profiler = Profiler(
            dev, model, batch_sizes=rows,
            progress=lambda update: report.update(
                int(update.done), _point_detail(update.item, update.detail, cap)),
        )
        try:
            result = refresh_profile(profiler, previous, power_cap_w=cap, source=str(source),
                                     rounds=rounds, round_gap_s=round_gap_s,
                                     max_first_round_s=max_first_s)
        except ValueError as err:
            fail(str(err))
        report.update(total=report.completed)  # a refresh measures fewer points than the grid
    result.table.save(out)
    print_refresh(result, source, out)
    measured_rounds = len(result.round_device_s)
    console.print(f"wrote {out}: {len(result.changes)} points re-measured (refresh"
                  + (f", {measured_rounds} rounds)" if measured_rounds > 1 else ")"))


#: what a stopped profile leaves (the device itself is restored on the way out)
_NOTHING_KEPT = "no point of this profile was kept, it is measured again from the start"


def _power_limits(text: str | None) -> list[float] | None:
    """--power-limits W,W,... as floats (None: the profiler's default)."""
    if text is None:
        return None
    try:
        limits = [watts(part) for part in text.split(",") if part.strip()]
    except ValueError:
        limits = []
    if not limits or None in limits:
        fail(f"--power-limits takes watts separated by commas (e.g. 150,200W,0.25kW), not "
             f"{text!r}")
    return [limit for limit in limits if limit is not None]


def _check_rounds(rounds: int, round_gap_s: float | None, by_default: bool = False) -> None:
    """--rounds is 1 or more; --round-gap-s only with rounds to separate, 0 s or more
    (`by_default`: `rounds` is this device's default, which the refusal says)."""
    if rounds < 1:
        fail(f"--rounds must be 1 or more, not {rounds}")
    if round_gap_s is not None and (rounds < 2 or round_gap_s < 0):
        default = (f" (this device measures {rounds} round by default: give --rounds 2 or "
                   "more with it)") if by_default and rounds < 2 else ""
        fail(f"--round-gap-s needs --rounds 2 or more and 0 seconds or more{default}")


def _what_is_measured(dev: Device, sizes: tuple[int, ...], cap: float | None,
                      exhaustive: bool, few_points: bool, knob: str,
                      limits_w: list[float] | None, rounds: int) -> tuple[str, int]:
    """What the profile measures, in words for its progress line, and at most how many
    points."""
    values = {"power-mode": len(dev.power_mode_ids()),
              "power-limit": len(limits_w) if limits_w else 8}.get(knob)
    grid = len(sizes) * (values or len(dev.frequencies_hz()))
    if values is not None:
        what = f"every {knob.replace('-', ' ')} value, {grid} points at most"
    elif few_points:
        what = "a few points, the rest predicted"
    elif exhaustive or cap is None:
        what = f"exhaustive, {grid} points at most"
    else:
        what = f"pruned for {cap:g} W, at most {grid} points"
    if rounds > 1:
        what += f", in {rounds} rounds"
        grid *= rounds
    return what, grid


def _measure(dev: Device, model: str, sizes: tuple[int, ...], out: Path, cap: float | None,
             exhaustive: bool, few_points: bool, max_points: int | None,
             knob: str = "gpu-clock", limits_w: list[float] | None = None,
             rounds: int = 1, round_gap_s: float | None = None,
             rounds_by_default: bool = False) -> None:
    """Profile the model on the device (pruned for the cap, exhaustive, a few points, every
    power mode or power limits; in `rounds` rounds, the later ones left out where the default
    asked for them and the first took long) and write the table."""
    from wattcap.measure.profile_rounds import profile_in_rounds, sweep_in_rounds
    from wattcap.measure.profiling import Profiler

    max_first_s = _announce_default_rounds(dev, rounds, round_gap_s) \
        if rounds_by_default else None
    if knob == "power-limit":
        emulate_power_limit(dev)
    what, grid = _what_is_measured(dev, sizes, cap, exhaustive, few_points, knob, limits_w,
                                   rounds)
    warn_if_cap_below_idle(dev, cap)
    with resumable(_NOTHING_KEPT), dev, progress(f"profiling {model} on {dev.name} ({what})",
                                                 grid, "points") as report:
        profiler = Profiler(
            dev, model, batch_sizes=sizes,
            progress=lambda update: report.update(
                int(update.done), _point_detail(update.item, update.detail, cap)),
        )
        try:
            if knob in ("power-mode", "power-limit"):
                result = sweep_in_rounds(dev, (lambda: profiler.run_power_modes())
                                         if knob == "power-mode"
                                         else (lambda: profiler.run_power_limits(limits_w)),
                                         rounds, round_gap_s, max_first_s)
            else:  # one round is `Profiler.run` itself
                result = profile_in_rounds(profiler, rounds, power_cap_w=cap,
                                           exhaustive=exhaustive, round_gap_s=round_gap_s,
                                           max_first_round_s=max_first_s,
                                           few_points=few_points, max_points=max_points)
            table = result.table
        except ValueError as err:
            fail(str(err))
        report.update(total=report.completed)  # a pruned search measures fewer points
    table.save(out)
    if table.mode == "model":
        _print_model_fit(table)
    console.print(
        f"wrote {out}: {table.points_measured} points ({table.mode}), "
        f"{table.profiling_device_s:.1f} s of device time; max batch size {table.max_batch_size}"
        + (f"; out of memory: {table.oom_batch_sizes}" if table.oom_batch_sizes else "")
    )
    _print_rounds(result.table, result.round_device_s, result.gap_s, result.skipped)
    for note in profiler.notes + _emulated_mode_note(dev, table):
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    clock_note = table.clock_not_held_note()
    if clock_note:
        console.print(f"[yellow]warning:[/] {escape(clock_note)}", highlight=False)
    warn_if_cap_below_every_point(table, cap)


def _emulated_mode_note(dev: Device, table: ProfileTable) -> list[str]:
    """What a power-mode profile of an emulated device cannot say by itself: its modes cap
    the GPU clock only."""
    from wattcap.devices.emulated import EMULATED_POWER_MODES_NOTE

    return [EMULATED_POWER_MODES_NOTE] if table.knob_kind == "power_mode" \
        and dev.kind == "emulated" else []


def _announce_default_rounds(dev: Device, rounds: int, round_gap_s: float | None) -> float:
    """Say that the default measures `rounds` rounds (where more than one); the first round's
    device seconds beyond which the later ones are left out."""
    from wattcap.measure.profile_rounds import DEFAULT_ROUNDS_MAX_FIRST_S, default_round_gap_s

    if rounds > 1:
        gap_s = default_round_gap_s(dev) if round_gap_s is None else round_gap_s
        console.print(f"measuring in {rounds} rounds, {gap_s:g} s apart: the "
                      "default on real hardware (the spread between rounds sets the plans' "
                      "margin and what they call within noise; one round only where the first "
                      f"takes over {DEFAULT_ROUNDS_MAX_FIRST_S / 60:.0f} min); --rounds 1 "
                      "measures one", highlight=False)
    return DEFAULT_ROUNDS_MAX_FIRST_S


def _print_model_fit(table: ProfileTable) -> None:
    """What a few-point profile predicted, and where its frontier is not settled."""
    fit = table.model_fit
    console.print(f"{table.points_predicted} points predicted from the {table.points_measured}"
                  " measured" + ("" if fit.get("settled", True) else
                                 f"; frontier not settled within {fit.get('max_points')} "
                                 f"points for batch sizes {fit.get('undecided_batch_sizes')}"
                                 " (predicted values carry their uncertainty, and plans"
                                 " stay further below the cap there: a larger --max-points"
                                 " or a pruned profile measures them)")
                  + (f"; {fit['feasibility_points']} more measured to decide whether the "
                     "cap can be met" if fit.get("feasibility_points") else ""))


def _print_rounds(table: ProfileTable, round_device_s: list[float], gap_s: float,
                  skipped: str | None) -> None:
    """How long each round took, the point of `table` whose rounds differed most, and why
    later rounds were left out (`skipped`, if they were)."""
    from wattcap.measure.profile_rounds import largest_round_spread

    if skipped is not None:
        console.print(f"[yellow]note:[/] {escape(skipped)}", highlight=False)
    if len(round_device_s) < 2:
        return

    console.print(f"{len(round_device_s)} rounds took "
                  + ", ".join(f"{s:.1f}" for s in round_device_s)
                  + f" s of device time, {gap_s:g} s idle between rounds", highlight=False)
    widest = largest_round_spread(table)
    if widest is not None:
        point, spread = widest
        console.print(f"largest spread between rounds: {spread:.1%} of the time per sample "
                      f"(b={point.batch_size} at {table.describe_knob(point.knob_value)})",
                      highlight=False)


def _print_dry_run(dev: Device, model: str, sizes: tuple[int, ...], cap: float | None,
                   exhaustive: bool, previous: ProfileTable | None, refresh: Path | None,
                   max_points: int | None = None, few_points: bool = False,
                   rounds: int = 1, knob: str = "gpu-clock",
                   limits_w: list[float] | None = None) -> None:
    """What `profile --dry-run` reads and would measure; changes nothing."""
    print_device_readout(dev)
    warn_if_cap_below_idle(dev, cap)
    if previous is not None:
        frontier = previous.frontier(cap if cap is not None else previous.power_cap_w)
        console.print(f"--refresh would re-measure {len(frontier)} frontier points of "
                      f"{refresh} (more where one now breaks the cap)"
                      + (f", in {rounds} rounds (each later round measures the first's points "
                         f"again: {len(frontier) * rounds} measurements at least)"
                         if rounds > 1 else "") + ": "
                      + ", ".join(f"b={b} at {p.knob_value / 1e6:.1f} MHz"
                                  for b, p in sorted(frontier.items())))
    else:
        from wattcap.devices.workload import workload_for

        work = workload_for(model)
        overhead = getattr(getattr(dev, "spec", None), "allocator_overhead_factor", 1.0)
        fits = [b for b in sizes if work.memory_needed_bytes(b, overhead) <= dev.memory_bytes()]
        too_big = [b for b in sizes if b not in fits]
        points = len(fits) * len(dev.frequencies_hz())
        if knob != "gpu-clock":  # every (batch size, limit or mode), as the run counts them
            how = _what_is_measured(dev, tuple(fits), cap, exhaustive, False, knob, limits_w,
                                    1)[0]
        elif few_points:
            from wattcap.measure.active_profiling import default_budget

            budget = max_points or default_budget(fits, dev.frequencies_hz())
            how = f"a few points: at most {budget} of {points}, the rest predicted"
        else:
            how = ("exhaustive: " if exhaustive or cap is None else
                   f"pruned for {cap:g} W: at most ") + f"{points} points"
        console.print(f"{model}: batch sizes that fit {fits}"
                      + (f", too big for memory {too_big}" if too_big else "")
                      + f"; would measure {how}"
                      + (f", in {rounds} rounds (each later round measures the first's points "
                         "again)" if rounds > 1 else ""))
    console.print("dry run: no setting changed, no file written")


def plot_profile_command(
    profile: Annotated[Path, typer.Option(
        help="The profile (JSON) to draw, as `wattcap profile` writes it.")],
    out: Annotated[Path, typer.Option(help="PNG to write.")],
    power_cap: PowerCapOpt = None,
    efficiency: EfficiencyOpt = None,
) -> None:
    """Heatmaps of peak power and time per sample; with --power-cap, the cap's frontier and
    every method's choice."""
    from wattcap.cli.plan import make_plan
    from wattcap.core.profile import ProfileTable
    from wattcap.experiments.plots import plot_profile

    cap = parse_cap(power_cap)
    table = load_or_fail(ProfileTable, profile)
    result = make_plan(profile, efficiency, cap) if cap is not None else None
    plot_profile(table, out, power_cap_w=cap, plan=result)
    if result is not None and efficiency is None:
        console.print("no --efficiency: the choices drawn assume r_b = 1 (every batch size "
                      "needs as many samples as the largest)", highlight=False)
    console.print(f"wrote {out}")
