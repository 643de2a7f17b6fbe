"""`wattcap plot-profile`: the figure marks the choices the planner makes on the same inputs,
and says on its face when they assume r_b = 1 (no efficiency vector given)."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Text

from tests.cli.cli_run import invoke
from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import Replanner, plan
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.knob import knob_number
from wattcap.core.profile import ProfileTable
from wattcap.experiments import plots
from wattcap.measure.references import reference_profiles_for

CAP_W = 4.5
#: on the emulated AGX Orin only b=4 has a point under this cap (with the planner's margin)
LOW_CAP_W = 11.6
ASSUMPTION = "r_b = 1 assumed (no efficiency given)"


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


@pytest.fixture(scope="module")
def datacenter_file(tmp_path_factory) -> Path:
    """A pruned profile of an emulated H100 (110 clocks): b=128 at every clock, b=4 at the
    highest only, the rest of its row unmeasured."""
    out = tmp_path_factory.mktemp("plot-h100") / "h100-digits32.json"
    result = invoke("profile", "--device", "emulated:h100-sxm", "--model", "digits32-cnn",
                    "--power-cap", 350, "--batch-sizes", "4,128", "--out", out)
    assert result.exit_code == 0, result.output
    return out


def _laid_out(table: ProfileTable, cap_w: float) -> Figure:
    """The figure with its plan, drawn once so every text has its final place."""
    result = plan(table, cap_w, reference_profiles=reference_profiles_for(table, None))
    fig = plots.profile_figure(table, cap_w, result)
    fig.canvas.draw()
    return fig


def _legends(fig: Figure) -> list[Legend]:
    """Every legend drawn: the figure's and any inside an axes."""
    inside = [ax.get_legend() for ax in fig.axes]
    return [*fig.legends, *(legend for legend in inside if legend is not None)]


def _overlap(a, b) -> bool:
    """Whether two display-space boxes share area (touching edges do not count)."""
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("count", [1, 12, 13, 50, 110, 111, 400])
def test_knob_ticks_are_bounded_and_keep_the_ends(count: int) -> None:
    keep = [count // 3, count // 3 + 1, count - 2]
    picked = plots.knob_tick_indices(count, keep)
    assert len(picked) <= plots.MAX_KNOB_TICKS
    assert picked[0] == 0 and picked[-1] == count - 1
    assert picked == sorted(set(picked))
    if count > plots.MAX_KNOB_TICKS:
        gap = -(-count // plots.MAX_KNOB_TICKS)
        assert min(b - a for a, b in zip(picked, picked[1:], strict=False)) >= gap
        # a kept value is labelled, or lies next to a label it would have collided with
        assert all(min(abs(k - p) for p in picked) < gap for k in keep)


def test_a_datacenter_gpus_clock_labels_are_few_legible_and_name_the_ends(
        datacenter_file) -> None:
    import matplotlib.pyplot as plt

    table = ProfileTable.load(datacenter_file)
    assert len(table.knob_values) > 100
    fig = _laid_out(table, 350)
    ends = {knob_number(table.knob_kind, v) for v in (table.knob_values[0],
                                                      table.knob_values[-1])}
    try:
        for ax in fig.axes[:2]:
            labels = [t for t in ax.get_xticklabels() if t.get_text()]
            assert 2 <= len(labels) <= plots.MAX_KNOB_TICKS
            assert ends <= {t.get_text() for t in labels}
            boxes = [t.get_window_extent() for t in labels]
            assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    finally:
        plt.close(fig)


@pytest.mark.parametrize("which", ["datacenter_file", "profile_file"])
def test_titles_and_legend_stay_clear_of_each_other_and_of_the_data(
        request, which: str) -> None:
    import matplotlib.pyplot as plt

    table = ProfileTable.load(request.getfixturevalue(which))
    fig = _laid_out(table, 350 if which == "datacenter_file" else CAP_W)
    try:
        panels = fig.axes[:2]
        titles = [ax.title.get_window_extent() for ax in panels]
        assert fig._suptitle is not None
        titles.append(fig._suptitle.get_window_extent())
        assert not any(_overlap(a, b) for i, a in enumerate(titles) for b in titles[i + 1:])
        legends = _legends(fig)
        assert legends
        for legend in legends:
            box = legend.get_window_extent()
            assert not any(_overlap(box, ax.get_window_extent()) for ax in panels)
            assert not any(_overlap(box, title) for title in titles)
        assert ASSUMPTION in _texts(fig)
    finally:
        plt.close(fig)


def test_a_pruned_profiles_unmeasured_cells_are_shown_as_such(datacenter_file) -> None:
    import matplotlib.pyplot as plt

    table = ProfileTable.load(datacenter_file)
    assert table.mode == "pruned" and len(table.points) < 2 * len(table.knob_values)
    fig = _laid_out(table, 350)
    try:
        assert any(t.get_text().startswith("not measured")
                   for legend in _legends(fig) for t in legend.get_texts())
    finally:
        plt.close(fig)


@pytest.fixture(scope="module")
def low_cap_file(tmp_path_factory) -> Path:
    """A profile of the emulated AGX Orin pruned for a cap so low that only b=4 has a point
    under it (b=16 at its lowest clock draws more)."""
    out = tmp_path_factory.mktemp("plot-orin") / "orin-digits32.json"
    result = invoke("profile", "--device", "emulated:jetson-agx-orin", "--model",
                    "digits32-cnn", "--power-cap", LOW_CAP_W, "--batch-sizes", "4,16",
                    "--out", out)
    assert result.exit_code == 0, result.output
    return out



def _frontier_lines(ax) -> list:
    return [ln for ln in ax.lines if ln.get_label().startswith("cap frontier")]


def test_a_frontier_of_one_batch_size_is_drawn_and_named(
        monkeypatch, low_cap_file, tmp_path) -> None:
    table = ProfileTable.load(low_cap_file)
    frontier = Replanner(table).selector.frontier(LOW_CAP_W)
    assert list(frontier) == [4]  # the case: one batch size alone fits under the cap
    cell = (table.knob_values.index(frontier[4].knob_value), table.batch_sizes.index(4))
    fig = _drawn(monkeypatch, "--profile", low_cap_file, "--power-cap", LOW_CAP_W,
                 "--out", tmp_path / "heatmap.png")
    for ax in fig.axes[:2]:
        [line] = _frontier_lines(ax)
        # a line through one point draws nothing: the point itself is marked, visibly
        assert line.get_marker() == "o" and line.get_markersize() > 0
        assert line.get_markeredgecolor() == "w" and line.get_visible()
        assert list(zip(line.get_xdata(), line.get_ydata(), strict=True)) == [cell]
        assert line.get_label().endswith("only b=4 fits")
    assert _star(fig, table) == [(4, frontier[4].knob_value)] * 2
    [legend] = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert f"cap frontier ({LOW_CAP_W:g} W, with the planner's margin): only b=4 fits" in labels
    [handle] = [h for h, t in zip(legend.legend_handles, labels, strict=True)
                if t.startswith("cap frontier")]
    assert handle.get_marker() == "o"


def test_a_cap_nothing_meets_draws_no_frontier_and_names_none(low_cap_file) -> None:
    import matplotlib.pyplot as plt

    table = ProfileTable.load(low_cap_file)
    below = Replanner(table).lowest_feasible_cap_w - 0.1
    fig = plots.profile_figure(table, below)
    try:
        assert all(_frontier_lines(ax) == [] for ax in fig.axes[:2])
        assert not any(t.get_text().startswith("cap frontier")
                       for legend in _legends(fig) for t in legend.get_texts())
    finally:
        plt.close(fig)


def _table_with_a_hot_row(batch_sizes: list[int], hot: int) -> ProfileTable:
    """A clock profile where every row but `hot` has points under 10 W (the hot row draws
    20 W at every clock): the frontier skips a row in the middle."""
    from wattcap.core.profile import ProfilePoint

    clocks = [400_000_000, 800_000_000]
    points = [ProfilePoint(batch_size=b, knob_value=f,
                           peak_power_w=(20.0 if b == hot else 4.0) + f / 1e8,
                           avg_power_w=3.0, seconds_per_sample=1e-3 * 4e8 / f, steps=5,
                           readings=10)
              for b in batch_sizes for f in clocks]
    return ProfileTable(device="jetson-nano", device_kind="emulated", sensor_rail="POM_5V_GPU",
                        sensor_period_s=0.05, model="digits-cnn", input_shape=[1, 8, 8],
                        batch_sizes=batch_sizes, knob_values=clocks,
                        max_batch_size=max(batch_sizes), mode="exhaustive", points=points,
                        points_measured=len(points), profiling_device_s=1.0)


@pytest.mark.parametrize(("batch_sizes", "lines", "rings"), [
    ([4, 8, 16, 32], [[2, 3]], [[0]]),  # a line through the rows that touch, a ring apart
    ([4, 8, 16], [], [[0], [2]]),  # no two rows touch: rings only
])
def test_a_frontier_is_not_drawn_across_a_row_that_has_no_point_under_the_cap(
        batch_sizes: list[int], lines: list[list[int]], rings: list[list[int]]) -> None:
    import matplotlib.pyplot as plt

    table = _table_with_a_hot_row(batch_sizes, hot=8)
    assert sorted(Replanner(table).selector.frontier(15.0)) == [b for b in batch_sizes if b != 8]
    fig = plots.profile_figure(table, 15.0)
    try:
        for ax in fig.axes[:2]:
            drawn = [ln for ln in ax.lines if ln.get_path_effects()]  # the frontier's outline
            assert sorted(list(ln.get_ydata()) for ln in drawn
                          if ln.get_linestyle() == "--") == lines
            assert sorted(list(ln.get_ydata()) for ln in drawn if ln.get_marker() == "o") \
                == rings
            assert len(_frontier_lines(ax)) == 1  # one legend entry, on the line if any
        [legend] = fig.legends
        [handle] = [h for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True)
                    if t.get_text().startswith("cap frontier")]
        assert handle.get_linestyle() == ("--" if lines else "None")
    finally:
        plt.close(fig)
