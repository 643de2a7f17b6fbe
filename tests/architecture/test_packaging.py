"""Install beside the user's torch (issue 26 item 10): the package states lower bounds only;
the exact CPU torch lives only in what `make` installs from."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def _requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"]) + [
        r for extra in project["optional-dependencies"].values() for r in extra]


def test_install_requirements_carry_no_exact_pin() -> None:
    pinned = [r for r in _requirements() if re.search(r"==|===|~=", r)]
    assert not pinned, f"exact pins would replace a user's packages (JetPack's torch): {pinned}"


def test_torch_has_a_lower_bound_and_make_pins_the_cpu_build() -> None:
    torch = [r for r in _requirements() if re.match(r"torch\b", r)]
    assert torch and all(">=" in r for r in torch)
    constraints = (ROOT / "constraints-cpu.txt").read_text()
    assert re.search(r"^torch==\d+\.\d+\.\d+$", constraints, flags=re.M)
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints-cpu.txt" in makefile
