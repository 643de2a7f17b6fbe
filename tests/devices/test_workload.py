"""Workload: what one training step of a real model costs (DESIGN §2, §3)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from wattcap.devices import DeviceOutOfMemoryError, load_spec
from wattcap.devices.workload import DEFAULT_BATCH_SIZES, Workload, workload_for


def test_resnet18_flops_and_parameters(resnet18_workload) -> None:
    """DESIGN §3: about 3.33 GFLOP per sample forward+backward, 11.2 M parameters."""
    assert resnet18_workload.flops_per_sample == pytest.approx(3.33e9, rel=0.05)
    assert resnet18_workload.param_count == pytest.approx(11.2e6, rel=0.02)
    assert resnet18_workload.param_bytes == 4 * resnet18_workload.param_count  # fp32
    assert resnet18_workload.input_shape == (3, 32, 32)
    assert resnet18_workload.model == "resnet18"
    assert 0 < resnet18_workload.compute_kernels_per_step < resnet18_workload.kernels_per_step


def test_mobilenetv2_is_cheaper_per_sample_than_resnet18(
    resnet18_workload, mobilenetv2_workload, efficientvit_workload
) -> None:
    for light in (mobilenetv2_workload, efficientvit_workload):
        assert light.flops_per_sample < resnet18_workload.flops_per_sample / 3
        assert light.param_count < resnet18_workload.param_count / 3
        # depthwise/inverted-residual blocks keep more activations per FLOP
        assert light.activation_bytes_per_sample / light.flops_per_sample > (
            resnet18_workload.activation_bytes_per_sample / resnet18_workload.flops_per_sample
        )


def test_workload_is_independent_of_the_measuring_batch() -> None:
    """Per-sample costs do not depend on the batch the census ran with."""
    two = workload_for("digits32-cnn", batch_size=2)
    four = workload_for("digits32-cnn", batch_size=4)
    assert four.flops_per_sample == pytest.approx(two.flops_per_sample, rel=1e-6)
    assert four.param_count == two.param_count
    assert four.kernels_per_step == two.kernels_per_step
    assert four.activation_bytes_per_sample == pytest.approx(
        two.activation_bytes_per_sample, rel=0.01
    )


def test_step_cost_flops_are_linear_in_batch_size(resnet18_workload) -> None:
    costs = {b: resnet18_workload.step_cost(b) for b in DEFAULT_BATCH_SIZES}
    for b, cost in costs.items():
        assert cost.batch_size == b
        assert cost.flops == pytest.approx(b * resnet18_workload.flops_per_sample)
        # per-step constants do not depend on b
        assert cost.kernels == costs[4].kernels
        assert cost.optimizer_bytes == costs[4].optimizer_bytes
        assert cost.flops_per_kernel_per_sample == costs[4].flops_per_kernel_per_sample
    assert costs[128].flops == pytest.approx(2 * costs[64].flops)
    # DRAM traffic is affine: fixed weight traffic plus activations per sample
    slope = (costs[128].dram_bytes - costs[64].dram_bytes) / 64
    assert costs[8].dram_bytes - costs[4].dram_bytes == pytest.approx(4 * slope)
    assert costs[4].dram_bytes - 4 * slope > 0
    with pytest.raises(ValueError):
        resnet18_workload.step_cost(0)


def test_memory_needed_grows_with_batch_size(resnet18_workload, mobilenetv2_workload) -> None:
    for workload in (resnet18_workload, mobilenetv2_workload):
        needed = [workload.memory_needed_bytes(b) for b in DEFAULT_BATCH_SIZES]
        assert all(later > earlier for earlier, later in pairwise(needed))
        # weights, gradients and two Adam moments are needed even for one sample
        assert workload.memory_needed_bytes(1) > 4 * workload.param_bytes
        assert workload.memory_needed_bytes(32, 1.5) > workload.memory_needed_bytes(32, 1.0)
        assert workload.step_cost(32, 1.5).memory_needed_bytes == (
            workload.memory_needed_bytes(32, 1.5)
        )


def test_max_batch_size_is_the_largest_that_fits(resnet18_workload) -> None:
    w = resnet18_workload
    overhead = 1.5
    for b in DEFAULT_BATCH_SIZES:
        exact = w.memory_needed_bytes(b, overhead)
        assert w.max_batch_size(exact, overhead) == b
        smaller = [s for s in DEFAULT_BATCH_SIZES if s < b]
        assert w.max_batch_size(exact - 1, overhead) == (max(smaller) if smaller else None)
    assert w.max_batch_size(10**15, overhead) == max(DEFAULT_BATCH_SIZES)
    assert w.max_batch_size(0, overhead) is None
    assert w.max_batch_size(10**15, overhead, batch_sizes=(4, 8, 12)) == 12
    # more memory never lowers the answer
    answers = [w.max_batch_size(m, overhead) or 0 for m in range(0, 3 * 2**30, 2**26)]
    assert answers == sorted(answers)


def test_check_fits_raises_out_of_memory_naming_the_batch_size(mobilenetv2_workload) -> None:
    spec = load_spec("jetson-nano")
    memory, overhead = spec.memory_usable_bytes, spec.allocator_overhead_factor
    mobilenetv2_workload.check_fits(64, memory, overhead, device="jetson-nano")
    with pytest.raises(DeviceOutOfMemoryError) as info:
        mobilenetv2_workload.check_fits(128, memory, overhead, device="jetson-nano")
    message = str(info.value)
    assert "batch size 128" in message
    assert "mobilenetv2" in message and "jetson-nano" in message
    assert info.value.hint


def test_to_dict_round_trips(resnet18_workload) -> None:
    data = resnet18_workload.to_dict()
    assert data["input_shape"] == [3, 32, 32]
    again = Workload(**{**data, "input_shape": tuple(data["input_shape"])})
    assert again == resnet18_workload
