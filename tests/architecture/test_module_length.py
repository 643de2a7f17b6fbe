"""No module in the package runs over 600 lines: a module that grows past it holds more than one
responsibility and is split into modules named for each."""

from __future__ import annotations

from pathlib import Path

import wattcap

MAX_MODULE_LINES = 600


def _long_modules(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(root.parent)} ({lines} lines)")
    return found


def test_no_module_runs_over_600_lines() -> None:
    long = _long_modules(Path(wattcap.__file__).parent)
    assert not long, "split these by responsibility:\n" + "\n".join(long)


def test_the_check_sees_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "wattcap"
    (package / "sub").mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    (package / "sub" / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert _long_modules(package) == [f"wattcap/sub/long.py ({MAX_MODULE_LINES + 1} lines)"]
