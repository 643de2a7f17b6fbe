"""One face for every command: help that reads the same way everywhere (flags without a type,
positionals by name, every option explained in words a user knows, long helps in panels),
`-V`, caps with units, several caps in one plan, one error prefix whose text keeps its
brackets, and optional dependencies checked before any work."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from tests.cli.cli_run import flat
from wattcap.cli import app
from wattcap.cli.common import fail, parse_cap
from wattcap.cli.errors import ERROR_PREFIX, WattcapGroup
from wattcap.core.errors import WattcapError

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "examples" / "fleet"
runner = CliRunner()


def invoke(*args: object) -> Any:
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "400"})


def _commands() -> dict[str, Any]:
    """Every command and group by its path ('' is the app, 'fleet plan' a subcommand): the
    click objects typer builds (of the click it uses)."""
    found: dict[str, Any] = {}

    def walk(command: Any, path: str) -> None:
        found[path] = command
        if hasattr(command, "list_commands"):
            ctx = typer.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    assert {"train", "plan", "fleet plan", "fleet simulate", "import profile"} <= set(found)
    return found


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    """Every command's --help, as a terminal shows it (rich)."""
    shown = {}
    for path in _commands():
        result = invoke(*path.split(), "--help")
        assert result.exit_code == 0, (path, result.output)
        shown[path] = result.output
    return shown


def test_no_flag_shows_a_type_and_positionals_show_their_name(helps: dict[str, str]) -> None:
    for path, text in helps.items():
        assert "<bool>" not in text and "BOOLEAN" not in text, path
        assert not re.search(r"\{[a-z_|]+\}", text), (path, text)  # not {table}
    assert "TABLE" in helps["import profile"] and "FLEET" in helps["fleet plan"]


def test_plain_help_shows_no_bool_metavar_either(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without rich's layout (click's own formatter) flags still show no type."""
    import typer.core

    monkeypatch.setattr(typer.core, "HAS_RICH", False)
    for path in ("plan", "train", "fleet plan", "import profile"):
        text = invoke(*path.split(), "--help").output
        assert "<bool>" not in text and "BOOLEAN" not in text, (path, text)
        assert not re.search(r"\{[a-z_|]+\}", text), (path, text)


#: what a user does not know: module paths and the classes behind the files
NOT_FOR_USERS = re.compile(r"wattcap\.[a-z_]+\.[a-z_]|\b(ProfileTable|EfficiencyVector|RunRecord|"
                           r"FleetFile|TrainConfig|SessionConfig|WattcapError)\b")


def test_help_names_no_module_or_class(helps: dict[str, str]) -> None:
    for path, text in helps.items():
        assert not NOT_FOR_USERS.search(text), (path, NOT_FOR_USERS.search(text))


def test_every_option_and_argument_of_every_command_has_help() -> None:
    missing = [f"{path} {param.name}" for path, command in _commands().items()
               for param in command.params if not getattr(param, "help", None)]
    assert not missing


def test_seeds_help_is_each_commands_own() -> None:
    commands = _commands()

    def seeds_help(path: str) -> str:
        (param,) = [p for p in commands[path].params if p.name == "seeds"]
        return str(getattr(param, "help", ""))

    assert "federation" in seeds_help("fleet simulate").lower()
    assert "efficiency estimate" not in seeds_help("fleet simulate")
    assert "target" in seeds_help("sensitivity")
    assert len({seeds_help(p) for p in ("estimate", "sensitivity", "fleet simulate")}) == 3


def _names_a_command(help_text: str, command: str) -> bool:
    """Whether a help names `command` as a command (not as a word of the sentence): `command`,
    wattcap command, "command: ...", "when commanding", "with [--option or] command"."""
    doing = {"profile": "profiling", "plan": "planning", "train": "training"}.get(command,
                                                                                f"{command}ing")
    name = rf"(?:{re.escape(command)}|{doing})"
    return re.search(rf"(?:`|wattcap |\bwhen |\bwith (?:--[\w-]+ or )?){name}\b"
                     rf"|\b{re.escape(command)}:", help_text, re.IGNORECASE) is not None


def test_a_shared_options_help_names_none_of_the_commands_that_show_it() -> None:
    """An option whose help is shown by several commands speaks to each of them: it names none
    of them ("train: default --device's" read in `plan` is about another command)."""
    shown_by: dict[tuple[str, str], set[str]] = {}
    for path, command in _commands().items():
        for param in command.params if path else ():
            text = str(getattr(param, "help", None) or "")
            shown_by.setdefault((str(param.name), text), set()).add(path.split()[0])
    wrong = [f"--{name} in {sorted(commands)} names {other}: {text}"
             for (name, text), commands in shown_by.items() if len(commands) > 1
             for other in commands if _names_a_command(text, other)]
    assert not wrong
    assert _names_a_command("e.g. jetson-nano (train: default --device's).", "train")
    assert _names_a_command("the emulated device's when profiling", "profile")
    assert _names_a_command("with --server or pull, only a profile made in it", "pull")
    assert not _names_a_command("change no setting, write no file, train nothing", "train")


def test_the_device_name_and_power_mode_help_is_each_commands_own() -> None:
    commands = _commands()

    def help_of(path: str, name: str) -> str:
        (param,) = [p for p in commands[path].params if p.name == name]
        return str(getattr(param, "help", ""))

    assert "default: --device's" in help_of("train", "device_name")
    assert "--device" not in help_of("plan", "device_name")
    assert "--device" not in help_of("pull profile", "device_name")
    assert "measured" in help_of("profile", "power_mode")
    assert "--server" in help_of("plan", "power_mode")
    assert "--server" not in help_of("pull profile", "power_mode")  # pull always asks one


def test_train_help_reads_in_panels(helps: dict[str, str]) -> None:
    text = helps["train"]
    for panel in ("Power cap and device", "Profile and efficiency", "Objective", "Training",
                  "Model and data", "Server", "Output"):
        assert f"─ {panel} ─" in text, panel
    # the options panel keeps only what no group claims
    options = text.split("─ Options ─")[1].split("╰")[0]
    assert "--power-cap" not in options and "--objective" not in options


def test_dash_v_prints_the_version() -> None:
    from wattcap.core.version import __version__

    short, long = invoke("-V"), invoke("--version")
    assert short.exit_code == long.exit_code == 0
    assert short.output.strip() == long.output.strip() == f"wattcap {__version__}"


@pytest.mark.parametrize(("text", "watts"), [
    ("4.5", 4.5), ("4.5W", 4.5), ("4.5 W", 4.5), ("250 W", 250.0), ("0.25kW", 250.0),
    ("500 mW", 0.5), ("5w", 5.0), ("none", None), ("None", None)])
def test_caps_read_with_their_unit(text: str, watts: float | None) -> None:
    assert parse_cap(text) == watts


def _plan_inputs() -> tuple[str, ...]:
    return ("--profile", FLEET / "profile-jetson-nano.json",
            "--efficiency", FLEET / "efficiency-proxy.json")


def test_plan_takes_a_cap_with_its_unit_and_the_same_plan_comes_out() -> None:
    plain = invoke("plan", *_plan_inputs(), "--power-cap", "4.5", "--json")
    with_unit = invoke("plan", *_plan_inputs(), "--power-cap", "4.5 W", "--json")
    assert plain.exit_code == with_unit.exit_code == 0, with_unit.output
    assert json.loads(plain.output) == json.loads(with_unit.output)
    assert json.loads(plain.output)["power_cap_w"] == 4.5


@pytest.mark.parametrize("cap", ["4.5MHz", "4.5 V", "4.5WW"])
def test_a_cap_with_a_wrong_unit_is_refused_clearly(cap: str) -> None:
    result = invoke("plan", *_plan_inputs(), "--power-cap", cap)
    assert result.exit_code == 2
    output = flat(result.output)
    assert f"{ERROR_PREFIX} --power-cap:" in output and "not a unit of power" in output
    assert "Traceback" not in result.output


def test_plan_with_three_caps_prints_a_row_per_cap() -> None:
    result = invoke("plan", *_plan_inputs(), "--power-cap", "4,5.5W,none")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines()
            if re.match(r"^│\s+(4 W|5\.5 W|none)\s+│", line)]
    assert len(rows) == 3, result.output


def test_plan_json_with_several_caps_is_a_list_and_one_cap_keeps_its_object() -> None:
    several = invoke("plan", *_plan_inputs(), "--power-cap", "1,4.5,none", "--json")
    assert several.exit_code == 0, several.output
    plans = json.loads(several.output)
    assert [p["power_cap_w"] for p in plans] == [1.0, 4.5, None]
    assert "infeasible" in plans[0] and "batch_size" not in plans[0]  # nothing fits 1 W
    single = json.loads(invoke("plan", *_plan_inputs(), "--power-cap", "4.5", "--json").output)
    assert plans[1] == single  # each entry is the single cap's JSON


def test_several_caps_refuse_out_and_plot(tmp_path: Path) -> None:
    result = invoke("plan", *_plan_inputs(), "--power-cap", "4,5", "--out", tmp_path / "p.json")
    assert result.exit_code == 2 and "one --power-cap" in flat(result.output)
    assert not (tmp_path / "p.json").exists()


def _demo_app() -> typer.Typer:
    demo = typer.Typer(cls=WattcapGroup, pretty_exceptions_enable=False)

    @demo.command()
    def hinted() -> None:
        raise WattcapError("Flower is missing", hint="pip install 'wattcap[fleet]'")

    @demo.command()
    def failing() -> None:
        fail("--engine flower needs Flower: pip install 'wattcap[fleet]' ([W] too)",
             hint="pip install 'wattcap[fleet]'")

    return demo


@pytest.mark.parametrize("command", ["hinted", "failing"])
def test_error_hints_keep_their_brackets(command: str) -> None:
    result = CliRunner().invoke(_demo_app(), [command])
    assert result.exit_code == 2
    assert "hint: pip install 'wattcap[fleet]'" in result.output
    if command == "failing":
        assert "'wattcap[fleet]' ([W] too)" in result.output


@pytest.mark.parametrize("args", [("plan",), ("-X",), ("nope",), ("fleet", "plan"),
                                  ("plan", "--power-cap", "4", "--cap-on", "bad"),
                                  ("plan", "--profile", "missing.json", "--power-cap", "4")])
def test_every_error_starts_the_same_way(args: tuple[str, ...]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert f"{ERROR_PREFIX} " in result.output
    assert "Error" not in result.output  # neither click's "Error:" nor its panel
    assert "Traceback" not in result.output


def _without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """As if the optional `modules` were not installed (the check asks find_spec)."""
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name in modules else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def _no_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record whether the fleet was read or planned (the work a check must come before)."""
    import wattcap.experiments.fleet as fleet_module

    calls: list[str] = []
    for name in ("load_fleet", "plan_fleet_file"):
        real = getattr(fleet_module, name)

        def record(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(fleet_module, name, record)
    return calls


def test_fleet_plan_says_pyyaml_is_missing_before_planning(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    calls = _no_work(monkeypatch)
    _without(monkeypatch, "yaml")
    result = invoke("fleet", "plan", FLEET / "fleet.yaml")
    assert result.exit_code == 2
    output = flat(result.output)
    assert "yaml" in output and "hint: pip install 'wattcap[fleet]'" in output
    assert calls == []


def test_fleet_simulate_says_flower_is_missing_before_planning(monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    calls = _no_work(monkeypatch)
    _without(monkeypatch, "flwr")
    result = invoke("fleet", "simulate", FLEET / "fleet.yaml", "--engine", "flower")
    assert result.exit_code == 2
    output = flat(result.output)
    assert "flwr" in output and "--engine local" in output
    assert "hint: pip install 'wattcap[fleet]'" in output
    assert calls == []


def test_estimate_says_ray_is_missing_before_it_loads_anything(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    _without(monkeypatch, "ray")
    result = invoke("estimate", "--model", "digits32-cnn", "--proxy", "digits-rotated-32",
                    "--out", tmp_path / "e.json", "--ray", "local")
    assert result.exit_code == 2
    assert "hint: pip install 'wattcap[ray]'" in flat(result.output)


def test_train_on_nvml_without_its_bindings_stops_before_any_file_is_read(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _without(monkeypatch, "pynvml")
    result = invoke("train", "--device", "nvml:0", "--model", "digits32-cnn", "--data",
                    "digits-5-9-32", "--power-cap", "150W", "--target-accuracy", "0.8",
                    "--profile", tmp_path / "absent.json")  # would be "no such file" later
    assert result.exit_code == 2
    output = flat(result.output)
    assert "pynvml" in output and "hint: pip install 'wattcap[nvml]'" in output
    assert "absent.json" not in output


def test_fleet_simulate_says_what_it_does_before_reading_the_fleet(tmp_path: Path) -> None:
    bad = tmp_path / "fleet.json"
    bad.write_text("{}")
    result = invoke("fleet", "simulate", bad, "--engine", "local")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0].startswith(f"checking {bad}")
    assert any(line.startswith(ERROR_PREFIX) for line in lines[1:])


def test_a_local_federation_says_each_round() -> None:
    from wattcap.cli.fleet import _round_line
    from wattcap.experiments.federation import ClientRound, RoundRecord

    record = RoundRecord(round=3, start_s=10.0, round_s=2.5, deadline_s=3.0, accuracy=0.42,
                         clients=[ClientRound(name="a", status="aggregated", cap_w=4.5),
                                  ClientRound(name="b", status="sat out", cap_w=None)])
    shown = CliRunner().invoke(_line_app(_round_line("fleet", 0), record), [])
    assert "fleet, seed 0, round 3: accuracy 42.0%, 2.5 s of fleet time, 1/2 clients" \
        in flat(shown.output)


def _line_app(show: Any, record: Any) -> typer.Typer:
    one = typer.Typer()

    @one.command()
    def main() -> None:
        show(record)

    return one


def test_the_fleet_extra_declares_pyyaml() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    fleet = project["optional-dependencies"]["fleet"]
    assert any(re.match(r"pyyaml\s*>=", dep, re.IGNORECASE) for dep in fleet), fleet


@pytest.mark.parametrize(("shown", "plain"), [
    ("<path>", "PATH"), ("<float range>", "FLOAT RANGE"), ("<str>", "TEXT"),
    ("<peak|average>", "[peak|average]"), ("<int>...", "INTEGER..."), ("TEXT", "TEXT"),
    (None, None)])
def test_newer_typers_types_read_as_click_writes_them(shown: str | None,
                                                      plain: str | None) -> None:
    """typer 0.2x writes '<path>' where typer 0.20 writes 'PATH' (run under it, the help tests
    above hold too)."""
    from wattcap.cli.argument_help import _plain_type

    assert _plain_type(shown) == plain


# -- one error printer: every error and note prints its text, brackets and all -------------------
def test_a_single_caps_notes_keep_their_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    from wattcap.cli.plan import make_plan, print_plan

    result = make_plan(FLEET / "profile-jetson-nano.json", FLEET / "efficiency-proxy.json", 4.5)
    result.notes.append("read as power.draw [W]")
    result.unavailable["baseline-2"] = "needs pip install 'wattcap[fleet]'"
    print_plan(result)
    out = flat(capsys.readouterr().out)
    assert "note: read as power.draw [W]" in out
    assert "baseline-2 not available: needs pip install 'wattcap[fleet]'" in out


def test_restore_reports_a_failure_as_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import wattcap.devices.restore as restore
    from wattcap.devices.restore import Restored

    monkeypatch.setattr(restore, "restore_left_settings", lambda: [
        Restored("nvml-0", {}, False, "cannot write [power limit]")])
    result = invoke("restore")
    assert result.exit_code == 1  # the device's state is not back: not a mistake of the user's
    assert flat(result.output).strip() == \
        f"{ERROR_PREFIX} not restored nvml-0: cannot write [power limit]"


def test_a_readout_prints_the_devices_error_as_text(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from wattcap.cli.profile import print_device_readout
    from wattcap.devices import DeviceError, get_device

    dev = get_device("emulated:jetson-nano")

    def unreadable() -> float:
        raise DeviceError("no reading [sensor busy]")

    monkeypatch.setattr(dev, "read_power_w", unreadable)
    monkeypatch.setattr(dev, "current_frequency_hz", unreadable)
    print_device_readout(dev)
    out = capsys.readouterr().out
    assert "power unreadable: no reading [sensor busy]" in out
    assert "current frequency unreadable: no reading [sensor busy]" in out


# -- one cap parser: the command line, a Session and a schedule read a cap the same way ----------
@pytest.mark.parametrize(("text", "watts"), [
    ("0.25kW", 250.0), ("250 W", 250.0), ("4.5W", 4.5), ("500 mW", 0.5), ("500 mw", 0.5),
    ("0.25 KW", 250.0), ("4.5", 4.5)])
def test_a_cap_reads_the_same_on_the_command_line_in_a_session_and_in_a_schedule(
    text: str, watts: float, tmp_path: Path
) -> None:
    from wattcap.devices.caps import ScheduleCap
    from wattcap.runtime.cap_follower import resolve_cap_source

    schedule = tmp_path / "caps.csv"
    schedule.write_text(f"time_s,cap_w\n0,{text}\n")
    session_source = resolve_cap_source(text)  # what Session(cap=text) follows
    assert session_source is not None
    assert parse_cap(text) == session_source.cap_w(0.0) == ScheduleCap.load(schedule).cap_w(0.0)
    assert parse_cap(text) == pytest.approx(watts)


@pytest.mark.parametrize("text", ["5MW", "5 Mw"])
def test_megawatts_are_refused_everywhere(text: str) -> None:
    from wattcap.devices.caps import CapSourceError, parse_cap_source

    result = invoke("plan", *_plan_inputs(), "--power-cap", text)
    assert result.exit_code == 2 and "megawatts; write mW" in flat(result.output)
    with pytest.raises(CapSourceError, match="megawatts"):
        parse_cap_source(text)


def test_zero_watts_is_no_cap_on_the_command_line_but_a_pause_in_a_schedule(
    tmp_path: Path
) -> None:
    from wattcap.devices.caps import ScheduleCap

    result = invoke("plan", *_plan_inputs(), "--power-cap", "0 W")
    assert result.exit_code == 2 and "positive" in flat(result.output)
    schedule = tmp_path / "caps.csv"
    schedule.write_text("time_s,cap_w\n0,5 W\n10,0 mW\n")
    assert ScheduleCap.load(schedule).cap_w(12.0) == 0.0


# -- plan: the table and the JSON agree on caps nothing runs under -------------------------------
@pytest.mark.parametrize("as_json", [(), ("--json",)])
def test_plan_exits_2_when_no_cap_is_feasible_in_both_forms(as_json: tuple[str, ...]) -> None:
    result = invoke("plan", *_plan_inputs(), "--power-cap", "1,2", *as_json)
    assert result.exit_code == 2, result.output
    assert f"{ERROR_PREFIX} no configuration fits under any of the caps" in flat(result.output)


@pytest.mark.parametrize("as_json", [(), ("--json",)])
def test_plan_with_one_feasible_cap_exits_0_in_both_forms(as_json: tuple[str, ...]) -> None:
    result = invoke("plan", *_plan_inputs(), "--power-cap", "1,4.5", *as_json)
    assert result.exit_code == 0, result.output
    if as_json:
        assert "infeasible" in json.loads(result.output)[0]
    else:
        assert re.search(r"│\s+1 W\s+│\s+—", result.output), result.output
