"""`wattcap estimate`: batch-size efficiency r_b on a proxy data set, by a sweep of batch
sizes and seeds or from the gradient noise scale of one run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.markup import escape

from wattcap.cli.common import (
    check_ray_extra,
    console,
    executor_or_fail,
    fail,
    parse_batch_sizes,
    progress,
)
from wattcap.cli.inputs import (
    check_data,
    check_optimizer,
    check_split_size,
    check_weights,
    check_workers,
    data_options,
    load_data,
    parse_loop_metric,
    parse_target,
    resolve_model,
)
from wattcap.cli.options import (
    PROXY_TARGET_HELP,
    SERVER,
    TRAINING,
    BatchSizeRefOpt,
    BatchSizesOpt,
    EvalEveryOpt,
    InputShapeOpt,
    LrRefOpt,
    MetricOpt,
    ModelIdOpt,
    ModelOpt,
    NumClassesOpt,
    OptimizerOpt,
    ProxyOpt,
    RayOpt,
    SampleBudgetOpt,
    SeedsOpt,
    ServerUrlOpt,
    SubsetFractionOpt,
    TestFractionOpt,
    TokenOpt,
    VocabSizeOpt,
    WeightDecayOpt,
    WeightsOpt,
    WorkersOpt,
)
from wattcap.cli.resume import resumable
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.metric import ACCURACY, TargetMetric

if TYPE_CHECKING:
    from wattcap.core.efficiency import EfficiencyVector


def estimate(
    model: ModelOpt,
    proxy: ProxyOpt,
    out: Annotated[Path, typer.Option(help="The efficiency vector (JSON) to write.")],
    target_accuracy: Annotated[str, typer.Option(
        help=PROXY_TARGET_HELP + " Recorded in the file.", rich_help_panel=TRAINING)] = "auto",
    metric: MetricOpt = "accuracy",
    weights: WeightsOpt = None,
    batch_sizes: BatchSizesOpt = "4,8,16,32,64,128",
    seeds: SeedsOpt = 3,
    sample_budget: SampleBudgetOpt = 20_000,
    eval_every: EvalEveryOpt = 256,
    lr_ref: LrRefOpt = None,
    batch_size_ref: BatchSizeRefOpt = None,
    optimizer: OptimizerOpt = None,
    weight_decay: WeightDecayOpt = 0.0,
    server: ServerUrlOpt = None,
    model_id: ModelIdOpt = None,
    on_server: Annotated[bool, typer.Option(
        help="With --server: run the sweep on the server (a background job; this command "
        "waits for it) and write its result to --out.", rich_help_panel=SERVER)] = False,
    push: Annotated[bool, typer.Option(
        help="With --server: upload the estimated vector, linked to the weights it started "
        "from (needs the token).", rich_help_panel=SERVER)] = False,
    token: TokenOpt = None,
    method: Annotated[str, typer.Option(
        help="'sweep': train every batch size and seed to the target (the reference); 'gns': "
        "one run at the largest batch size measuring the gradient noise scale, r_b = (1 + "
        "b/B_noise) / (1 + b_max/B_noise), at a fraction of the compute. With 'gns' a numeric "
        "--target-accuracy ends the run when the proxy reaches it, 'auto' trains "
        "--gns-samples.", rich_help_panel=TRAINING)] = "sweep",
    gns_samples: Annotated[int, typer.Option(
        help="With --method gns: samples the run trains (at most, with a numeric "
        "--target-accuracy).", rich_help_panel=TRAINING)] = 4096,
    ray: RayOpt = None,
    runs_dir: Annotated[Path | None, typer.Option(
        help="Where each finished (batch size, seed) run is kept, named by everything it "
        "depends on: a killed estimate run again reuses them, and compare/sensitivity reuse "
        "them (give them the same --runs-dir; default: the runs folder of the wattcap "
        "cache).",
        rich_help_panel=TRAINING)] = None,
    input_shape: InputShapeOpt = None,
    num_classes: NumClassesOpt = None,
    vocab_size: VocabSizeOpt = None,
    subset_fraction: SubsetFractionOpt = None,
    test_fraction: TestFractionOpt = None,
    workers: WorkersOpt = 0,
    noise_reference: Annotated[bool, typer.Option(
        help="After the sweep, one more run per seed at the largest batch size measuring the "
        "proxy's gradient noise scale window by window over the budget: the reference `wattcap "
        "train --online-correction` compares the target's with (--method gns records one run's "
        "anyway).",
        rich_help_panel=TRAINING)] = False,
) -> None:
    """Estimate batch-size efficiency r_b on a proxy dataset (every b, K seeds; or from the
    gradient noise scale of one run with --method gns)."""
    check_workers(workers)
    target_metric = parse_loop_metric(metric)
    sweep = _Sweep(
        sizes=parse_batch_sizes(batch_sizes), seeds=seeds, metric=target_metric,
        target=parse_target(target_accuracy, metric=target_metric),
        sample_budget=sample_budget, eval_every=eval_every,
        lr_ref=DEFAULT_LR_REF if lr_ref is None else lr_ref,
        batch_size_ref=DEFAULT_BATCH_SIZE_REF if batch_size_ref is None else batch_size_ref,
        optimizer=optimizer or "adam", weight_decay=weight_decay,
        subset_fraction=subset_fraction, test_fraction=test_fraction)
    _check_estimate(sweep, method, gns_samples, on_server=on_server, ray=ray)
    if noise_reference and (method == "gns" or on_server):
        fail("--noise-reference adds a run to a local sweep: --method gns records the "
             "reference anyway, and a server's sweep has none")
    if (on_server or push or model_id is not None) and not server:
        fail("--on-server, --push and --model-id need --server URL")
    weights_id = None
    if server and on_server:
        vector = _estimate_on_server(sweep, server, token, model, model_id, proxy, input_shape,
                                     num_classes, vocab_size)
    else:
        spec = resolve_model(model, input_shape, num_classes, vocab_size)
        proxy_spec = check_data(proxy, "--proxy")
        options = data_options(spec, input_shape, subset_fraction, test_fraction)
        model = spec.name
        check_weights(weights, model)
        splits = load_data(proxy_spec, spec, options, option="--proxy")
        check_split_size(len(splits[0]), sweep.sizes, "--proxy")
        if server and weights is None:
            from wattcap.cli.server import fetch_estimate_weights

            weights, weights_id = fetch_estimate_weights(server, token, model, model_id)
        if method == "gns":
            vector = _estimate_gns(sweep, model, proxy_spec.text, weights, gns_samples, splits)
        else:
            vector = _estimate_sweep(sweep, model, proxy_spec.text, weights, splits, ray,
                                     workers, options, runs_dir)
            if noise_reference:
                vector = _add_noise_reference(vector, weights, splits)
    vector.save(out)
    if server and push and not on_server:  # a server-side sweep is stored there already
        from wattcap.cli.server import push_estimated

        push_estimated(server, token, vector, weights_id)
    print_efficiency(vector)
    console.print(f"wrote {out}")


@dataclass(frozen=True)
class _Sweep:
    """The settings of an efficiency estimate, checked."""

    sizes: tuple[int, ...]
    target: float | Literal["auto"]
    seeds: int
    sample_budget: int
    eval_every: int
    lr_ref: float
    batch_size_ref: int
    optimizer: str
    weight_decay: float
    subset_fraction: float | None
    test_fraction: float | None
    metric: TargetMetric = ACCURACY


def _check_estimate(sweep: _Sweep, method: str, gns_samples: int, *, on_server: bool,
                    ray: str | None) -> None:
    """Every estimate argument that can be wrong, before anything runs."""
    if method not in ("sweep", "gns"):
        fail(f"--method must be 'sweep' or 'gns', got {method!r}")
    if not sweep.metric.is_accuracy and (method == "gns" or on_server):
        fail(f"--metric {sweep.metric.name} needs a sweep run here: --method gns and "
             "--on-server train to accuracy")
    if method == "gns":
        if len(sweep.sizes) < 2:
            fail("--method gns needs at least two batch sizes (it measures at the smallest "
                 "and the largest)")
        if gns_samples < max(sweep.sizes):
            fail(f"--gns-samples ({gns_samples}) must hold at least one batch of "
                 f"{max(sweep.sizes)}")
        if on_server:
            fail("--method gns runs here: drop --on-server (the server's jobs are sweeps)")
        if ray is not None:
            fail("--method gns is one run: --ray has nothing to spread")
    check_ray_extra(ray)
    if sweep.seeds < 1:
        fail(f"--seeds must be at least 1, got {sweep.seeds}")
    if sweep.sample_budget < sweep.eval_every:
        fail(f"--sample-budget ({sweep.sample_budget}) must be at least --eval-every "
             f"({sweep.eval_every})")
    check_optimizer(sweep.optimizer, sweep.weight_decay, sweep.lr_ref, sweep.batch_size_ref)


def _estimate_on_server(sweep: _Sweep, server: str, token: str | None, model: str,
                        model_id: int | None, proxy: str, input_shape: str | None,
                        num_classes: int | None, vocab_size: int | None) -> EfficiencyVector:
    """The proxy sweep as a server job, for weights stored there."""
    from wattcap.cli.server import estimate_on_server

    if sweep.target == "auto":
        fail("--on-server needs a numeric --target-accuracy (the server job takes one)")
    if num_classes is not None or vocab_size is not None:
        fail("--on-server estimates a model stored on the server: --num-classes and "
             "--vocab-size do not apply")
    if sweep.optimizer != "adam" or sweep.weight_decay:
        fail("--on-server runs the sweep with Adam: --optimizer and --weight-decay do not "
             "apply")
    shape = None
    if input_shape is not None:
        from wattcap.data import ShapeConversionError, parse_image_shape

        try:
            shape = list(parse_image_shape(input_shape))
        except ShapeConversionError as err:
            fail(f"--input-shape: {err}")
    return estimate_on_server(
        server, token, model=model, model_id=model_id, proxy=proxy,
        target_accuracy=float(sweep.target), batch_sizes=sweep.sizes, seeds=sweep.seeds,
        sample_budget=sweep.sample_budget, eval_every=sweep.eval_every, lr_ref=sweep.lr_ref,
        batch_size_ref=sweep.batch_size_ref, subset_fraction=sweep.subset_fraction,
        test_fraction=sweep.test_fraction, input_shape=shape)


def _estimate_sweep(sweep: _Sweep, model: str, proxy: str, weights: Path | None,
                    splits: tuple, ray: str | None, workers: int, options: dict[str, Any],
                    runs_dir: Path | None) -> EfficiencyVector:
    """Every batch size and seed trained to the proxy's target, here or on --ray; each
    finished run kept in the runs folder, so a killed estimate resumes with them."""
    from wattcap.core.cache import cache_dir
    from wattcap.core.schema import WattcapFileError
    from wattcap.train.efficiency import estimate_efficiency
    from wattcap.train.executors import ExecutorError

    runs_dir = runs_dir if runs_dir is not None else cache_dir() / "runs"
    where = executor_or_fail(ray)
    with resumable(f"each finished run is kept in {runs_dir} and reused"), where, progress(
            f"estimating r_b of {model} on {proxy}" + (f" ({where.describe()})" if ray else ""),
            len(sweep.sizes) * sweep.seeds, "runs") as report:
        try:
            return estimate_efficiency(
                model, proxy, sweep.target, weights=weights, batch_sizes=sweep.sizes,
                seeds=sweep.seeds, sample_budget=sweep.sample_budget,
                eval_every_samples=sweep.eval_every, lr_ref=sweep.lr_ref,
                batch_size_ref=sweep.batch_size_ref, executor=where,
                progress=report.show,
                data=splits, data_options=options, num_workers=workers,
                optimizer=sweep.optimizer, weight_decay=sweep.weight_decay,
                target_metric=sweep.metric,
                runs_dir=runs_dir,
            )
        except (KeyError, ValueError, WattcapFileError, ExecutorError) as err:
            fail(str(err).strip("'\""))


def _add_noise_reference(vector: EfficiencyVector, weights: Path | None, splits: tuple
                         ) -> EfficiencyVector:
    """The sweep's vector with the proxy's noise-scale reference run added."""
    from wattcap.train.noise_scale import with_noise_reference

    b, seeds = vector.reference_batch_size, vector.seeds or [0]
    with progress(f"measuring the noise-scale reference on {vector.dataset} (b = {b}, "
                  f"{len(seeds)} seed(s), one after another)", vector.sample_budget,
                  "samples") as report:
        try:
            return with_noise_reference(vector, splits[0], splits[1], weights=weights,
                                        seeds=seeds, progress=report.show)
        except ValueError as err:
            fail(str(err))


def _estimate_gns(sweep: _Sweep, model: str, proxy: str, weights: Path | None,
                  gns_samples: int, splits: tuple) -> EfficiencyVector:
    """r_b from the gradient noise scale of one run at the largest batch size."""
    from wattcap.core.schema import WattcapFileError
    from wattcap.train.noise_scale import estimate_efficiency_gns

    sizes = sweep.sizes
    with progress(f"measuring the gradient noise scale of {model} on {proxy} (b = "
                  f"{min(sizes)} and {max(sizes)})", gns_samples, "samples") as report:
        try:
            return estimate_efficiency_gns(
                model, proxy, sweep.target, weights=weights,
                batch_sizes=sizes, sample_budget=gns_samples,
                eval_every_samples=sweep.eval_every, lr_ref=sweep.lr_ref,
                batch_size_ref=sweep.batch_size_ref, data=splits,
                optimizer=sweep.optimizer, weight_decay=sweep.weight_decay,  # type: ignore[arg-type]
                progress=report.show)
        except (KeyError, ValueError, WattcapFileError) as err:
            fail(str(err).strip("'\""))


def print_efficiency(vector: EfficiencyVector) -> None:
    """The vector as a table, with the notes on where r_b came from."""
    from wattcap.experiments.tables import efficiency_table

    console.print(efficiency_table(vector))
    for note in vector.ratio_notes():
        console.print(f"  [dim]{escape(note)}[/]", highlight=False)
    for reference in vector.noise_reference:
        resolved = [w for w in reference.windows if w.b_low is not None]
        console.print(
            f"  [dim]noise-scale reference for `train --online-correction`: b="
            f"{reference.batch_size} in {reference.batch_size // reference.chunk_size} parts, "
            f"{len(reference.windows)} windows to {reference.samples_covered} samples, "
            f"{len(resolved)} with an interval (a target run is compared over these samples "
            "only)[/]", highlight=False)
