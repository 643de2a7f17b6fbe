"""No function in the faces (cli/, server/) runs over 60 lines (issue 25): a command reads as
its steps, each a named helper. A command's option declarations are its signature, not its
logic: the count starts at the first statement after the docstring."""

from __future__ import annotations

import ast
from pathlib import Path

import wattcap

MAX_BODY_LINES = 60
FACES = ("cli", "server")


def _long_functions(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            if body and node.end_lineno is not None:
                lines = node.end_lineno - body[0].lineno + 1
                if lines > MAX_BODY_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} "
                                 f"({lines} lines)")
    return found


def test_no_function_in_the_faces_runs_over_60_lines() -> None:
    package = Path(wattcap.__file__).parent
    long = [f for face in FACES for f in _long_functions(package / face)]
    assert not long, "split these into named steps:\n" + "\n".join(long)


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    face = tmp_path / "cli"
    face.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_BODY_LINES + 1))
    (face / "long.py").write_text(f'def f(\n    a: int = 1,\n) -> None:\n    """Doc."""\n{body}\n')
    (face / "short.py").write_text("def g() -> None:\n    return None\n")
    assert [f.split()[1] for f in _long_functions(face)] == ["f"]
