"""The model and data arguments every training command shares: resolved and checked before any
work starts, each problem one clear line.

``--model`` is a registered name or your own ``path/to/file.py:factory`` /
``package.module:factory`` (with ``--input-shape``, ``--num-classes`` or ``--vocab-size`` where
they cannot be inferred); ``--data``/``--proxy`` a data spec (a bundled name or
``FORMAT:PATH``), with ``--subset-fraction``, ``--test-fraction`` and ``--input-shape`` (which
converts images to the model's input shape).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from wattcap.cli.common import fail

if TYPE_CHECKING:
    from wattcap.core.metric import TargetMetric
    from wattcap.data import DataSpec
    from wattcap.data.specs import AnyDataset
    from wattcap.models import ModelSpec

def check_target_accuracy(value: float, option: str = "--target-accuracy") -> None:
    """A fraction in (0, 1]: refuse 90 (meant as %) before anything runs."""
    if not 0 < value <= 1:
        hint = f"; {value:g} % is {value / 100:g}" if 1 < value <= 100 else ""
        fail(f"{option} is a fraction in (0, 1], got {value:g}{hint}")


def parse_target(value: str, option: str = "--target-accuracy",
                 metric: TargetMetric | None = None) -> float | Literal["auto"]:
    """A target accuracy as a fraction in (0, 1], or 'auto'; with another `metric` (loss,
    perplexity), a number in its range."""
    if metric is not None and not metric.is_accuracy:
        if value.strip().lower() == "auto":
            fail(f"{option} 'auto' is a share of the best accuracy: give the {metric.name} "
                 "target as a number")
        try:
            number = float(value)
        except ValueError:
            fail(f"{option} must be a number with --metric {metric.name}, got {value!r}")
        parse_loop_metric(metric.name, number, option)
        return number
    if value.strip().lower() == "auto":
        return "auto"
    try:
        target = float(value)
    except ValueError:
        fail(f"{option} must be a fraction in (0, 1] or 'auto', got {value!r}")
    if not 0 < target <= 1:
        fail(f"{option} must be a fraction in (0, 1] (e.g. 0.9 for 90 %), got {value}")
    return target


def parse_loop_metric(name: str, target: float | None = None,
                      option: str = "--target-accuracy") -> TargetMetric:
    """--metric as a metric wattcap's loop evaluates, with the target (if numeric) in its
    range; a clear exit otherwise."""
    from wattcap.core.metric import MetricError, metric_named
    from wattcap.core.run import check_loop_metric

    try:
        metric = metric_named(name)
        check_loop_metric(metric)
    except MetricError as err:
        fail(f"--metric: {err}")
    if target is not None and metric.is_accuracy:
        check_target_accuracy(target, option)
    elif target is not None:
        try:
            metric.check_target(target)
        except MetricError as err:
            fail(f"{option}: {err}")
    return metric


#: fewer training samples than this many steps of the largest batch size: warned about
FEW_STEPS = 4


def fitting_batch_sizes(train_samples: int) -> str:
    """wattcap's batch sizes that a training split of `train_samples` holds ('4,8,16,32'),
    or '' when it holds none."""
    from wattcap.core.batches import DEFAULT_BATCH_SIZES

    return ",".join(str(b) for b in DEFAULT_BATCH_SIZES if b <= train_samples)


def smaller_batch_sizes_hint(train_samples: int) -> str:
    """What to do about a batch size larger than the training split, in `estimate` (its
    --batch-sizes) and in `train` (whose batch size comes from the profile)."""
    fit = fitting_batch_sizes(train_samples)
    if not fit:
        return f"add data: {train_samples} training samples hold no batch of 4"
    return (f"add data, or use batch sizes of at most {train_samples}: `wattcap estimate ... "
            f"--batch-sizes {fit}`; `wattcap train` plans from the profile's batch sizes: "
            f"re-profile with `wattcap profile ... --batch-sizes {fit}`")


def check_split_size(train_samples: int, batch_sizes: tuple[int, ...] | list[int],
                     option: str = "--data", hint: str | None = None) -> None:
    """Refuse a batch size larger than the training split (every batch would repeat samples),
    saying what to do (`hint`, by default how to use smaller batch sizes); warn when the split
    holds fewer than a few steps of the largest batch size."""
    largest = max(batch_sizes)
    if largest > train_samples:
        fail(f"{option}: batch size {largest} is larger than the training split "
             f"({train_samples} samples): every batch would repeat samples",
             hint=hint or smaller_batch_sizes_hint(train_samples))
    if train_samples < FEW_STEPS * largest:
        from wattcap.cli.common import err_console

        err_console.print(
            f"[yellow]warning:[/] {option}: {train_samples} training samples are fewer than "
            f"{FEW_STEPS} steps of batch size {largest}: an epoch is that short, and its "
            "numbers (r_b, times) will be noisy", highlight=False)


def check_seeds(value: int) -> None:
    """Seeds per configuration: at least one."""
    if value < 1:
        fail(f"--seeds must be at least 1, got {value}")


def check_risk(value: float | None) -> None:
    """--risk: a quantile strictly between 0 and 1 (or not given)."""
    if value is not None and not 0 < value < 1:
        fail(f"--risk must be a quantile in (0, 1), e.g. 0.9; got {value:g}")


def check_workers(value: int) -> None:
    """Worker processes: zero or more."""
    if value < 0:
        fail(f"--workers must be >= 0, got {value}")


def check_optimizer(optimizer: str, weight_decay: float, lr_ref: float,
                    batch_size_ref: int) -> None:
    """The optimizer settings, before anything runs."""
    if optimizer not in ("adam", "adamw"):
        fail(f"--optimizer must be adam or adamw, got {optimizer!r}")
    if weight_decay < 0 or lr_ref <= 0 or batch_size_ref < 1:
        fail("--weight-decay must be >= 0, --lr-ref and --batch-size-ref positive")


def resolve_model(
    model: str,
    input_shape: str | None = None,
    num_classes: int | None = None,
    vocab_size: int | None = None,
) -> ModelSpec:
    """The ModelSpec of ``--model`` (its ``name`` is what files record: a user model's
    canonical text, with an absolute path and the options)."""
    from wattcap.models import UserModelError, get_model_spec, user_model_text
    from wattcap.models.user import looks_like_user_model

    if num_classes is not None and vocab_size is not None:
        fail("give --num-classes or --vocab-size, not both")
    try:
        if looks_like_user_model(model):
            text = user_model_text(
                model, input_shape=input_shape,
                num_classes=vocab_size if vocab_size is not None else num_classes,
                task="char-lm" if vocab_size is not None else None)
            return get_model_spec(text)
        spec = get_model_spec(model)
    except KeyError as err:
        fail(str(err).strip("'\""))
    except UserModelError as err:
        fail(str(err))
    if num_classes is not None or vocab_size is not None:
        fail(f"--num-classes and --vocab-size are for your own model (file.py:factory); "
             f"{model}'s head is sized from the data")
    if input_shape is not None:
        wanted = parse_input_shape(input_shape)
        if wanted != tuple(spec.input_shape):
            fail(f"model {model} takes input shape {'x'.join(map(str, spec.input_shape))}; "
                 f"--input-shape {input_shape} does not fit it")
    return spec


def parse_input_shape(text: str) -> tuple[int, ...]:
    """'3x32x32' (or '3,32,32', or '64' for a char model) as a shape; a clear exit otherwise."""
    try:
        shape = tuple(int(p) for p in text.lower().replace(",", "x").split("x"))
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        fail(f"--input-shape must be positive integers like 3x32x32 (or 64 for a char model), "
             f"got {text!r}")
    return shape


def check_weights(path: Path | None, model: str) -> None:
    """A weights file that exists, is safetensors and was saved for this model."""
    if path is None:
        return
    from wattcap.core.schema import WattcapFileError
    from wattcap.models.weights import read_metadata

    if not Path(path).is_file():
        fail(f"--weights {path}: no such file")
    try:
        saved_for = read_metadata(path).get("model")
    except WattcapFileError as err:
        fail(f"--weights {err}")
    if saved_for is not None and saved_for != model:
        fail(f"--weights {path}: weights are for model {saved_for!r}, not {model!r}")


def check_data(text: str, option: str = "--data") -> DataSpec:
    """Parse a data spec and look at its path (cheap: no data is read)."""
    from wattcap.data import DatasetFormatError, DataSpecError, parse_data_spec

    try:
        spec = parse_data_spec(text)
        spec.check()
    except (DataSpecError, DatasetFormatError) as err:
        fail(f"{option}: {err}")
    return spec


def data_options(
    model: ModelSpec,
    input_shape: str | None = None,
    subset_fraction: float | None = None,
    test_fraction: float | None = None,
) -> dict[str, Any]:
    """Keyword arguments for wattcap.data.load_splits; ranges checked now."""
    if subset_fraction is not None and not 0 < subset_fraction <= 1:
        fail(f"--subset-fraction must be in (0, 1], got {subset_fraction:g}")
    if test_fraction is not None and not 0 < test_fraction < 1:
        fail(f"--test-fraction must be in (0, 1), got {test_fraction:g}")
    options: dict[str, Any] = {"subset_fraction": subset_fraction,
                               "test_fraction": test_fraction}
    if model.task == "char-lm":
        options["context"] = int(model.input_shape[0])  # windows as long as the model reads
    elif input_shape is not None:
        options["input_shape"] = tuple(model.input_shape)
    return options


def data_error_text(err: Exception, model: ModelSpec) -> str:
    """A data error as the command line says it: an image folder of mixed sizes is resized
    by --input-shape (the model's shape), not by Python's size=."""
    from wattcap.data.image_files import MixedImageSizesError

    if isinstance(err, MixedImageSizesError) and model.task == "image-classification":
        where = f"{err.path}: " if err.path is not None else ""
        shape = "x".join(map(str, model.input_shape))
        return (f"{where}{err.sizes}: the images are not all the same size; give "
                f"--input-shape {shape} (the model's) to resize them")
    return str(err)


def load_data(
    spec: DataSpec, model: ModelSpec, options: dict[str, Any], seed: int = 0,
    option: str = "--data",
) -> tuple[AnyDataset, AnyDataset]:
    """Load the (train, test) splits and refuse data the model cannot train on."""
    from wattcap.cli.common import DRY_RUN
    from wattcap.data import (
        DataMismatchError,
        DatasetFormatError,
        DataSpecError,
        check_data_fits_model,
        load_splits,
    )

    try:  # a dry run reads an image folder's pixel cache but writes none
        train, test = load_splits(spec, seed=seed, write_cache=not DRY_RUN.get(), **options)
        check_data_fits_model(train, model)
    except (DataSpecError, DatasetFormatError, DataMismatchError) as err:
        fail(f"{option}: {data_error_text(err, model)}")
    try:  # the head must fit the data's classes (a user's factory may fix its own)
        model.build(num_classes=train.num_classes)
    except ValueError as err:
        fail(f"{option}: {err}")
    return train, test
