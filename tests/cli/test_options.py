"""Every CLI option more than one command takes is defined once (issue 25): the same flag, help
and panel in every command that has it."""

from __future__ import annotations

import collections
from typing import Any

import typer.main

from wattcap.cli import app


def _commands() -> dict[str, Any]:
    """Every command, with push/pull's subcommands ('push weights'): typer's own click."""
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    found: dict[str, Any] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if hasattr(command, "list_commands"):  # push / pull
            for sub in command.list_commands(ctx):
                found[f"{name} {sub}"] = command.get_command(ctx, sub)
        elif command is not None:
            found[name] = command
    assert {"train", "plan", "estimate", "push weights", "pull profile"} <= set(found)
    return found


#: flags that name a different thing in each command that has them (each its own file, device
#: list, target, method, plot, seeds or --id), or do a different thing in each (--device-name
#: and --power-mode: what a profile is fetched, downloaded or measured for; profile and train
#: share one --power-mode, the mode the device runs in), so each command defines its own
PER_COMMAND = {"--out", "--model", "--device", "--target-accuracy", "--method", "--id",
               "--quick", "--token", "--ray", "--power-cap", "--profile", "--plot", "--help",
               "--seeds", "--device-name", "--power-mode"}
#: flags with two meanings, each defined once: --proxy is the dataset r_b is estimated on, or a
#: filter of stored vectors; --server is push/pull's required URL (env WATTCAP_SERVER), or the
#: optional server plan/train/estimate fetch from; --model-id and --num-classes of `push`
#: describe an upload; --metric is what wattcap's loop evaluates (train, estimate), or the
#: metric an imported table's runs were measured on (any known metric); --runs-dir is where
#: estimate keeps its runs, or a folder of kept runs compare/sensitivity read besides their own
TWO_MEANINGS = {"--proxy", "--server", "--model-id", "--num-classes", "--metric",
                "--sample-budget", "--runs-dir"}  # a sweep retries a miss; a train run exits 1


def test_a_shared_option_reads_the_same_everywhere() -> None:
    by_flag: dict[str, list[tuple[str, str | None, str | None]]] = collections.defaultdict(list)
    for name, command in _commands().items():
        for param in command.params:
            if param.param_type_name == "option":
                for flag in param.opts:
                    by_flag[flag].append((name, param.help,
                                          getattr(param, "rich_help_panel", None)))
    shared = {flag: uses for flag, uses in by_flag.items()
              if len(uses) > 1 and flag not in PER_COMMAND}
    assert len(shared) >= 20  # the aliases are in use, not just declared
    differ = {flag: uses for flag, uses in shared.items()
              if len({(help_, panel) for _, help_, panel in uses})
              > (2 if flag in TWO_MEANINGS else 1)}
    assert not differ, f"options defined more than once: {differ}"


def test_the_commands_that_take_a_model_and_data_share_their_options() -> None:
    commands = _commands()
    for name in ("pretrain", "estimate", "train", "compare", "sensitivity"):
        flags = {flag for p in commands[name].params for flag in getattr(p, "opts", [])}
        assert {"--input-shape", "--num-classes", "--vocab-size", "--subset-fraction",
                "--test-fraction", "--workers", "--model"} <= flags, name


def test_help_reads_right_and_the_version_is_there() -> None:
    from typer.testing import CliRunner

    from wattcap.core.version import __version__

    runner = CliRunner()
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.strip() == f"wattcap {__version__}"
    estimate = runner.invoke(app, ["estimate", "--help"], env={"COLUMNS": "400"})
    assert "pip install 'wattcap[ray]'" in estimate.output  # not eaten as a style tag
    plan = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "400"})
    assert "eta·E + (1 − eta)·P_max·T" in plan.output
    train = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "400"})
    # the docstring's paragraph re-flows: its line break does not cut a sentence in the help
    assert "battery:..., schedule:FILE, file:PATH) the selection re-runs" in train.output


def test_every_positional_argument_says_what_it_is_in_help() -> None:
    """click 8.5 reset the help typer gives a positional argument to None (wattcap.cli.
    argument_help mends it): every argument of every command shows its help."""
    from typer.testing import CliRunner

    runner = CliRunner()
    checked = 0
    for name, command in _commands().items():
        for param in command.params:
            if param.param_type_name != "argument":
                continue
            assert param.help, f"{name} {param.name}: no help"
            shown = runner.invoke(app, [*name.split(), "--help"], env={"COLUMNS": "400"})
            assert param.help.split(".")[0][:40] in shown.output, (name, shown.output)
            checked += 1
    assert checked >= 5


def test_plan_json_says_what_it_is(tmp_path, nano_resnet18_profile) -> None:
    import json

    from typer.testing import CliRunner

    profile = nano_resnet18_profile.save(tmp_path / "p.json")
    result = CliRunner().invoke(app, ["plan", "--profile", str(profile), "--power-cap", "5",
                                      "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["kind"], data["schema_version"]) == ("wattcap.plan-summary", 2)


def test_the_emulated_boards_are_unkind_unless_asked_otherwise() -> None:
    """demo and compare replay on unkind boards by default (as real boards are); `--board kind`
    is the one deterministic board the goldens pin."""
    from wattcap.cli.options import Board

    commands = _commands()
    for name in ("demo", "compare"):
        (board,) = [p for p in commands[name].params if "--board" in getattr(p, "opts", [])]
        assert board.default == Board.UNKIND, name
        assert set(board.type.choices) == {Board.KIND.value, Board.UNKIND.value}, name
