"""What every command group shares: the consoles, clear exits, parsing of common values.

Only typer and rich load here: a command imports what it needs (pydantic files, torch-backed
modules) inside its function, so `wattcap --help` and the light commands start fast.
"""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer
from rich.markup import escape

from wattcap.cli.console import console, err_console
from wattcap.cli.errors import print_error
from wattcap.core.power_text import parse_power_w

if TYPE_CHECKING:
    from wattcap.core.objective import Objective
    from wattcap.core.progress import ProgressReporter
    from wattcap.core.schema import VersionedFile
    from wattcap.devices import Device, Drift
    from wattcap.devices.caps import CapSource
    from wattcap.train.executors import Executor

    FileT = TypeVar("FileT", bound=VersionedFile)


#: True while a command given --dry-run runs (set by the option, see `cli.options`): data is
#: then read without writing an image folder's pixel cache, as a dry run writes no file
DRY_RUN: ContextVar[bool] = ContextVar("wattcap_dry_run", default=False)


def fail(message: str, code: int = 2, hint: str | None = None) -> NoReturn:
    """Print a clear error (no traceback) and exit. The message is text, not rich markup:
    "pip install 'wattcap[fleet]'" prints its brackets."""
    print_error(message, hint)
    raise typer.Exit(code)


def say(message: str) -> None:
    """A line on the console, without rich's highlighting of numbers and paths."""
    console.print(message, highlight=False)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 point', '3 points' ('1 batch size', '2 batch sizes')."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def watts(value: str) -> float | None:
    """A power cap as a person writes it, in watts ('4.5', '4.5W', '250 W', '0.25kW',
    '500 mW'; 'none', 'off' or nothing is None), read by the one parser every cap goes through
    (`wattcap.core.power_text`). A cap of 0 W is refused here: 'none' says "no cap"."""
    return parse_power_w(value, zero_ok=False)


def parse_cap(value: str | None, option: str = "--power-cap") -> float | None:
    """A power cap in watts, as `watts` reads it (no value: no cap); a clear exit naming the
    option on anything else."""
    if value is None:
        return None
    try:
        return watts(value)
    except ValueError as err:
        fail(f"{option}: {value!r} {err}" if str(err).startswith("must")
             else f"{option}: {err}, got {value!r}")


def parse_caps(value: str, option: str = "--power-cap") -> list[float | None]:
    """Comma-separated caps ('4,5.5W,none'), each as `parse_cap` reads one, in the order
    given; a clear exit on an empty item or a cap given twice."""
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        fail(f"{option}: an empty cap in {value!r} (write caps as 4,5,none)")
    caps = [parse_cap(item, option) for item in items]
    if len(set(caps)) < len(caps):
        fail(f"{option}: a cap is given twice in {value!r}")
    return caps


def parse_cap_spec(value: str) -> float | None | CapSource:
    """`--power-cap` of `train`: watts or 'none' (a constant cap), or a cap source that moves
    during the run ('solar:seed=3,day_s=600', 'battery:capacity_wh=2,max_w=9',
    'battery:sysfs,hours=3,reserve=20%' (a real battery),
    'schedule:caps.json', 'file:/run/cap')."""
    if ":" not in value:
        return parse_cap(value)
    from wattcap.devices.caps import CapSourceError, parse_cap_source

    try:
        return parse_cap_source(value)
    except CapSourceError as err:
        fail(f"--power-cap: {err}")


def parse_objective(name: str, eta: float | None, max_energy: float | None,
                    deadline: float | None, cost_max_power: float | None = None) -> Objective:
    """--objective, --eta, --max-energy, --deadline and --cost-max-power as one `Objective`; a
    clear exit on a combination that does not make sense."""
    from wattcap.core.objective import Objective

    return Objective.of(name, eta=eta, max_energy_j=max_energy, deadline_s=deadline,
                        cost_power_w=cost_max_power)


def parse_batch_sizes(value: str, option: str = "--batch-sizes") -> tuple[int, ...]:
    """'4,8,16' -> (4, 8, 16), sorted; a clear exit on anything else."""
    try:
        sizes = tuple(sorted(int(b) for b in value.split(",")))
    except ValueError:
        fail(f"{option} must be comma-separated whole numbers (e.g. 4,8,16), got {value!r}")
    if not sizes or min(sizes) <= 0:
        fail(f"{option} must be positive, got {value!r}")
    return sizes


def parse_drift(value: str | None) -> Drift | None:
    """'AFTER_S,SPEED,POWER' (e.g. '0,0.8,1.15') -> an emulated Drift, or None."""
    if value is None:
        return None
    from wattcap.devices import Drift

    try:
        after_s, speed, power = (float(v) for v in value.split(","))
    except ValueError:
        fail(f"--drift must be AFTER_S,SPEED_FACTOR,POWER_FACTOR (e.g. 0,0.8,1.15), got {value!r}")
    if after_s < 0 or speed <= 0 or power <= 0:
        fail(f"--drift needs AFTER_S >= 0 and positive factors, got {value!r}")
    return Drift(after_s=after_s, speed_factor=speed, power_factor=power)


def load_or_fail(cls: type[FileT], path: Path) -> FileT:
    """Load a wattcap file (a WattcapFileError becomes a one-line exit in cli.errors); a file
    of an earlier schema version loads migrated, and one line says so."""
    loaded = cls.load(path)
    if loaded.migrated_from is not None:  # on stderr: `plan --json` keeps its stdout JSON
        err_console.print(f"{path}: schema version {loaded.migrated_from}, read as version "
                          f"{loaded.SCHEMA_VERSION} (`wattcap migrate {path}` rewrites it)",
                          highlight=False)
    return loaded


def progress(description: str, total: int | None, unit: str) -> ProgressReporter:
    """A progress reporter on the command line's console: a bar on a terminal, plain lines
    in logs and pipes."""
    from wattcap.core.progress import make_progress

    return make_progress(console, description, total, unit)



def executor_or_fail(spec: str | None) -> Executor:
    """The executor a --ray option names, or a clear exit."""
    from wattcap.train.executors import get_executor

    executor = get_executor(spec)
    if spec is not None:
        say(f"starting {executor.describe()}")
    return executor.start()


def require_extra(module: str, needed_for: str, extra: str) -> None:
    """A clear exit, before any work, where an optional dependency is missing: checked by
    name (find_spec), so the module itself still loads only when it is used."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        fail(f"{needed_for} needs the {module} module, which is not installed",
             hint=f"pip install 'wattcap[{extra}]'")


def open_device(name: str, **options: Any) -> Device:
    """`wattcap.devices.get_device(name, **options)`, its warnings (--device auto falling back
    to the emulated Jetson Nano) said as one `warning: ...` line each on the console, not as
    Python's UserWarning with a file and a line number (the library warns its API users so);
    other warnings (a dependency's) pass on as they are."""
    import warnings

    from wattcap.devices import get_device

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        device = get_device(name, **options)
    for warning in caught:
        if issubclass(warning.category, UserWarning):
            console.print(f"[yellow]warning:[/] {escape(str(warning.message))}",
                          highlight=False)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)
    return device


def check_device_extra(device: str) -> None:
    """`--device nvml:N` needs the nvml extra (NVIDIA's bindings)."""
    if device.startswith("nvml"):
        require_extra("pynvml", f"--device {device}", "nvml")


def check_ray_extra(spec: str | None) -> None:
    """A --ray that names Ray (not 'processes:N' or 'serial') needs the ray extra."""
    text = (spec or "").strip().lower()
    if text and text != "serial" and not text.startswith("processes:"):
        require_extra("ray", f"--ray {spec}", "ray")
