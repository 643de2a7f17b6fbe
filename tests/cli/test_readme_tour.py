"""The new user's tour: the README's tour block, run verbatim in an empty folder, each command
as written plus the declared overrides below (fewer seeds, smaller budgets: the README's numbers
cost minutes of training, the test's seconds). A command the README shows that fails, or whose
output has a traceback, fails here. The first and the last command run through the installed
`wattcap` console script, each in a process of its own (the last reads what the others left on
disk, as a user's next shell command does); the others run in this process through the same
Typer app, which saves a torch import of seconds per command.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import typer.main
from click.testing import CliRunner

from wattcap.cli import app
from wattcap.cli.train import NOT_REACHED_EXIT_CODE

README = Path(__file__).resolve().parents[2] / "README.md"
WATTCAP = Path(sys.executable).parent / "wattcap"

#: appended to the README's command (for a single-valued option the last value wins); the
#: README's commands themselves are run as written. Smaller budgets keep the test short; the
#: tour's chain of reuse holds as written (compare takes estimate's proxy runs, sensitivity
#: compare's target runs); `sensitivity` keeps to the proxy compare used (the tour's two other
#: proxies would add twelve trainings; tests/experiments/test_compare.py trains sensitivity
#: cells of its own)
OVERRIDES: dict[str, list[str]] = {
    "pretrain": ["--epochs", "1"],
    "estimate": ["--sample-budget", "512"],
    "train": ["--sample-budget", "512"],
    "compare": ["--sample-budget", "512"],
    "sensitivity": ["--proxies", "digits-rotated-32", "--sample-budget", "512"],
}


def tour_commands(readme: str) -> list[list[str]]:
    """The `wattcap` commands of the README's tour block: comments dropped, continuation
    lines joined, split as the shell would."""
    section = readme.split("## Five-minute tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the tour has no bash block"
    text = "\n".join(line.split("#", 1)[0].rstrip() for line in block.group(1).splitlines())
    text = text.replace("\\\n", " ")
    return [shlex.split(line) for line in text.splitlines()
            if line.strip().startswith("wattcap ")]


def test_the_tour_block_is_found() -> None:
    commands = tour_commands(README.read_text())
    names = [c[1] for c in commands]
    assert names[0] == "devices" and "train" in names and names[-1] == "sensitivity"
    assert all(name in OVERRIDES or name in {"devices", "profile", "plan", "plot-profile"}
               for name in names)


@pytest.mark.slow(seconds=50)  # every step of the tour, with small budgets (~50 s on 2 cores)
def test_the_readme_tour_runs_end_to_end(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert WATTCAP.exists(), "the console script is not installed next to this python"
    env = {"WATTCAP_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "160"}
    monkeypatch.chdir(tmp_path)
    commands = tour_commands(README.read_text())
    # the app's click command, built once: typer's CliRunner builds it again on every invoke
    cli = typer.main.get_command(app)
    for index, command in enumerate(commands):
        args = [*command[1:], *OVERRIDES.get(command[1], [])]
        if index in (0, len(commands) - 1):
            done = subprocess.run([str(WATTCAP), *args], cwd=tmp_path,
                                  env={**os.environ, **env}, capture_output=True, text=True,
                                  timeout=600)
            code, output = done.returncode, f"{done.stdout}\n{done.stderr}"
        else:
            result = CliRunner().invoke(cli, args, env=env)
            code, output = result.exit_code, result.output
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                output += "".join(traceback.format_exception(result.exception))
        shown = f"$ {shlex.join(command)}\n{output}"
        # the tests' small budgets may end the tour's train short of its target: exit code 1
        missed = command[1] == "train" and "did not reach" in output
        assert code == (NOT_REACHED_EXIT_CODE if missed else 0), shown
        assert "Traceback" not in output, shown
        # output a person reads: no "None" for a missing name, no float noise like 0.30000000004
        assert not re.search(r"\bNone\b", output), shown
        assert not re.search(r"\d\.\d*0000000\d", output), shown
    for made in ("nano-resnet18.json", "eff.json", "heatmap.png", "run.json",
                 "cmp/report.md"):
        assert (tmp_path / made).exists(), made
    # the README: "proxy x target matrix, ... the target's runs reused from cmp"
    assert "`sensitivity`: 0 trained" in (tmp_path / "cmp" / "report.md").read_text()
    # and "estimate's proxy runs reused": compare trained its target's runs only (6 batch
    # sizes, 1 seed), the proxy's came from estimate's runs in the cache
    counts = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert counts["runs_trained"] == 6 and counts["runs_reused"] >= 6, counts
