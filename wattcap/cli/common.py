"""What every command group shares: the consoles, clear exits, parsing of common values.

Only typer and rich load here: a command imports what it needs (pydantic files, torch-backed
modules) inside its function, so `wattcap --help` and the light commands start fast.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer
from rich.markup import escape

from wattcap.cli.console import make_console

if TYPE_CHECKING:
    from wattcap.core.objective import Objective
    from wattcap.core.progress import ProgressReporter
    from wattcap.core.schema import VersionedFile
    from wattcap.devices import Drift
    from wattcap.devices.caps import CapSource
    from wattcap.train.executors import Executor

    FileT = TypeVar("FileT", bound=VersionedFile)

console = make_console()
err_console = make_console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a clear error (no traceback) and exit."""
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def fail_plain(message: str, code: int = 2) -> NoReturn:
    """`fail` for a message that quotes servers or files: "[server]" is not markup."""
    fail(escape(message), code)


def say(message: str) -> None:
    """A line on the console, without rich's highlighting of numbers and paths."""
    console.print(message, highlight=False)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 point', '3 points' ('1 batch size', '2 batch sizes')."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def parse_cap(value: str | None) -> float | None:
    """'none' (or no value) means no cap; otherwise watts."""
    if value is None or value.strip().lower() in ("none", "off", ""):
        return None
    try:
        cap = float(value)
    except ValueError:
        fail(f"--power-cap must be a number of watts or 'none', got {value!r}")
    if not math.isfinite(cap) or cap <= 0:  # nan would compare false with every power
        fail(f"--power-cap must be a positive, finite number of watts or 'none', got {value}")
    return cap


def parse_cap_spec(value: str) -> float | None | CapSource:
    """`--power-cap` of `train`: watts or 'none' (a constant cap), or a cap source that moves
    during the run ('solar:seed=3,day_s=600', 'battery:capacity_wh=2,max_w=9',
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
