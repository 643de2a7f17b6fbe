"""The click command behind the typer app, as a module-level object: the documentation's CLI
reference (mkdocs-click, `docs/cli.md`) is generated from it, so that the reference shows the
help and options the installed `wattcap` has, and no page copies them by hand."""

from __future__ import annotations

import typer.main

from wattcap.cli import app

#: `wattcap` as click sees it: every command and sub-command with its options and help
command = typer.main.get_command(app)
