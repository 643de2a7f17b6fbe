"""One handler turns every WattcapError into a one-line message and an exit code (issue 25)."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.cli.errors import WattcapGroup
from wattcap.core.errors import WattcapError
from wattcap.devices.errors import DevicePermissionError


def _app() -> typer.Typer:
    demo = typer.Typer(cls=WattcapGroup, pretty_exceptions_enable=False)

    @demo.command()
    def hinted() -> None:
        raise WattcapError("the profile is for another device", hint="profile this device")

    @demo.command()
    def device() -> None:
        raise DevicePermissionError("cannot lock the GPU clock", hint="run with sudo")

    @demo.command()
    def bug() -> None:
        raise KeyError("a bug")

    return demo


def test_a_wattcap_error_ends_in_its_message_its_hint_and_its_exit_code() -> None:
    result = CliRunner().invoke(_app(), ["hinted"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["error: the profile is for another device", "hint: profile this device"]
    assert "Traceback" not in result.output


def test_a_device_error_keeps_its_fix_line() -> None:
    result = CliRunner().invoke(_app(), ["device"])
    assert result.exit_code == 2
    assert "error: cannot lock the GPU clock" in result.output
    assert "fix: run with sudo" in result.output
    assert "hint:" not in result.output  # said once


def test_a_bug_keeps_its_traceback() -> None:
    result = CliRunner().invoke(_app(), ["bug"])
    assert result.exit_code == 1
    assert isinstance(result.exception, KeyError)  # not swallowed into a clean exit


def test_the_wattcap_app_uses_the_handler(tmp_path, monkeypatch) -> None:
    """A library error that no command catches reaches the user as one line."""
    import wattcap.cli.plan as plan_cli

    def broken(*args, **kwargs):
        raise WattcapError("the efficiency vector is for another model",
                           hint="estimate r_b for this model")

    monkeypatch.setattr(plan_cli, "make_plan", broken)
    profile = tmp_path / "p.json"
    profile.write_text("{}")
    result = CliRunner().invoke(app, ["plan", "--profile", str(profile), "--power-cap", "5"])
    assert result.exit_code == 2, result.output
    assert "error: the efficiency vector is for another model" in result.output
    assert "hint: estimate r_b for this model" in result.output
