"""Model weights as safetensors (never pickle), with metadata and a checksum."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from wattcap.schema import WattcapFileError


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def save_weights(model: torch.nn.Module, path: str | Path, metadata: dict[str, str]) -> Path:
    """Write a state dict (parameters and buffers) with string metadata."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    tmp = path.with_suffix(path.suffix + ".tmp")
    save_file(state, str(tmp), metadata={k: str(v) for k, v in metadata.items()})
    tmp.replace(path)
    return path


def read_metadata(path: str | Path) -> dict[str, str]:
    """The metadata of a safetensors file, refusing files that are not safetensors."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            return dict(handle.metadata() or {})
    except (SafetensorError, OSError, ValueError) as err:
        raise WattcapFileError(f"{path}: not a safetensors weights file ({err})") from None


def load_weights(
    model: torch.nn.Module, path: str | Path, expect_model: str | None = None
) -> dict[str, str]:
    """Load weights into `model` (strict), refusing another architecture; returns metadata."""
    metadata = read_metadata(path)
    if expect_model is not None and metadata.get("model") not in (None, expect_model):
        raise WattcapFileError(
            f"{path}: weights are for model {metadata.get('model')!r}, not {expect_model!r}"
        )
    try:
        state = load_file(str(path))
        model.load_state_dict(state, strict=True)
    except (SafetensorError, RuntimeError) as err:
        raise WattcapFileError(f"{path}: weights do not fit {expect_model or 'the model'}: "
                               f"{str(err).splitlines()[0]}") from None
    return metadata
