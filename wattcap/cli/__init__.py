"""The `wattcap` command line: one typer app, a module per command group.

Modules: `options` (every option more than one command takes, as one `Annotated` alias),
`common` (consoles, clear exits, shared parsing), `inputs` (model and data checks), `errors`
(the one handler of `WattcapError`), `devices`, `profile` (profile, plot-profile), `files`
(migrate, import, export), `plan`, `estimate`, `train` (pretrain, train), `demo`,
`experiments` (compare, sensitivity), `fleet` (fleet plan), `server` (serve, push, pull
and the `--server` helpers) and `argument_help` (a mend of typer on click 8.5). Each imports
only typer, rich and light wattcap modules at load time; torch loads inside the commands that
train or measure, so `wattcap --help` and the light commands start fast. No library module
imports this package.
"""

from __future__ import annotations

import typer

from wattcap.cli import (
    demo,
    devices,
    estimate,
    experiments,
    files,
    fleet,
    plan,
    profile,
    server,
    train,
)
from wattcap.cli.argument_help import keep_argument_help, keep_one_face
from wattcap.cli.errors import WattcapGroup

keep_argument_help()  # before typer builds the commands (at the first call of `app`)
keep_one_face()

app = typer.Typer(
    help="wattcap: choose batch size and GPU frequency (or power limit, or Jetson power mode) "
    "together, for the fastest training under a power cap.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # help is markdown: paragraphs re-flow (no hard line breaks from the docstrings), and
    # "wattcap[ray]" is an install extra, not a rich style tag
    rich_markup_mode="markdown",
    cls=WattcapGroup,  # every command's WattcapError ends here, in one line and an exit code
)

def _print_version(value: bool) -> None:
    if value:
        from wattcap.core.version import __version__

        typer.echo(f"wattcap {__version__}")
        raise typer.Exit()


@app.callback()
def _configure_threads(
    version: bool = typer.Option(False, "--version", "-V", is_eager=True,
                                 callback=_print_version,
                                 help="Print wattcap's version and exit."),
) -> None:
    """Before any command: torch's CPU threads (see `threads`)."""
    from wattcap.cli.threads import configure_torch_threads

    configure_torch_threads()


app.command("devices")(devices.devices)
app.command("restore")(devices.restore)
app.command("profile")(profile.profile)
app.command("plan")(plan.plan_command)
app.command("plot-profile")(profile.plot_profile_command)
app.command("migrate")(files.migrate)
app.add_typer(files.import_app, name="import")
app.add_typer(files.export_app, name="export")
app.command("pretrain")(train.pretrain)
app.command("estimate")(estimate.estimate)
app.command("train")(train.train)
app.command("demo")(demo.demo)
app.command("compare")(experiments.compare)
app.command("sensitivity")(experiments.sensitivity)
app.add_typer(fleet.fleet_app, name="fleet")
# serve / push / pull: fastapi, uvicorn and httpx (the optional wattcap[server] extra) load when
# a server command runs, so the core CLI works without them.
app.command("serve")(server.serve)
app.add_typer(server.push_app, name="push")
app.add_typer(server.pull_app, name="pull")


def main() -> None:
    """Entry point of the `wattcap` script."""
    app()


__all__ = ["app", "main"]
