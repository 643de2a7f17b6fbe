"""What one training step of a real torch model costs, measured by running it once on the CPU.

FLOPs come from torch's FlopCounterMode (corrected for grouped convolutions) over forward +
loss + backward; kernels, activation and parameter bytes from a dispatch-mode census of the
same step plus one optimizer step. The cost of a batch of b samples is then linear in b
(FLOPs, activations) plus per-step constants (kernels, weights, optimizer), which is what the
emulated device turns into time and power.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from functools import lru_cache

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# DEFAULT_BATCH_SIZES lives in a torch-free module; importing it from here still works.
from wattcap.core.batches import DEFAULT_BATCH_SIZES
from wattcap.devices.errors import DeviceOutOfMemoryError

# Ops that only reshape or alias memory launch no kernel on a GPU.
_NO_KERNEL_OPS = {
    "view", "_unsafe_view", "reshape", "expand", "t", "transpose", "permute", "squeeze",
    "unsqueeze", "alias", "as_strided", "detach", "slice", "select", "split", "unbind",
    "chunk", "split_with_sizes", "lift_fresh", "_to_copy", "empty", "empty_like", "zeros_like",
    "ones_like", "new_empty", "new_zeros", "new_ones", "empty_strided", "unfold", "numel",
    "sym_size", "sym_stride", "is_same_size", "_reshape_alias", "clone", "contiguous",
}

# Adam/AdamW keep two moment buffers per parameter.
_ADAM_STATE_PER_PARAM = 2
# Optimizer step traffic: read param, grad, m, v; write param, m, v.
_OPTIMIZER_TENSOR_PASSES = 7
# Activation traffic: written in forward, read in backward, gradient written and read.
_ACTIVATION_PASSES = 4
# Weights: read in forward, read in backward, gradient written.
_WEIGHT_PASSES = 3


@dataclass(frozen=True)
class StepCost:
    """Cost of one training step at one batch size (input to a device's time/power model)."""

    batch_size: int
    flops: float
    dram_bytes: float
    optimizer_bytes: float
    kernels: int
    flops_per_kernel_per_sample: float
    memory_needed_bytes: int


@dataclass(frozen=True)
class Workload:
    """Per-sample and per-step costs of training one model at one input shape."""

    model: str
    input_shape: tuple[int, ...]
    flops_per_sample: float
    kernels_per_step: int
    compute_kernels_per_step: int
    param_count: int
    param_bytes: int
    activation_bytes_per_sample: int

    @property
    def optimizer_state_bytes(self) -> int:
        """Adam moments."""
        return _ADAM_STATE_PER_PARAM * self.param_bytes

    def memory_needed_bytes(self, batch_size: int, allocator_overhead_factor: float = 1.0) -> int:
        """Device memory for a step: weights, gradients, optimizer state and activations."""
        fixed = self.param_bytes * 2 + self.optimizer_state_bytes
        activations = self.activation_bytes_per_sample * batch_size * allocator_overhead_factor
        return int(fixed + activations)

    def step_cost(self, batch_size: int, allocator_overhead_factor: float = 1.0) -> StepCost:
        """Cost of one step of `batch_size` samples."""
        if batch_size < 1:
            raise ValueError(f"batch size must be positive, got {batch_size}")
        return StepCost(
            batch_size=batch_size,
            flops=self.flops_per_sample * batch_size,
            dram_bytes=float(
                _WEIGHT_PASSES * self.param_bytes
                + _ACTIVATION_PASSES * self.activation_bytes_per_sample * batch_size
            ),
            optimizer_bytes=float(_OPTIMIZER_TENSOR_PASSES * self.param_bytes),
            kernels=self.kernels_per_step,
            flops_per_kernel_per_sample=self.flops_per_sample
            / max(1, self.compute_kernels_per_step),
            memory_needed_bytes=self.memory_needed_bytes(batch_size, allocator_overhead_factor),
        )

    def chunked_step_cost(self, batch_size: int, chunks: int,
                          allocator_overhead_factor: float = 1.0) -> StepCost:
        """Cost of one step of `batch_size` samples taken as `chunks` forward and backward
        passes of batch_size / chunks (a noise-scale measurement): the same work, each chunk's
        kernels launched and run at the chunk's size, the weights read once per chunk, the
        optimiser's update once, the memory of one chunk."""
        if chunks < 1 or batch_size % chunks:
            raise ValueError(f"{chunks} chunks do not divide a batch of {batch_size}")
        part = self.step_cost(batch_size // chunks, allocator_overhead_factor)
        return replace(
            part, flops=part.flops * chunks, dram_bytes=part.dram_bytes * chunks,
            kernels=part.kernels * chunks)

    def chunk_passes_cost(self, batch_size: int, chunks: int,
                          allocator_overhead_factor: float = 1.0) -> StepCost:
        """Cost of a batch's `chunks` parts' forward and backward passes without an update:
        what a noise-scale measurement beside a framework's own backward (the Lightning
        callback's) adds to that step (`StepTimer.extra_costs`)."""
        return replace(self.chunked_step_cost(batch_size, chunks, allocator_overhead_factor),
                       optimizer_bytes=0.0)

    def max_batch_size(
        self,
        memory_bytes: int,
        allocator_overhead_factor: float = 1.0,
        batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES,
    ) -> int | None:
        """Largest batch size in `batch_sizes` whose step fits in `memory_bytes` (None if none)."""
        fitting = [
            b for b in batch_sizes
            if self.memory_needed_bytes(b, allocator_overhead_factor) <= memory_bytes
        ]
        return max(fitting) if fitting else None

    def check_fits(
        self, batch_size: int, memory_bytes: int, allocator_overhead_factor: float, device: str
    ) -> None:
        """Raise DeviceOutOfMemoryError, as a real device would, when the batch does not fit."""
        needed = self.memory_needed_bytes(batch_size, allocator_overhead_factor)
        if needed > memory_bytes:
            raise DeviceOutOfMemoryError(
                f"{device}: out of memory: {self.model} at batch size {batch_size} needs "
                f"{needed / 2**20:.0f} MiB, {memory_bytes / 2**20:.0f} MiB usable",
                hint="use a smaller batch size",
            )

    def to_dict(self) -> dict:
        """Plain values, for files."""
        d = asdict(self)
        d["input_shape"] = list(self.input_shape)
        return d


class _KernelCensus(TorchDispatchMode):
    """Counts kernel-launching ops and the bytes their outputs occupy."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels = 0
        self.compute_kernels = 0
        self.output_bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name not in _NO_KERNEL_OPS:
            self.kernels += 1
            if any(k in name for k in ("conv", "mm", "matmul", "addmm", "bmm", "linear", "sdpa",
                                       "scaled_dot_product")):
                self.compute_kernels += 1
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    self.output_bytes += t.numel() * t.element_size()
        return out


def measure_workload(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor | None,
    loss_fn,  # noqa: ANN001 - (outputs, targets) -> scalar tensor
    name: str,
) -> Workload:
    """Measure the workload of training `model` on a batch shaped like `inputs`."""
    batch = inputs.shape[0]
    model = model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=1e-3, foreach=True)

    # torch's own counter ignores `groups` in the convolution backward (depthwise convs would
    # count C_in times too much); the models package ships a corrected counter.
    from wattcap.models.flops import flop_counter as corrected_flop_counter

    flop_counter = corrected_flop_counter()
    with flop_counter:
        loss_fn(model(inputs), targets).backward()
    optimizer.zero_grad(set_to_none=True)

    forward_census = _KernelCensus()
    with forward_census:
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
    step_census = _KernelCensus()
    with step_census:
        loss.backward()
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)

    param_count = sum(p.numel() for p in params)
    return Workload(
        model=name,
        input_shape=tuple(int(s) for s in inputs.shape[1:]),
        flops_per_sample=flop_counter.get_total_flops() / batch,
        kernels_per_step=forward_census.kernels + step_census.kernels,
        compute_kernels_per_step=forward_census.compute_kernels + step_census.compute_kernels,
        param_count=param_count,
        param_bytes=sum(p.numel() * p.element_size() for p in params),
        activation_bytes_per_sample=math.ceil(forward_census.output_bytes / batch),
    )


@lru_cache(maxsize=32)
def workload_for(model_name: str, batch_size: int = 2, seed: int = 0) -> Workload:
    """Workload of a registered model at its default input shape (cached per process)."""
    from wattcap.models import get_model_spec

    spec = get_model_spec(model_name)
    torch.manual_seed(seed)
    model = spec.build()
    generator = torch.Generator().manual_seed(seed)
    inputs, targets = spec.example_batch(batch_size, generator=generator)
    return measure_workload(model, inputs, targets, spec.loss, model_name)
