"""Measured tables in: a CSV of time and power over batch sizes and a knob, or of the
samples (or epochs) each batch size needed to reach a target, becomes an ordinary wattcap
profile or efficiency vector (`wattcap import profile|efficiency`), and any profile goes back
out in the same layout (`wattcap export profile`).

Profile columns (one row per measurement; a header row names them):

    batch_size                      required
    the knob, required (exactly one of):
      frequency_mhz | frequency_hz  the GPU clock
      power_limit_w                 the GPU power limit (`nvidia-smi -pl`), in watts
      power_mode                    a Jetson power mode, by its nvpmodel id
    seconds_per_sample | ms_per_sample | seconds_per_epoch (with samples_per_epoch)
                                    time, required (one of them)
    avg_power_w                     required
    peak_power_w                    optional: without it the cap applies to average power

Efficiency columns, one row per run:

    batch_size, seed                required (seed names a run of its batch size: batch sizes
                                    may have different numbers of runs, numbered as they were)
    samples_to_target | epochs_to_target (with samples_per_epoch)
                                    empty or "not reached": the run missed the target
    budget_samples | budget_epochs  the run's budget (samples_per_epoch for epochs)

or one row per evaluation of a run, its curve (the crossing is read as `wattcap estimate` reads
its own runs: on the monotone smoothed curve, in the metric's direction):

    batch_size, seed                required
    samples_seen | epochs_seen      when the evaluation was made
    metric_value                    what it measured (accuracy, F1, WER, loss, ...)
    budget_samples | budget_epochs  the run's budget

The metric (`--metric`, default accuracy in (0, 1]; f1:100 for F1 on 0-100; wer, loss,
perplexity fall) and its target are stored in the vector; a target outside the metric's range
is refused.

`--columns name=header,...` maps a column to another header. Units are checked (positive,
finite, and within what a GPU can be); a unit written after a value ("148.10 W", "1410 MHz", as
nvidia-smi writes them) or in the header's brackets ("power.draw [W]", nvidia-smi's nounits
layout) is converted to the column's (mW, W, kW; Hz to GHz; us, ms, s), and a unit of another
kind, or on a count, is refused. A column may mix cells with a unit and bare cells: a bare cell
is read in the column's declared unit (the header's brackets, else the layout name's: s for
seconds_per_sample, ms for ms_per_sample, W, MHz, Hz), so its reading is never a guess; but
cells written in different units must then agree once converted: one 30x or more from the
median of the column's most common unit (a time typed in us among bare seconds) is refused,
its rows named. Every problem of a table (missing columns, refused cells, columns that
disagree, repeated runs) is reported in one error, the first 20 listed and the
rest counted. Rows repeated for one (batch size, knob) become their
mean with its spread (the *_std fields, which widen the planner's margin); nothing the file does
not hold is invented: an absent peak stays absent (the table says its "peak" is the average
power), steps and readings are 0 (not recorded), the input shape is empty unless given.
"""

from __future__ import annotations

import csv
import io
import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.errors import WattcapError
from wattcap.core.knob import knob_unit
from wattcap.core.metric import TargetMetric
from wattcap.core.profile import ProfilePoint, ProfileTable

MHZ = 1_000_000
#: the knob columns and the kind each one is (wattcap.core.knob)
KNOB_COLUMNS = {"frequency_mhz": "gpu_clock", "frequency_hz": "gpu_clock",
                "power_limit_w": "power_limit", "power_mode": "power_mode"}
#: the column `export_profile` writes for each kind
EXPORT_KNOB_COLUMNS = {"gpu_clock": "frequency_mhz", "power_limit": "power_limit_w",
                       "power_mode": "power_mode"}
PROFILE_COLUMNS = ("batch_size", *KNOB_COLUMNS, "seconds_per_sample",
                   "ms_per_sample", "seconds_per_epoch", "samples_per_epoch", "avg_power_w",
                   "peak_power_w")
EFFICIENCY_COLUMNS = ("batch_size", "seed", "samples_to_target", "epochs_to_target",
                      "samples_per_epoch", "budget_samples", "budget_epochs", "samples_seen",
                      "epochs_seen", "metric_value")
#: what a GPU clock and a board's power can be: values outside are a unit mistake
CLOCK_RANGE_MHZ = (1.0, 10_000.0)
POWER_RANGE_W = (0.01, 5_000.0)
NOT_REACHED = {"", "not reached", "none", "nan", "-"}
#: a value's unit in a measured table, converted to the unit of wattcap's column: the factor
#: that takes a value in the table's unit to the column's (tools such as nvidia-smi write
#: "148.10 W", "1410 MHz", or the unit in the header: "power.draw [W]")
UNIT_FACTORS: dict[str, dict[str, float]] = {
    "W": {"mW": 1e-3, "W": 1.0, "kW": 1e3},
    "MHz": {"Hz": 1e-6, "kHz": 1e-3, "MHz": 1.0, "GHz": 1e3},
    "Hz": {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9},
    "s": {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0},
    "ms": {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3},
}
#: more problems than this are counted, not listed: the first ones show what to fix
MAX_LISTED_PROBLEMS = 20
#: cells of one column written in different units whose converted values are this many times
#: apart point to a unit mistake: unit prefixes are 1000x apart, while a measured column's
#: values stay within a few times of their median (time per sample from the slowest corner of
#: a profile to its fastest is some 10x either side)
UNIT_DISAGREEMENT_RATIO = 30.0
_VALUE_WITH_UNIT = re.compile(r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\d\s].*)?")
_HEADER_UNIT = re.compile(r".*?[\[(]\s*([^\])]+?)\s*[\])]\s*")


class TableImportError(WattcapError, ValueError):
    """A measured table that cannot be imported as it is: the message names the row and
    column."""


@dataclass(frozen=True)
class PowerSampling:
    """How the table's power was measured: "instant" samples every `period_s`, an "average"
    over `period_s` (nvidia-smi's power.draw is a 1 s average), or an "energy" counter."""

    kind: str
    period_s: float | None

    @classmethod
    def parse(cls, text: str) -> PowerSampling:
        """'instant:0.1', 'average:1' or 'energy'."""
        kind, _, period = text.partition(":")
        if kind not in ("instant", "average", "energy"):
            raise TableImportError(f"power sampling {text!r}: say instant:PERIOD_S, "
                                   "average:WINDOW_S or energy")
        if kind == "energy":
            return cls(kind, float(period) if period else None)
        try:
            period_s = float(period)
        except ValueError:
            raise TableImportError(f"power sampling {text!r}: {kind} needs its period in "
                                   f"seconds, e.g. {kind}:1") from None
        if not 0 < period_s < 3600:
            raise TableImportError(f"power sampling {text!r}: the period must be in (0, 3600) s")
        return cls(kind, period_s)

    def peak_source(self, has_peak: bool) -> Literal["measured", "averaged", "average"]:
        """What a table's peak power is: of instant readings, of averaged ones, or absent."""
        if not has_peak:
            return "average"
        return "measured" if self.kind == "instant" else "averaged"

    def window_s(self) -> float:
        """The averaging window: the given period; an energy counter without one is read as
        1 s averages (say energy:WINDOW_S when the counter was read at another interval)."""
        return self.period_s or 1.0

    def rail(self) -> str:
        """The sensor label a profile carries."""
        if self.kind == "energy":
            return "imported (energy counter)"
        return f"imported ({self.kind}, {self.period_s:g} s)"


def _factor(where: str, raw: str, found: str, unit: str) -> float:
    """What takes a value in `found` (the table's unit) to `unit` (the column's)."""
    if not unit:
        raise TableImportError(f"{where}: {raw!r}: the column takes a plain number, not {found}")
    factor = UNIT_FACTORS.get(unit, {unit: 1.0}).get(found)
    if factor is None:
        known = ", ".join(UNIT_FACTORS.get(unit, {unit: 1.0}))
        raise TableImportError(f"{where}: {raw!r} is in {found}, where the column takes {known}")
    return factor


def parse_columns(text: str | None, known: Iterable[str]) -> dict[str, str]:
    """'name=header,...' as {name: header}; an unknown name is refused."""
    mapping: dict[str, str] = {}
    known = tuple(known)
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, header = item.partition("=")
        name, header = name.strip(), header.strip()
        if not sep or not header:
            raise TableImportError(f"--columns {item!r}: write NAME=HEADER")
        if name not in known:
            raise TableImportError(f"--columns: unknown column {name!r}; the layout has "
                                   + ", ".join(known))
        mapping[name] = header
    return mapping


class _Rows:
    """The CSV's rows by the layout's names, with checked numbers. A problem is collected, not
    raised, so that one run reports every problem of the table (`raise_problems`); a row with
    one is in `bad_rows`, left out of what is built from the rows."""

    def __init__(self, text: str, source: str, mapping: dict[str, str],
                 known: tuple[str, ...]) -> None:
        self.source = source
        reader = csv.DictReader(io.StringIO(text))
        headers = [h.strip() for h in reader.fieldnames or []]
        if not headers:
            raise TableImportError(f"{source}: no header row")
        self.headers = {name: mapping.get(name, name) for name in known}
        self.present = {name for name, header in self.headers.items() if header in headers}
        self.rows = [{(k or "").strip(): (v or "").strip() for k, v in row.items()}
                     for row in reader]
        if not self.rows:
            raise TableImportError(f"{source}: no rows under the header")
        self.problems: list[str] = []
        self.bad_rows: set[int] = set()
        #: per column, its cells with a unit: row index -> (text, value in the column's
        #: unit, the unit written in the cell or None for a bare cell)
        self._cells: dict[str, dict[int, tuple[str, float, str | None]]] = {}
        #: per column, the unit a bare cell is read in (the header's, else the layout's) and
        #: the unit its values are converted to
        self._units: dict[str, tuple[str, str]] = {}

    def has(self, name: str) -> bool:
        return name in self.present

    def text(self, row: dict[str, str], name: str) -> str:
        return row.get(self.headers[name], "")

    def problem(self, message: str, index: int | None = None) -> None:
        """Collect one problem (and mark its row, if it is one row's)."""
        self.problems.append(message)
        if index is not None:
            self.bad_rows.add(index)

    def number(self, index: int, row: dict[str, str], name: str,
               low: float = 0.0, high: float = math.inf, unit: str = "") -> float:
        """The cell as a number in `unit` (the column's): a unit written after the value or
        in the header's brackets is converted, or refused where it is not one of `unit`'s.
        A refused cell is collected as a problem and reads as NaN."""
        if name not in self.present:  # the missing column is reported once, by `require`
            self.bad_rows.add(index)
            return math.nan
        raw = self.text(row, name)
        header = self.headers[name]
        where = f"row {index + 2}, column {header!r}"
        match = _VALUE_WITH_UNIT.fullmatch(raw)
        if match is None:
            self.problem(f"{where}: {raw!r} is not a number", index)
            return math.nan
        value = float(match.group(1))
        hint = f" {unit}" if unit else ""
        shown = f"{raw}{hint}"
        in_header = _HEADER_UNIT.fullmatch(header) if unit else None
        declared = in_header.group(1).strip() if in_header is not None else None
        found = match.group(2).strip() if match.group(2) else declared
        if found is not None:
            try:
                value *= _factor(where, raw, found, unit)
            except TableImportError as err:
                self.problem(err.message, index)
                return math.nan
            shown = f"{raw}{'' if match.group(2) else ' ' + found} ({value:g}{hint})"
        if not math.isfinite(value) or not low < value <= high:
            bound = f"in ({low:g}, {high:g}]{hint}" if math.isfinite(high) else \
                f"above {low:g}{hint}"
            self.problem(f"{where}: {shown} must be {bound}: check the unit (or map another "
                         "column with --columns)", index)
            return math.nan
        if unit:
            self._units[name] = (declared or unit, unit)
            written = match.group(2).strip() if match.group(2) else None
            self._cells.setdefault(name, {})[index] = (raw, value, written)
        return value

    def integer(self, index: int, row: dict[str, str], name: str, low: float = 0.0) -> int:
        """The cell as a whole number (a count: no unit); 0 where refused (the row is bad)."""
        value = self.number(index, row, name, low)
        if math.isnan(value):
            return 0
        if value != int(value):
            self.problem(f"row {index + 2}, column {self.headers[name]!r}: {value:g} is not "
                         "a whole number", index)
            return 0
        return int(value)

    def require(self, *alternatives: str, what: str) -> str:
        """The first alternative the file has; else the problem is collected and the first
        alternative named (its cells then read as missing, see `number`)."""
        for name in alternatives:
            if self.has(name):
                return name
        wanted = " or ".join(repr(self.headers[n]) for n in alternatives)
        self.problem(f"no {what} column ({wanted}); map yours with --columns")
        return alternatives[0]

    def check_units_agree(self) -> None:
        """A column whose cells are written in different units (some bare, read in the
        column's unit, some with their own) must agree in magnitude once converted: a cell
        `UNIT_DISAGREEMENT_RATIO` or more from the median of the column's most common unit
        is a unit mistake (a value typed in µs among seconds), and its rows are named."""
        for name, cells in self._cells.items():
            groups: dict[str | None, list[float]] = {}
            for _, value, written in cells.values():
                groups.setdefault(written, []).append(value)
            if len(groups) < 2:
                continue  # one unit throughout: its spread is the measurement's
            # the most common way of writing the column is the reference (bare on a tie)
            reference = max(groups, key=lambda g: (len(groups[g]), g is None))
            median = statistics.median(groups[reference])
            declared, unit = self._units[name]
            off = []
            for index, (raw, value, written) in sorted(cells.items()):
                if written == reference or value <= 0 or median <= 0:
                    continue
                ratio = max(value / median, median / value)
                if ratio >= UNIT_DISAGREEMENT_RATIO:
                    way = "above" if value > median else "below"
                    off.append((index, f"{raw!r} is {value:g} {unit}, {ratio:.0f}x {way}"))
            if not off:
                continue
            self.bad_rows.update(index for index, _ in off)
            how = (f"bare (read as {declared})" if reference is None
                   else f"in {reference}")
            rows = ", ".join(str(index + 2) for index, _ in off)
            self.problem(
                f"column {self.headers[name]!r} mixes units whose values disagree: "
                f"row{'s' if len(off) > 1 else ''} {rows}: "
                + "; ".join(text for _, text in off)
                + f" the median {median:g} {unit} of the "
                f"{len(groups[reference])} cells written {how}: write the column in one unit")

    def raise_problems(self) -> None:
        """One error listing every problem collected (the first `MAX_LISTED_PROBLEMS`, and
        how many more), or nothing when there is none."""
        if not self.problems:
            return
        if len(self.problems) == 1:
            raise TableImportError(f"{self.source}: {self.problems[0]}")
        listed = self.problems[:MAX_LISTED_PROBLEMS]
        more = len(self.problems) - len(listed)
        raise TableImportError(
            f"{self.source}: {len(self.problems)} problems:\n"
            + "\n".join(f"  {p}" for p in listed)
            + (f"\n  ... and {more} more" if more else ""))


def _read(path: Path) -> str:
    """The CSV's text, or one clear line saying why it cannot be read."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise TableImportError(f"{path}: cannot read it ({err})") from None


def _std(values: list[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None


def import_profile(
    path: str | Path, *, device: str, model: str, power_sampling: str,
    input_shape: list[int] | None = None, columns: str | None = None,
) -> ProfileTable:
    """A ProfileTable from a measured CSV (see the module docstring for the layout)."""
    from wattcap.core.cache import content_sha256

    path = Path(path)
    sampling = PowerSampling.parse(power_sampling)
    text = _read(path)
    rows = _Rows(text, str(path), parse_columns(columns, PROFILE_COLUMNS), PROFILE_COLUMNS)
    rows.require("batch_size", what="batch size")
    knob = rows.require(*KNOB_COLUMNS, what="knob (GPU clock, power limit or power mode)")
    others = [c for c in KNOB_COLUMNS if c != knob and rows.has(c)]
    if others:
        rows.problem(f"the table has two knob columns ({rows.headers[knob]}, "
                     f"{rows.headers[others[0]]}): import one knob per table")
    time_column = rows.require("seconds_per_sample", "ms_per_sample", "seconds_per_epoch",
                               what="time")
    if time_column == "seconds_per_epoch":
        rows.require("samples_per_epoch", what="samples per epoch")
    rows.require("avg_power_w", what="average power")
    has_peak = rows.has("peak_power_w")
    grouped: dict[tuple[int, int], list[tuple[float, float, float]]] = {}
    for i, row in enumerate(rows.rows):
        b = rows.integer(i, row, "batch_size")
        value = _knob_value(rows, i, row, knob)
        if time_column == "seconds_per_sample":
            seconds = rows.number(i, row, time_column, unit="s")
        elif time_column == "ms_per_sample":
            seconds = rows.number(i, row, time_column, unit="ms") / 1e3
        else:
            seconds = (rows.number(i, row, time_column, unit="s")
                       / rows.number(i, row, "samples_per_epoch"))
        avg_w = rows.number(i, row, "avg_power_w", *POWER_RANGE_W, unit="W")
        peak_w = rows.number(i, row, "peak_power_w", *POWER_RANGE_W, unit="W") if has_peak \
            else avg_w
        if peak_w < avg_w:
            rows.problem(f"row {i + 2}: peak power {peak_w:g} W is below the average "
                         f"{avg_w:g} W", i)
        grouped.setdefault((b, value), []).append((seconds, peak_w, avg_w))
    rows.check_units_agree()
    rows.raise_problems()  # every problem of the table at once, before anything is built
    points = []
    for (b, value), values in sorted(grouped.items()):
        times, peaks, avgs = ([v[k] for v in values] for k in range(3))
        points.append(ProfilePoint(
            batch_size=b, knob_value=value, seconds_per_sample=statistics.fmean(times),
            peak_power_w=statistics.fmean(peaks), avg_power_w=statistics.fmean(avgs),
            steps=0, readings=0, seconds_per_sample_std=_std(times),
            peak_power_std_w=_std(peaks), avg_power_std_w=_std(avgs)))
    batch_sizes = sorted({p.batch_size for p in points})
    return ProfileTable(
        device=device, device_kind="imported", sensor_rail=sampling.rail(),
        sensor_period_s=sampling.period_s or 0.0, model=model, input_shape=input_shape or [],
        batch_sizes=batch_sizes, knob_kind=KNOB_COLUMNS[knob],  # type: ignore[arg-type]
        knob_values=sorted({p.knob_value for p in points}),
        max_batch_size=max(batch_sizes), mode="imported", points=points,
        points_measured=len(rows.rows), profiling_device_s=0.0,
        peak_power_source=sampling.peak_source(has_peak),
        power_window_s=sampling.window_s() if sampling.peak_source(has_peak) == "averaged"
        else None,
        imported_from={"file": path.name, "sha256": content_sha256(path),
                       "columns": {n: rows.headers[n] for n in sorted(rows.present)},
                       "power_sampling": power_sampling,
                       "repeated_rows_merged": len(rows.rows) - len(points)})


def _knob_value(rows: _Rows, i: int, row: dict[str, str], column: str) -> int:
    """Row i's knob value in its kind's stored unit (Hz, mW, nvpmodel id), its range checked;
    0 where the cell is refused (the problem is collected)."""
    low_mhz, high_mhz = CLOCK_RANGE_MHZ
    if column == "power_mode":
        return rows.integer(i, row, column, low=-1)  # an nvpmodel id: 0, 1, ...
    if column == "power_limit_w":
        watts = rows.number(i, row, column, *POWER_RANGE_W, unit="W")
        return 0 if math.isnan(watts) else knob_unit("power_limit").stored(watts)
    if column == "frequency_mhz":
        hz = rows.number(i, row, column, low_mhz, high_mhz, "MHz") * MHZ
    else:
        hz = rows.number(i, row, column, low_mhz * MHZ, high_mhz * MHZ, "Hz")
    return 0 if math.isnan(hz) else round(hz)


def export_knob_value(kind: str, value: int) -> str:
    """A stored knob value in its export column's unit (MHz, W, id), exactly."""
    return f"{knob_unit(kind).shown(value):g}"


def export_profile(table: ProfileTable) -> str:
    """A profile as a CSV in the import layout (peak power only when the table has one), its
    knob in the kind's column."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    peak = table.peak_power_source == "measured"
    writer.writerow(["batch_size", EXPORT_KNOB_COLUMNS[table.knob_kind], "seconds_per_sample",
                     "avg_power_w", *(["peak_power_w"] if peak else [])])
    for p in sorted(table.points, key=lambda p: (p.batch_size, p.knob_value)):
        writer.writerow([p.batch_size, export_knob_value(table.knob_kind, p.knob_value),
                         repr(p.seconds_per_sample),
                         repr(p.avg_power_w), *([repr(p.peak_power_w)] if peak else [])])
    return out.getvalue()


def export_efficiency(vector: EfficiencyVector) -> str:
    """An efficiency vector's runs as a CSV in the import layout, one row per (batch size,
    seed): its samples to target ("not reached" for a miss) and its budget; nothing fitted."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["batch_size", "seed", "samples_to_target", "budget_samples"])
    for entry in sorted(vector.entries, key=lambda e: e.batch_size):
        runs = zip(entry.samples_per_seed, entry.budget_per_seed, strict=True)
        for seed, (samples, budget) in enumerate(runs):
            writer.writerow([entry.batch_size, seed,
                             "not reached" if samples is None else repr(samples), budget])
    return out.getvalue()


def import_efficiency(
    path: str | Path, *, model: str, dataset: str, target_accuracy: float,
    task: str = "image-classification", input_shape: list[int] | None = None,
    columns: str | None = None, metric: str = "accuracy",
) -> EfficiencyVector:
    """An EfficiencyVector from a CSV of samples (or epochs) to target per batch size and seed,
    or of each run's curve (see the module docstring); a missed run counts at its budget, as in
    `estimate`. `target_accuracy` is the target in `metric`'s units (see core.metric)."""
    from wattcap.algorithms.efficiency import vector_from_samples
    from wattcap.core.cache import content_sha256
    from wattcap.core.metric import MetricError, metric_named

    path = Path(path)
    try:
        target_metric = metric_named(metric)
        target_metric.check_target(target_accuracy)
    except MetricError as err:
        raise TableImportError(f"{path}: {err}") from None
    text = _read(path)
    rows = _Rows(text, str(path), parse_columns(columns, EFFICIENCY_COLUMNS),
                 EFFICIENCY_COLUMNS)
    rows.require("batch_size", what="batch size")
    rows.require("seed", what="seed")
    if rows.has("metric_value") and not (rows.has("samples_to_target")
                                         or rows.has("epochs_to_target")):
        samples, budgets = _runs_from_curves(rows, target_metric, target_accuracy)
    else:
        samples, budgets = _runs_from_rows(rows)
    rows.check_units_agree()
    rows.raise_problems()  # every problem of the table at once, before anything is built
    # Real sweeps number their runs as they like and repeat some batch sizes more than others:
    # each batch size keeps its own runs (r_b from them, its spread from their number).
    runs = {b: sorted(samples[b]) for b in sorted(samples)}
    vector = vector_from_samples(
        {b: [samples[b][s] for s in ids] for b, ids in runs.items()},
        sample_budget=max(max(v.values()) for v in budgets.values()),
        budgets={b: [budgets[b][s] for s in ids] for b, ids in runs.items()},
        model=model, input_shape=input_shape or [], dataset=dataset, task=task,
        target_accuracy=target_accuracy, target_metric=target_metric,
        seeds=sorted({s for ids in runs.values() for s in ids}))
    vector.notes.append(f"imported from {path.name} (sha256 {content_sha256(path)[:12]}…, "
                        f"{sum(len(ids) for ids in runs.values())} runs)")
    return vector


def _budget_samples(rows: _Rows, i: int, row: dict[str, str], column: str,
                    per_epoch: float) -> float:
    """A run's budget in samples, from `column` (budget_samples or budget_epochs)."""
    return rows.number(i, row, column) * (per_epoch if column == "budget_epochs" else 1.0)


def _runs_from_rows(rows: _Rows) -> tuple[dict[int, dict[int, float | None]],
                                          dict[int, dict[int, int]]]:
    """Samples to target and budget per (batch size, seed), one row per run."""
    reached_column = rows.require("samples_to_target", "epochs_to_target",
                                  what="samples (or epochs) to target")
    budget_column = rows.require("budget_samples", "budget_epochs", what="budget")
    epochs = "epochs" in reached_column or "epochs" in budget_column
    if epochs:
        rows.require("samples_per_epoch", what="samples per epoch")
    samples: dict[int, dict[int, float | None]] = {}
    budgets: dict[int, dict[int, int]] = {}
    for i, row in enumerate(rows.rows):
        b, seed = rows.integer(i, row, "batch_size"), rows.integer(i, row, "seed", low=-1)
        # a run named by a readable (batch size, seed) counts as present even where another
        # of its cells is refused: the other problems are not hidden behind a "missing" one
        named = i not in rows.bad_rows
        if named and seed in samples.get(b, {}):
            rows.problem(f"row {i + 2}: batch size {b}, seed {seed} appears twice", i)
            continue
        per_epoch = rows.number(i, row, "samples_per_epoch") if epochs else 1.0
        to_samples = per_epoch if "epochs" in reached_column else 1.0
        budget = _budget_samples(rows, i, row, budget_column, per_epoch)
        reached_text = rows.text(row, reached_column).lower()
        reached = None if reached_text in NOT_REACHED else \
            rows.number(i, row, reached_column) * to_samples
        if reached is not None and reached > budget:
            rows.problem(f"row {i + 2}: {reached:g} samples to target is beyond the run's "
                         f"budget of {budget:g}", i)
        if named:
            samples.setdefault(b, {})[seed] = reached
            budgets.setdefault(b, {})[seed] = 0 if math.isnan(budget) else int(round(budget))
    return samples, budgets


def _runs_from_curves(rows: _Rows, metric: TargetMetric, target: float,
                      ) -> tuple[dict[int, dict[int, float | None]], dict[int, dict[int, int]]]:
    """Samples to target and budget per (batch size, seed), read on each run's curve (one row
    per evaluation) in the metric's direction."""
    from wattcap.algorithms.curves import samples_to_target

    seen_column = rows.require("samples_seen", "epochs_seen", what="samples seen")
    budget_column = rows.require("budget_samples", "budget_epochs", what="budget")
    epochs = seen_column == "epochs_seen" or budget_column == "budget_epochs"
    if epochs:
        rows.require("samples_per_epoch", what="samples per epoch")
    curves: dict[tuple[int, int], list[tuple[float, float]]] = {}
    budgets: dict[int, dict[int, int]] = {}
    for i, row in enumerate(rows.rows):
        b, seed = rows.integer(i, row, "batch_size"), rows.integer(i, row, "seed", low=-1)
        named = i not in rows.bad_rows  # the run is present even where a cell is refused
        per_epoch = rows.number(i, row, "samples_per_epoch") if epochs else 1.0
        seen = rows.number(i, row, seen_column, low=-1.0) * (
            per_epoch if seen_column == "epochs_seen" else 1.0)
        value = rows.number(i, row, "metric_value", metric.low - 1e-12,
                            math.inf if metric.high is None else metric.high,
                            unit=f"({metric.name})")
        budget = _budget_samples(rows, i, row, budget_column, per_epoch)
        if not named:
            continue
        curve = curves.setdefault((b, seed), [])
        if i not in rows.bad_rows:
            curve.append((seen, value))
        budgets.setdefault(b, {})[seed] = 0 if math.isnan(budget) else int(round(budget))
    samples: dict[int, dict[int, float | None]] = {}
    for (b, seed), curve in sorted(curves.items()):
        curve.sort()
        if len({seen for seen, _ in curve}) < len(curve):
            rows.problem(f"batch size {b}, seed {seed} has two evaluations at the same "
                         "sample count")
        samples.setdefault(b, {})[seed] = samples_to_target(curve, target, metric.direction) \
            if curve and not rows.problems else None
    return samples, budgets
