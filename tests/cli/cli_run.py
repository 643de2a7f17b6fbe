"""How the CLI tests run a command: typer's runner on a wide terminal (rich tables unfolded),
and the output with its line breaks flattened for phrase checks."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from wattcap.cli import app

runner = CliRunner()


def invoke(*args: object):  # noqa: ANN201
    """`wattcap ARGS` (each argument as a string) on a 200-column terminal."""
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def flat(text: str) -> str:
    """`text` with every run of whitespace one space (rich folds long lines)."""
    return re.sub(r"\s+", " ", text)
