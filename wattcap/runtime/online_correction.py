"""The online correction of a run (`PlanSettings(online_correction=True)`, `wattcap train
--online-correction`): the target's noise scale measured all run long, window by window, against
the proxy's reference in the efficiency vector, and a re-plan when the two part
(wattcap.algorithms.noise_correction says when and how r_b moves).

Which steps are measured: about `measured_steps_per_window` of each doubling window of samples,
in bursts at the start of each of its 8 blocks (every step of a window that holds no more; none
of a window too short for an interval, whose measurement could never count), so the
measurement follows the run as the noise scale grows and its cost falls as the run grows: 32
chunked steps per doubling of samples. A measured step runs its batch as `chunks` forward and
backward passes of b/chunks (`GradientNoiseScale`): on real hardware the Session measures that
time as it is; on the emulated device it is charged as such (`Workload.chunked_step_cost`:
the chunks' kernel launches and smaller kernels), so the correction's cost is in the run's time
either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wattcap.algorithms.noise_correction import (
    RELEVANT_FACTOR,
    CorrectionPolicy,
    PooledEvidence,
    TransferEvidence,
    transfer_evidence,
)
from wattcap.algorithms.noise_windows import (
    FIRST_WINDOW_END_SAMPLES,
    MIN_WINDOW_STEPS,
    WINDOW_BLOCKS,
    NoiseScaleWindows,
    window_end,
)
from wattcap.data.loader import first_tensor
from wattcap.runtime.noise_scale import check_chunks

if TYPE_CHECKING:
    import torch

    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.noise_scale import NoiseScaleTrajectory
    from wattcap.runtime.noise_scale import GradientNoiseScale, LossOf

#: parts a measured batch is split into (fewer where b / chunks would be under 2 samples); the
#: proxy's reference is measured in as many (`with_noise_reference`): with BatchNorm the part's
#: size changes the gradient measured. 2 parts cost less on a launch-bound step but their
#: per-step estimate is much noisier: a 2-part reference left windows unresolved on the
#: label-noise task where a 4-part one did not (results page)
DEFAULT_CORRECTION_CHUNKS = 4
#: steps due for a measurement that the loop ran without `session.backward` (or
#: `measure_beside`) before the correction says it cannot measure and turns off
UNMEASURED_STEPS_TO_STOP = 3
#: measured steps a doubling window aims at (8 blocks of 4 for its interval)
DEFAULT_MEASURED_STEPS_PER_WINDOW = 32


@dataclass(frozen=True)
class CorrectionSettings:
    """How a Session corrects the proxy's r_b from the target's noise scale (see the
    module)."""

    chunks: int = DEFAULT_CORRECTION_CHUNKS
    measured_steps_per_window: int = DEFAULT_MEASURED_STEPS_PER_WINDOW
    relevant_factor: float = RELEVANT_FACTOR

    def __post_init__(self) -> None:
        check_chunks(self.chunks)
        if self.measured_steps_per_window < MIN_WINDOW_STEPS:
            raise ValueError(f"a window needs at least {MIN_WINDOW_STEPS} measured steps for "
                             f"an interval, got {self.measured_steps_per_window}")
        if not self.relevant_factor > 1:
            raise ValueError(f"the relevant factor is a ratio > 1, got {self.relevant_factor}")

    @classmethod
    def of(cls, value: Any) -> CorrectionSettings | None:
        """`value` as settings: CorrectionSettings as they are, True the defaults, else None."""
        if isinstance(value, CorrectionSettings):
            return value
        return cls() if value is True else None


def chunks_for(batch_size: int, chunks: int) -> int | None:
    """The chunks a batch of `batch_size` is measured in: `chunks`, fewer where they would
    not divide it into parts of 2 samples or more; None where not even 2 do."""
    for n in range(chunks, 1, -1):
        if batch_size % n == 0 and batch_size // n >= 2:
            return n
    return None


class OnlineCorrection:
    """The measurement, the evidence and the pending re-plan of one run."""

    def __init__(self, settings: CorrectionSettings, proxy: EfficiencyVector) -> None:
        if not proxy.noise_reference:
            raise ValueError(
                f"the efficiency vector of {proxy.dataset} has no reference of the proxy's "
                "noise scale to compare the target's with: make it with `wattcap estimate "
                "--noise-reference` (or --method gns)")
        self.settings = settings
        self.proxy = proxy
        self.windows = NoiseScaleWindows()
        self.policy = CorrectionPolicy(relevant=settings.relevant_factor)
        self.gns: GradientNoiseScale | None = None
        #: pooled evidence that moved the factor, waiting for the re-plan between steps
        self.pending: PooledEvidence | None = None
        self.measured_steps = 0
        self._measuring = False
        self._term: tuple[float, float] | None = None
        self._backward_called = False
        self._misses = 0
        #: the loop trains without `session.backward`: nothing can be measured (said once)
        self.unmeasurable = False
        #: measured steps whose norms were not finite or zero (not counted)
        self.skipped_steps = 0

    def attach(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Measure with the run's model and optimiser (Adam's preconditioner)."""
        from wattcap.runtime.noise_scale import GradientNoiseScale

        self.gns = GradientNoiseScale(model, optimizer, chunk_size=1)

    def will_measure(self, samples: int, batch_size: int) -> bool:
        """Whether the step about to run (after `samples`, of `batch_size`) is measured;
        decided once per step, before it (its cost depends on it): nothing in a window too
        short for an interval; every step of a window of up to `measured_steps_per_window`
        steps; else, in each of the window's blocks, a burst of consecutive steps at its start
        (the drift monitor restarts once per burst, not once per step)."""
        self._measuring = False
        self._backward_called = False
        if self.unmeasurable or chunks_for(batch_size, self.settings.chunks) is None:
            return False
        end = window_end(samples + batch_size)
        start = 0 if end == FIRST_WINDOW_END_SAMPLES else end // 2
        window_steps = (end - start) // batch_size
        wanted = self.settings.measured_steps_per_window
        # the first window holds the optimiser's first step, which Adam cannot measure
        if window_steps < MIN_WINDOW_STEPS + (1 if start == 0 else 0):
            return False
        if window_steps <= wanted:
            self._measuring = True
            return True
        block_steps = window_steps // WINDOW_BLOCKS
        burst = max(1, wanted // WINDOW_BLOCKS)
        self._measuring = ((samples - start) // batch_size) % block_steps < burst
        return self._measuring

    @property
    def measuring(self) -> bool:
        """The current step is a measured (chunked) one."""
        return self._measuring

    def backward(self, loss_of: LossOf, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """The step's backward: chunked and measured on a measured step, else plain."""
        self._backward_called = True
        if not self._measuring or self.gns is None:
            loss_of(inputs, targets).backward()
            return
        chunks = chunks_for(len(inputs), self.settings.chunks)
        if chunks is None:
            loss_of(inputs, targets).backward()
            return
        self.gns.chunk_size = len(inputs) // chunks
        try:
            measured = self.gns.backward(loss_of, inputs, targets)
        except ValueError:  # norms not finite or zero (a scaled loss's overflow): not counted
            self.skipped_steps += 1
            return
        if measured:
            self._take_term()

    def measure_beside(self, loss_of_batch: Callable[[Any], torch.Tensor], batch: Any
                       ) -> tuple[int, int] | None:
        """A measured step whose backward a framework runs itself: the noise scale of `batch`
        in parts (`loss_of_batch(part)`: the part's mean loss), `.grad` left alone. Returns
        (the batch's samples, parts) where the parts' passes ran (their cost is the step's on
        top of its own backward), None where nothing ran."""
        self._backward_called = True
        if not self._measuring or self.gns is None:
            return None
        size = batch_length(batch)
        chunks = None if size is None else chunks_for(size, self.settings.chunks)
        if chunks is None or size is None:
            return None
        parts = split_batch(batch, chunks)
        try:
            measured = self.gns.measure_parts(lambda i: loss_of_batch(parts[i]), chunks,
                                              size // chunks)
        except ValueError:  # norms not finite or zero: this step is not counted
            self.skipped_steps += 1
            return size, chunks
        if measured:
            self._take_term()
        return size, chunks

    def _take_term(self) -> None:
        """The measured step's terms, taken from the tracker (its history is not kept)."""
        assert self.gns is not None
        self._term = self.gns.tracker.terms.pop()
        self.gns.tracker.sizes.pop()

    def after_step(self, samples: int, batch_size: int) -> list[TransferEvidence | str]:
        """Account the step that brought the run to `samples`: the evidence of each window it
        closed (or why there is none; a step across a boundary may close one as it is
        recorded). Pooled evidence beyond the applied factor becomes `pending`."""
        if self._measuring and not self._backward_called:
            self._measuring = False
            self._misses += 1  # one skipped batch is not a loop of its own backward
            if self._misses < UNMEASURED_STEPS_TO_STOP:
                return []
            self.unmeasurable = True  # a loop of its own backward (a framework's): stop here
            return ["the loop calls neither session.backward nor session.measure_beside (the "
                    "Lightning callback's noise_scale_loss, the Hugging Face callback's "
                    "follow_batch_size), so nothing can be measured: the "
                    "correction is off for this run (the proxy's r_b stays)"]
        before = len(self.windows.windows)
        if self._term is not None:
            self.measured_steps += 1
            self.windows.observe(samples, *self._term)
            self._term = None
        self._measuring = False
        self.windows.advance(samples)
        found: list[TransferEvidence | str] = []
        for closed in self.windows.windows[before:]:
            evidence = transfer_evidence(closed, self.references, batch_size)
            if isinstance(evidence, TransferEvidence):
                pooled = self.policy.consider(evidence)
                self.pending = pooled or self.pending
            found.append(evidence)
        return found

    @property
    def references(self) -> list[NoiseScaleTrajectory]:
        """The proxy's references measured as this run measures: the same preconditioning and
        as many parts per batch (with BatchNorm the part's size changes the gradient)."""
        mode = self.gns.preconditioner if self.gns is not None else "adam"
        return [t for t in self.proxy.noise_reference if t.preconditioner == mode
                and t.batch_size // max(t.chunk_size, 1) == self.settings.chunks]


def batch_length(batch: Any) -> int | None:
    """The samples in a framework's batch: the first dimension of its inputs
    (`first_tensor`), None when it holds no tensor."""
    inputs = first_tensor(batch)
    return int(inputs.shape[0]) if inputs is not None and inputs.dim() else None


def split_batch(batch: Any, parts: int) -> list[Any]:
    """`batch` cut into `parts` equal parts along the first dimension of every tensor in it
    (tuples, lists and dicts kept as they are; anything else repeated in each part)."""
    import torch

    if isinstance(batch, torch.Tensor) and batch.dim():
        return list(batch.chunk(parts))
    if isinstance(batch, dict):
        split = {k: split_batch(v, parts) for k, v in batch.items()}
        return [{k: v[i] for k, v in split.items()} for i in range(parts)]
    if isinstance(batch, tuple | list):
        split_items = [split_batch(v, parts) for v in batch]
        return [type(batch)(v[i] for v in split_items) for i in range(parts)]
    return [batch] * parts
