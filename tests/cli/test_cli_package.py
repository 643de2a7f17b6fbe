"""The command line as a package: no library module imports it, and it starts without torch."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import wattcap

LIBRARY = Path(wattcap.__file__).parent
CLI = LIBRARY / "cli"


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module an import statement in `source` may load, relative imports resolved
    against `module` (the dotted name of the file); `from a import b` counts a and a.b."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                parent = ".".join(base + ([node.module] if node.module else []))
            else:
                parent = node.module or ""
            names.add(parent)
            names.update(f"{parent}.{alias.name}" for alias in node.names)
    return names


def _imports_cli(names: set[str]) -> bool:
    return any(n == "wattcap.cli" or n.startswith("wattcap.cli.") for n in names)


def test_the_import_walker_sees_every_way_of_importing_the_cli() -> None:
    seen = [
        imported_modules("import wattcap.cli", "wattcap.x"),
        imported_modules("from wattcap import cli", "wattcap.x"),
        imported_modules("from wattcap.cli.common import fail", "wattcap.x"),
        imported_modules("def f():\n    from ..cli import app\n", "wattcap.server.jobs"),
        imported_modules("from . import cli", "wattcap", is_package=True),
    ]
    assert all(_imports_cli(names) for names in seen)
    assert not _imports_cli(imported_modules("from wattcap import client_cli, clinic",
                                             "wattcap.x"))
    assert not _imports_cli(imported_modules("from .cli import app", "wattcap.server.jobs"))


def test_no_library_module_imports_the_cli() -> None:
    offenders = []
    checked = 0
    for path in sorted(LIBRARY.rglob("*.py")):
        if CLI in path.parents:
            continue
        parts = path.relative_to(LIBRARY.parent).with_suffix("").parts
        is_package = path.name == "__init__.py"
        module = ".".join(parts[:-1] if is_package else parts)
        names = imported_modules(path.read_text(encoding="utf-8"), module, is_package)
        checked += 1
        if _imports_cli(names):
            offenders.append(module)
    assert checked > 30  # the walk really covered the library
    assert offenders == [], f"library modules importing wattcap.cli: {offenders}"


_HELP_EVERYWHERE = """
import json
import sys

import typer
from typer.testing import CliRunner

from wattcap.cli import app

runner = CliRunner()


def paths(command, prefix):
    yield prefix
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from paths(sub, [*prefix, name])


helped = []
for path in paths(typer.main.get_command(app), []):
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, (path, result.output)
    assert "Usage" in result.output, (path, result.output)
    helped.append(" ".join(path))
devices = runner.invoke(app, ["devices"])
assert devices.exit_code == 0 and "jetson-nano" in devices.output, devices.output
heavy = sorted(m for m in ("torch", "matplotlib", "fastapi", "httpx") if m in sys.modules)
print(json.dumps({"helped": helped, "heavy": heavy}))
"""


def test_help_for_every_command_and_devices_load_no_torch(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _HELP_EVERYWHERE], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path,
                         env={"COLUMNS": "200", "PATH": "/usr/bin:/bin",
                              "PYTHONPATH": str(LIBRARY.parent),
                              "WATTCAP_CACHE_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    expected = {"", "devices", "restore", "profile", "plan", "plot-profile", "migrate",
                "pretrain", "estimate",
                "train", "demo", "compare", "sensitivity", "serve", "push", "push weights",
                "push efficiency", "push profile", "pull", "pull weights", "pull efficiency",
                "pull profile", "pull list", "import", "import profile", "import efficiency",
                "import trace", "export efficiency",
                "export", "export profile", "fleet", "fleet plan", "fleet simulate"}
    assert set(report["helped"]) == expected
    assert report["heavy"] == []
