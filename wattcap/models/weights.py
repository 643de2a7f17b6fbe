"""Model weights as safetensors (never pickle), with metadata and a checksum."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from wattcap.core.files import atomic_path
from wattcap.core.schema import WattcapFileError
from wattcap.core.weights_format import what_weights_file_is


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


#: the longest safetensors header read (the format's own limit is 100 MB)
_MAX_HEADER_BYTES = 100_000_000


def weights_content_sha256(path: str | Path) -> str:
    """Hex SHA-256 of the tensors a safetensors file holds — each tensor's name, dtype, shape
    and bytes, in name order — not of the file: two files of the same tensors are the same
    weights even where their headers list the tensors in another order or carry other
    metadata (a pre-training's accuracy, the order a dict was written in). Reads the header
    itself, without torch; a file that is not safetensors is a `WattcapFileError`."""
    import json

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        head = handle.read(8)
        size = int.from_bytes(head, "little") if len(head) == 8 else -1
        try:
            if not 0 < size <= _MAX_HEADER_BYTES:
                raise ValueError("no safetensors header")
            header = json.loads(handle.read(size))
            tensors = sorted((name, info) for name, info in header.items()
                             if name != "__metadata__")
            for name, info in tensors:
                start, end = (int(v) for v in info["data_offsets"])
                # length-prefixed fields: no two different tensor lists hash alike
                described = json.dumps([name, info["dtype"], info["shape"], end - start])
                digest.update(len(described).to_bytes(8, "little") + described.encode())
                handle.seek(8 + size + start)
                left = end - start
                while left > 0:
                    chunk = handle.read(min(left, 1 << 20))
                    if not chunk:
                        raise ValueError(f"tensor {name} is cut short")
                    digest.update(chunk)
                    left -= len(chunk)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise WattcapFileError(f"{path}: not a safetensors weights file"
                                   + (what_weights_file_is(head) or f" ({err})")) from None
    return digest.hexdigest()


def save_weights(model: torch.nn.Module, path: str | Path, metadata: dict[str, str]) -> Path:
    """Write a state dict (parameters and buffers) with string metadata."""
    path = Path(path)
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata={k: str(v) for k, v in metadata.items()})
    return path


def read_metadata(path: str | Path) -> dict[str, str]:
    """The metadata of a safetensors file, refusing files that are not safetensors."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            return dict(handle.metadata() or {})
    except (SafetensorError, OSError, ValueError) as err:
        try:
            with open(path, "rb") as handle:
                guess = what_weights_file_is(handle.read(8))
        except OSError:
            guess = ""
        raise WattcapFileError(f"{path}: not a safetensors weights file"
                               + (guess or f" ({err})")) from None


def load_weights(
    model: torch.nn.Module, path: str | Path, expect_model: str | None = None,
    new_head_classes: int | None = None,
) -> dict[str, str]:
    """Load weights into `model` (strict), refusing another architecture; returns metadata.

    Fine-tuning on another number of classes (pre-trained on CIFAR-100, fine-tuned on
    CIFAR-10): with `new_head_classes` = the model's head size, tensors whose first dimension
    is that size in the model and another one in the file (the classifier head, all other
    dimensions equal) keep their fresh initialisation; their names are returned under the
    metadata key ``"new_head"`` (comma-separated). Any other difference is refused.
    """
    metadata = read_metadata(path)
    if expect_model is not None and metadata.get("model") not in (None, expect_model):
        raise WattcapFileError(
            f"{path}: weights are for model {metadata.get('model')!r}, not {expect_model!r}"
        )
    try:
        state = load_file(str(path))
        kept: list[str] = []
        if new_head_classes is not None:
            own = model.state_dict()
            for name, tensor in list(state.items()):
                mine = own.get(name)
                if (mine is not None and mine.shape != tensor.shape and mine.dim() >= 1
                        and mine.shape[0] == new_head_classes
                        and mine.shape[1:] == tensor.shape[1:]):
                    state[name] = mine  # a new head: keep the fresh initialisation
                    kept.append(name)
        model.load_state_dict(state, strict=True)
    except (SafetensorError, RuntimeError) as err:
        raise WattcapFileError(f"{path}: weights do not fit {expect_model or 'the model'}: "
                               f"{str(err).splitlines()[0]}") from None
    if kept:
        metadata = dict(metadata, new_head=",".join(kept))
    return metadata
