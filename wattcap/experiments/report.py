"""The comparison report: report.md and report.html with the table (methods × scenarios, mean ±
std time-to-accuracy and energy), bar charts, profile heatmaps with every method's choice, and
the proxy-sensitivity heatmaps."""

from __future__ import annotations

import html
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from wattcap.core.files import atomic_path, write_file
from wattcap.core.knob import knob_unit
from wattcap.core.plan import METHODS
from wattcap.experiments.compare import Comparison, MethodResult  # noqa: E402

_COLORS = {"wattcap": "tab:green", "baseline-1": "tab:red", "baseline-2": "tab:orange",
           "fastest": "tab:blue"}


def _cap(cap: float | None) -> str:
    return "no cap" if cap is None else f"{cap:g} W"


def scenarios(comparison: Comparison) -> list[tuple[str, float | None, str]]:
    """Distinct (device, cap, target) in result order."""
    seen: list[tuple[str, float | None, str]] = []
    for r in comparison.results:
        key = (r.device, r.power_cap_w, r.target)
        if key not in seen:
            seen.append(key)
    return seen


def _cell(comparison: Comparison, r: MethodResult | None) -> str:
    from wattcap.experiments.significance import mean_std_label, signed_pct

    if r is None:
        return "n/a"
    if r.missed:
        text = f"b={r.batch_size} @ {comparison.describe_knob(r.knob_value)}: " + (
            f"target {r.missed_label()}" if r.expected_time_s is None else r.missed_label())
        over = comparison.over_fastest_pct(r)
        if over is not None and r.method != "fastest":
            text += f", {signed_pct(over)} % over fastest"
        return text
    times = [t for t in r.time_s if t is not None]
    energies = [e for e in r.energy_j if e is not None]
    text = (f"b={r.batch_size} @ {comparison.describe_knob(r.knob_value)}: "
            f"{mean_std_label(times, digits=2, seeds=False)} s, "
            + (f"{mean_std_label(energies, seeds=False)} J" if energies else
               "energy not read (shorter than the sensor's period)")
            + f" ({len(times)} seed"
            f"{'' if len(times) == 1 else 's'})")
    over = comparison.over_fastest_pct(r)
    if over is not None and r.method != "fastest":
        text += f", {signed_pct(over)} % over fastest"
    versus = comparison.versus_wattcap(r)
    if versus is not None:
        text += f", {versus.ratio_label(comparison.RATIO_DIGITS)} wattcap's time"
    if r.cap_violations:
        text += f", {r.cap_violations} cap violation(s) stepped down"
    replanned = r.board_replan_label(comparison.describe_knob)
    if replanned:
        text += f"; {replanned}"
    return text


def table_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one row per scenario, one column per method."""
    header = ["device", "power cap", "target"] + list(METHODS)
    rows = []
    for device, cap, target in scenarios(comparison):
        rows.append([device, _cap(cap), target] + [
            _cell(comparison, comparison.get(device, cap, target, m)) for m in METHODS])
    return header, rows


def bar_chart(comparison: Comparison, out: Path, field: str) -> Path:
    """Grouped bars per scenario and method, error bars = std over seeds; one panel per target
    (their scales differ), and a method that did not reach the target marked as such."""
    keys = scenarios(comparison)
    targets = list(dict.fromkeys(t for _, _, t in keys))
    label = "Time-to-accuracy (device s)" if field == "time" else "Energy to accuracy (J)"
    quantity = "time-to-accuracy (device s)" if field == "time" else "energy to accuracy (J)"
    per_panel = max(sum(1 for k in keys if k[2] == t) for t in targets)
    fig, axes = plt.subplots(len(targets), 1, squeeze=False, constrained_layout=True,
                             figsize=(max(8, 1.6 * per_panel + 2), 1 + 4 * len(targets)))
    width = 0.8 / len(METHODS)
    for ax, target in zip(axes[:, 0], targets, strict=True):
        panel = [(d, c) for d, c, t in keys if t == target]
        for i, method in enumerate(METHODS):
            means, stds, missing = [], [], []
            for j, (device, cap) in enumerate(panel):
                r = comparison.get(device, cap, target, method)
                # with restarts where a seed missed (its reached seeds' spread shown)
                mean = None if r is None else (r.expected_time_s if field == "time"
                                               else r.expected_energy_j)
                std = 0.0 if r is None else (r.time_std_s if field == "time"
                                             else r.energy_std_j)
                means.append(np.nan if mean is None else mean)
                stds.append(std)
                if r is not None and mean is None:
                    missing.append(j)
            xs = np.arange(len(panel)) + (i - (len(METHODS) - 1) / 2) * width
            ax.bar(xs, means, width, yerr=stds, capsize=3, label=method,
                   color=_COLORS[method])
            for j in missing:
                ax.annotate("not reached", (xs[j], 0), xytext=(0, 3),
                            textcoords="offset points", rotation=90, ha="center",
                            va="bottom", fontsize=7, color=_COLORS[method])
        ax.set_xticks(range(len(panel)), [f"{d}\n{_cap(c)}" for d, c in panel], fontsize=8)
        ax.set_xlim(-0.5, len(panel) - 0.5)  # bars of unreached runs are NaN: keep their room
        ax.set_ylabel(label)
        ax.set_xlabel("Scenario (device, power cap)")
        goal = comparison.target_metric.target_text(comparison.target_accuracy)
        ax.set_title(f"Target {target}: {quantity} of {comparison.model} to {goal}, mean ± "
                     f"std over {comparison.seeds} seed(s)")
        ax.legend(title="method", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    path = out / f"bars-{field}.png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


def sensitivity_heatmap(
    matrix: list[list[float | None]], proxies: list[str], targets: list[str], cap: str,
    out: Path,
) -> Path:
    """Proxies × targets heatmap of wattcap's % time increase over the fastest configuration."""
    data = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)
    fig, ax = plt.subplots(figsize=(1.8 * len(targets) + 3, 1.0 * len(proxies) + 2),
                           constrained_layout=True)
    image = ax.imshow(data, cmap="Reds", vmin=0, vmax=max(5.0, float(np.nanmax(data))
                                                          if np.isfinite(data).any() else 5.0))
    fig.colorbar(image, ax=ax, label="time increase over fastest (%)")
    for i in range(len(proxies)):
        for j in range(len(targets)):
            value = data[i, j]
            ax.text(j, i, "n/a" if np.isnan(value) else f"{value:.1f} %", ha="center",
                    va="center", fontsize=9)
    ax.set_xticks(range(len(targets)), targets, rotation=20)
    ax.set_yticks(range(len(proxies)), proxies)
    ax.set_xlabel("Target dataset")
    ax.set_ylabel("Proxy dataset")
    ax.set_title(f"Proxy sensitivity, power cap {cap}")
    path = out / f"sensitivity-{cap.replace(' ', '')}.png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


def input_files(out: Path, extra: list[Path] | None = None) -> list[tuple[str, str, str]]:
    """The files a report is made from, as (path, kind, sha256 prefix): the profiles,
    efficiency vectors, weights and results in `out`, and `extra` files kept elsewhere (e.g.
    the user's --weights)."""
    import json

    from wattcap.models.weights import file_sha256

    patterns = ("profile-*.json", "efficiency-*.json", "*.safetensors", "comparison.json",
                "sensitivity.json")
    paths = [path for pattern in patterns for path in sorted(out.glob(pattern))]
    paths += [path for path in extra or [] if path.exists() and path not in paths]
    found = []
    for path in paths:
        if path.suffix == ".json":
            try:
                kind = str(json.loads(path.read_text()).get("kind", "sensitivity matrices"))
            except (ValueError, AttributeError):
                kind = "unreadable JSON"
        else:
            kind = "weights"
        shown = path.relative_to(out) if path.is_relative_to(out) else path
        found.append((str(shown), kind, file_sha256(path)[:12]))
    return found


def write_report(
    comparison: Comparison,
    out: Path,
    images: list[tuple[str, Path]],
    sensitivity: dict | None = None,
    inputs: list[tuple[str, str, str]] | None = None,
    cautions: list[str] | None = None,
) -> tuple[Path, Path]:
    """Write report.md and report.html into `out`; `inputs` (see `input_files`) are listed
    under "Made from"; `cautions` (the proxy's, `EfficiencyVector.cautions`: a near-chance
    target) are said under the introduction, before the table that rests on them."""
    header, rows = table_rows(comparison)
    proxy_target = ("" if comparison.proxy_target_accuracy is None else
                    " (its own target " + comparison.proxy_target_metric.target_text(
                        comparison.proxy_target_accuracy, digits=2) + ")")
    goal = comparison.target_metric.target_text(comparison.target_accuracy)
    intro = (
        f"Model **{comparison.model}**, proxy **{comparison.proxy}**{proxy_target}, targets "
        f"{', '.join(comparison.targets)}, target {goal}, "
        f"{comparison.seeds} seed(s) behind every number. Each cell: the chosen batch size and "
        f"{knob_unit(comparison.knob_kind).label}, then the measured time-to-accuracy (device "
        "seconds) and energy "
        "(joules), mean ± std over the seeds (one seed shows no spread), the percentage over "
        "the fastest configuration (a brute force over the measured target runs) and the "
        "method's time over wattcap's ('within noise' where Welch's t-test on log times over "
        "the seeds does not separate them, 5 %). " + (
            "The training math of each (target, batch size, seed) ran once; its steps were "
            "replayed on each emulated device at each method's frequency, with the power "
            "sensor and the cap watchdog live." + (
                " Unkind boards: each seed replayed on a board state drawn for it (speed, "
                "power, host speed, a lagging sensor), the same for every method; the profile "
                "was measured on a board of its own draw; wattcap's runs are a Session's, "
                "which re-plans once where its board's level (its first windows) calls for "
                "it, each step's math the recorded run's of the batch size in use; the "
                "fastest is the brute force over replays of each batch size's highest clocks "
                "under the cap (one configuration for every seed)."
                if comparison.board == "unkind" else "")
            if comparison.trace_label is None else
            f"Replayed from a trace, nothing trained: {comparison.trace_label}. Each time is "
            "the table's time per sample at the method's choice times the samples that seed "
            "needed on the target; energy uses the table's average power.")
        + (" The caps hold average power (a power limit's, a site's budget), not peaks."
           if comparison.cap_on == "average" else "")
        + (f" wattcap chose robustly to a target whose critical batch size lies up to "
           f"{comparison.transfer_factor:g}x from the proxy's either way (minimax regret); "
           "the baselines and the fastest are unchanged by it."
           if comparison.transfer_factor is not None else "")
    )
    md = [f"# wattcap comparison: {comparison.model}", "", intro, ""]
    md += [f"> **{caution}**\n" for caution in cautions or []]
    md += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(row) + " |" for row in rows]
    if comparison.infeasible:
        md += ["", "Infeasible scenarios:", ""] + [f"- {line}" for line in comparison.infeasible]
    if sensitivity:
        seeds = sensitivity.get("seeds")
        md += ["", "## Proxy sensitivity", "",
               "Percentage time increase of wattcap over the fastest configuration when r_b is "
               "estimated on each proxy (with its own target accuracy) and training happens on "
               "each target: T(b, f) from the profile times the samples to target measured on "
               "the target, mean over "
               + (f"{seeds} seed(s)" if seeds else "the seeds") + ": a prediction on the "
               "profile's table, where the comparison above replays each seed's run (on unkind "
               "boards, each on a board of its own, with the watchdog live), so the two can "
               "differ for the same pairing."]
        for cap, matrix in sensitivity["matrices"].items():
            md += ["", f"{_cap_heading(cap)}:", "",
                   "| proxy \\ target | " + " | ".join(sensitivity["targets"]) + " |",
                   "|" + "---|" * (len(sensitivity["targets"]) + 1)]
            for proxy, row in zip(sensitivity["proxies"], matrix, strict=True):
                md.append(f"| {proxy} | " + " | ".join(
                    "n/a" if v is None else f"{v:.1f} %" for v in row) + " |")
    md += ["", "## Figures", ""]
    md += [f"![{title}]({path.name})" for title, path in images]
    footer = (f"Raw results: `results.csv`; all runs: `runs/`. `compare`: "
              f"{comparison.runs_trained} training runs trained, {comparison.runs_reused} "
              "reused")
    if sensitivity and "runs_trained" in sensitivity:
        footer += (f"; `sensitivity`: {sensitivity['runs_trained']} trained, "
                   f"{sensitivity['runs_reused']} reused")
    made_from = [["path", "kind", "sha256"], *[list(row) for row in inputs or []]]
    if inputs:
        md += ["", "## Made from", "", "| path | kind | sha256 |", "|---|---|---|"]
        md += [f"| `{path}` | {kind} | `{digest}…` |" for path, kind, digest in inputs]
    md += ["", footer + "."]
    md_path = out / "report.md"
    write_file(md_path, "\n".join(md) + "\n")

    def html_table(head: list[str], body: list[list[str]]) -> str:
        th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                      for row in body)
        return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>wattcap comparison: {html.escape(comparison.model)}</title>",
        "<style>body{font-family:sans-serif;max-width:1300px;margin:2em auto}"
        "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #bbb;"
        "padding:4px 6px;text-align:left}th{background:#eee}img{max-width:100%}</style>",
        "</head><body>", f"<h1>wattcap comparison: {html.escape(comparison.model)}</h1>",
        f"<p>{html.escape(intro.replace('**', ''))}</p>",
        *(f"<p class='caution'><strong>{html.escape(caution)}</strong></p>"
          for caution in cautions or []),
        html_table(header, rows),
    ]
    if sensitivity:
        parts.append("<h2>Proxy sensitivity</h2>")
        for cap, matrix in sensitivity["matrices"].items():
            body = [[p] + ["n/a" if v is None else f"{v:.1f} %" for v in row]
                    for p, row in zip(sensitivity["proxies"], matrix, strict=True)]
            parts.append(f"<h3>{html.escape(_cap_heading(cap))}</h3>")
            parts.append(html_table(["proxy \\ target"] + sensitivity["targets"], body))
    parts.append("<h2>Figures</h2>")
    parts += [f"<h3>{html.escape(t)}</h3><img src='{p.name}' alt='{html.escape(t)}'>"
              for t, p in images]
    if inputs:
        parts.append("<h2>Made from</h2>")
        parts.append(html_table(made_from[0], made_from[1:]))
    parts.append("</body></html>")
    html_path = out / "report.html"
    write_file(html_path, "\n".join(parts))
    return md_path, html_path


def _cap_heading(cap: str) -> str:
    """A sensitivity matrix's heading: "Power cap 4.5 W", or "No cap"."""
    return "No cap" if cap == "none" else f"Power cap {cap} W"
