"""`wattcap plot-profile`: the figure marks the choices the planner makes on the same inputs,
and says on its face when they assume r_b = 1 (no efficiency vector given)."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.text import Text
from typer.testing import CliRunner

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import plan
from wattcap.cli import app
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.experiments import plots
from wattcap.measure.references import reference_profiles_for

CAP_W = 4.5
ASSUMPTION = "r_b = 1 assumed (no efficiency given)"
runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plot") / "nano-digits32.json"
    result = invoke("profile", "--device", "emulated:jetson-nano", "--model", "digits32-cnn",
                    "--exhaustive", "--out", out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def efficiency_file(profile_file) -> Path:
    """An r_b under which large batches need many more samples: a plan that uses it differs
    from one that assumes r_b = 1."""
    table = ProfileTable.load(profile_file)
    samples: dict[int, list[int | None]] = {
        4: [3_000, 3_100], 8: [3_000, 3_050], 16: [3_100, 3_200], 32: [3_300, 3_400],
        64: [9_000, 9_500], 128: [30_000, 31_000]}
    vector = vector_from_samples(
        samples, sample_budget=40_000, model=table.model, input_shape=table.input_shape,
        dataset="digits-rotated-32", task="image-classification", target_accuracy=0.8,
        seeds=[0, 1])
    out = profile_file.parent / "eff.json"
    vector.save(out)
    return out


def _drawn(monkeypatch, *args: object) -> Figure:
    """Run plot-profile and keep the Figure it drew (the real one, only observed)."""
    figures: list[Figure] = []
    real = plots.profile_figure

    def keep(*a, **k) -> Figure:
        fig = real(*a, **k)
        figures.append(fig)
        return fig

    monkeypatch.setattr(plots, "profile_figure", keep)
    result = invoke("plot-profile", *args)
    assert result.exit_code == 0, result.output
    assert len(figures) == 1
    return figures[0]


def _texts(fig: Figure) -> str:
    return " ".join(t.get_text() for t in fig.findobj(Text))


def _star(fig: Figure, table: ProfileTable) -> list[tuple[int, int]]:
    """(batch size, knob value) where each panel drew wattcap's star."""
    where = []
    for ax in fig.axes[:2]:
        stars = [c for c in ax.collections
                 if isinstance(c, PathCollection) and c.get_label() == "wattcap"]
        assert len(stars) == 1
        x, y = stars[0].get_offsets()[0]
        # methods that chose one point are drawn side by side, under half a cell apart
        where.append((table.batch_sizes[round(float(y))], table.knob_values[round(float(x))]))
    return where


def _planned(table: ProfileTable, efficiency: EfficiencyVector | None) -> tuple[int, int]:
    choice = plan(table, CAP_W, efficiency=efficiency,
                  reference_profiles=reference_profiles_for(table, None)).choices["wattcap"]
    return choice.batch_size, choice.knob_value


def test_without_efficiency_the_figure_says_r_b_1_and_stars_that_plan(
        monkeypatch, profile_file, tmp_path) -> None:
    table = ProfileTable.load(profile_file)
    fig = _drawn(monkeypatch, "--profile", profile_file, "--power-cap", CAP_W,
                 "--out", tmp_path / "heatmap.png")
    assert ASSUMPTION in _texts(fig)
    assert _star(fig, table) == [_planned(table, None)] * 2
    b, knob = _planned(table, None)
    for ax in fig.axes[:2]:  # the star lies on the frontier drawn (the planner's, margined)
        [line] = [ln for ln in ax.lines if ln.get_label().startswith("cap frontier")]
        drawn = dict(zip(line.get_ydata(), line.get_xdata(), strict=True))
        assert drawn[table.batch_sizes.index(b)] == table.knob_values.index(knob)
    assert (tmp_path / "heatmap.png").read_bytes()[:4] == b"\x89PNG"


def test_with_efficiency_the_star_is_the_plans_choice_and_nothing_is_assumed(
        monkeypatch, profile_file, efficiency_file, tmp_path) -> None:
    table = ProfileTable.load(profile_file)
    vector = EfficiencyVector.load(efficiency_file)
    fig = _drawn(monkeypatch, "--profile", profile_file, "--efficiency", efficiency_file,
                 "--power-cap", CAP_W, "--out", tmp_path / "heatmap.png")
    texts = _texts(fig)
    assert "r_b = 1" not in texts and "digits-rotated-32" in texts
    chosen = _planned(table, vector)
    assert _star(fig, table) == [chosen] * 2
    # the r_b given moves the choice: the figure without it would have misled
    assert chosen != _planned(table, None)


def test_a_figure_without_a_plan_assumes_nothing(profile_file) -> None:
    import matplotlib.pyplot as plt

    fig = plots.profile_figure(ProfileTable.load(profile_file), CAP_W)
    try:
        assert "r_b" not in _texts(fig)
    finally:
        plt.close(fig)
