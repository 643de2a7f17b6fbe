"""`wattcap demo`: the main job on the embedded default (emulated Jetson Nano, bundled data)."""

from __future__ import annotations

from pathlib import Path

import typer

from wattcap.cli.common import console
from wattcap.cli.options import Board, BoardOpt


def demo(
    out: Path = typer.Option(Path("demo-output"), help="Folder for the files and plots."),
    quick: bool = typer.Option(False, help="Smaller run (used by the tests)."),
    board: BoardOpt = Board.UNKIND,
    plots: bool = typer.Option(True, help="Draw the profile heatmaps (about 2 s each); "
                               "--no-plots writes the files only."),
) -> None:
    """The main job on the embedded default: the emulated Jetson Nano and bundled data."""
    from wattcap.experiments.demo import run_demo

    run_demo(out, console=console, quick=quick, board=board.value, plots=plots)
