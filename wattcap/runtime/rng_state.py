"""The random number generators a training step draws from (torch's CPU and CUDA generators
for dropout and augmentation, numpy's and Python's global ones), captured into a checkpoint and
put back on resume, so that a killed-and-resumed run goes on with the same draws as one that
never stopped. The data order needs none: it is a seeded stream keyed by position."""

from __future__ import annotations

import base64
import random
from typing import Any


def capture_rng() -> dict[str, Any]:
    """Every generator's state, as JSON."""
    import numpy as np
    import torch

    kind, keys, position, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch_cpu": _b64(torch.get_rng_state()),
        "numpy": {"kind": kind, "keys": [int(k) for k in keys], "position": int(position),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = [_b64(s) for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Put the generators back as `capture_rng` found them."""
    import numpy as np
    import torch

    torch.set_rng_state(_tensor(state["torch_cpu"]))
    numpy = state["numpy"]
    np.random.set_state((numpy["kind"], np.array(numpy["keys"], dtype=np.uint32),
                         numpy["position"], numpy["has_gauss"], numpy["cached_gaussian"]))
    python = state["python"]
    random.setstate((python["version"], tuple(python["internal"]), python["gauss_next"]))
    cuda = state.get("torch_cuda")
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([_tensor(s) for s in cuda])


def _b64(tensor: Any) -> str:
    return base64.b64encode(tensor.numpy().tobytes()).decode("ascii")


def _tensor(text: str) -> Any:
    import torch

    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)
