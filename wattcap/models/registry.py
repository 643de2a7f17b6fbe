"""Model specs and the registry that maps a name to one.

A `ModelSpec` carries everything the rest of wattcap needs to know about a model without
special-casing it: how to build it, what one input sample looks like (for workload measurement
and random example batches), and how to score its outputs (loss and accuracy), for image
classifiers and the character-level language model alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

TASKS = ("image-classification", "char-lm")
_DTYPES = {"float32": torch.float32, "int64": torch.int64}


@dataclass(frozen=True)
class ModelSpec:
    """What wattcap knows about one registered model architecture."""

    name: str
    input_shape: tuple[int, ...]
    input_dtype: str
    task: str
    default_num_classes: int
    reference: bool
    description: str
    # factory(num_classes) -> fresh module; excluded from eq/repr so specs compare by metadata
    factory: Callable[[int], nn.Module] = field(compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"model {self.name!r}: task must be one of {TASKS}, got {self.task!r}")
        if self.input_dtype not in _DTYPES:
            raise ValueError(
                f"model {self.name!r}: input_dtype must be one of {sorted(_DTYPES)}, "
                f"got {self.input_dtype!r}"
            )
        if self.default_num_classes < 2:
            raise ValueError(f"model {self.name!r}: default_num_classes must be >= 2")

    @property
    def torch_dtype(self) -> torch.dtype:
        """The torch dtype of the model's input tensor."""
        return _DTYPES[self.input_dtype]

    def _classes(self, num_classes: int | None) -> int:
        n = self.default_num_classes if num_classes is None else int(num_classes)
        if n < 2:
            raise ValueError(f"model {self.name!r}: num_classes must be >= 2, got {n}")
        return n

    def build(self, num_classes: int | None = None) -> nn.Module:
        """Build a fresh, randomly initialised model (deterministic given torch.manual_seed).

        `num_classes` is the number of classes for image models and the vocabulary size for
        the char-level language model; None means `default_num_classes`.
        """
        return self.factory(self._classes(num_classes))

    def example_batch(
        self,
        batch_size: int,
        num_classes: int | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Random (inputs, targets) of the right shapes and dtypes for `batch_size` samples."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        n = self._classes(num_classes)
        shape = (batch_size, *self.input_shape)
        if self.input_dtype == "int64":
            inputs = torch.randint(0, n, shape, generator=generator)
        else:
            inputs = torch.randn(shape, generator=generator)
        if self.task == "char-lm":
            # next-character targets: one per input position
            targets = torch.randint(0, n, shape, generator=generator)
        else:
            targets = torch.randint(0, n, (batch_size,), generator=generator)
        return inputs, targets

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy; for char-lm every next-character prediction counts once."""
        if self.task == "char-lm":
            return F.cross_entropy(outputs.reshape(-1, outputs.size(-1)), targets.reshape(-1))
        return F.cross_entropy(outputs, targets)

    def correct(self, outputs: torch.Tensor, targets: torch.Tensor) -> tuple[int, int]:
        """(number of correct predictions, number of predictions counted)."""
        pred = outputs.argmax(dim=-1)
        if pred.shape != targets.shape:
            raise ValueError(
                f"model {self.name!r}: predictions {tuple(pred.shape)} do not match "
                f"targets {tuple(targets.shape)}"
            )
        return int((pred == targets).sum().item()), targets.numel()


_REGISTRY: dict[str, ModelSpec] = {}
# Specs of nn.Module instances handed to the Python API (wattcap.models.user.spec_for_module),
# by name, with their architecture fingerprint.
_RUNTIME: dict[str, tuple[ModelSpec, str]] = {}


def register_model(spec: ModelSpec) -> ModelSpec:
    """Add `spec` to the registry and return it; a name may be registered only once."""
    if spec.name in _REGISTRY:
        raise ValueError(f"model {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def register_runtime_model(spec: ModelSpec, fingerprint: str) -> ModelSpec:
    """Make an instance's spec resolvable by name in this process. The same name may be
    registered again only for the same architecture (fingerprint)."""
    if spec.name in _REGISTRY:
        raise ValueError(f"model name {spec.name!r} is taken by a built-in model")
    previous = _RUNTIME.get(spec.name)
    if previous is not None and previous[1] != fingerprint:
        raise ValueError(
            f"model name {spec.name!r} is already used by another architecture in this process"
        )
    _RUNTIME[spec.name] = (spec, fingerprint)
    return spec




def list_models() -> list[str]:
    """Names of all registered models, sorted."""
    return sorted(_REGISTRY)


def reference_models() -> list[str]:
    """Names of the reference paper's models (reference=True), sorted."""
    return sorted(name for name, spec in _REGISTRY.items() if spec.reference)


