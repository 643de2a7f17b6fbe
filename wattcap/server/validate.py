"""Checks every upload passes before anything is stored.

Weights are accepted only as safetensors whose tensors are exactly the state dict of the
declared architecture (built from the registry and compared key by key, shape by shape).
Nothing is ever unpickled: a pickle or a `torch.save` archive posing as weights fails the
header check and is named as what it is. JSON payloads go through the same `from_json` that
reads the files on disk, so the server accepts exactly what the tools would.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.errors import WattcapError
from wattcap.core.profile import ProfileTable
from wattcap.core.schema import WattcapFileError
from wattcap.core.weights_format import what_weights_file_is

# A safetensors header lists tensor names, dtypes, shapes and offsets; even the char
# transformer's is a few KiB. Anything near this is not a header we want to parse.
_MAX_HEADER_BYTES = 16 * 2**20
_SAFETENSORS_DTYPES = {
    "BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64",
    "F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2",
}


class PayloadError(WattcapError, ValueError):
    """An upload that is not what it claims to be (answered with a 4xx, nothing stored)."""


class ChecksumError(PayloadError):
    """The upload's bytes are not the ones the client declared (answered with a 400)."""


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def verify_checksum(data: bytes, declared: str | None, required: bool) -> str:
    """The payload's SHA-256, refusing a payload whose declared checksum differs (a transfer
    that went wrong, or the wrong file)."""
    actual = sha256_hex(data)
    if declared is None:
        if required:
            raise ChecksumError("weights uploads must declare their SHA-256 in the "
                               "X-Wattcap-SHA256 header")
        return actual
    if declared.strip().lower() != actual:
        raise ChecksumError(f"checksum mismatch: the upload's SHA-256 is {actual}, the request "
                           f"declared {declared.strip()}")
    return actual


def parse_safetensors_header(data: bytes) -> dict:
    """The JSON header of a safetensors blob, checked for structure (sizes, dtypes, offsets
    that tile the data section) without touching the tensor data."""
    if len(data) < 8:
        raise PayloadError("not a safetensors file: shorter than its 8-byte header length"
                           + what_weights_file_is(data))
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > min(len(data) - 8, _MAX_HEADER_BYTES):
        raise PayloadError(
            f"not a safetensors file: its first 8 bytes declare a {header_len}-byte header, "
            f"but the upload has {len(data)} bytes" + what_weights_file_is(data)
        )
    try:
        header = json.loads(data[8:8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise PayloadError("not a safetensors file: the header is not JSON"
                           + what_weights_file_is(data)) from None
    if not isinstance(header, dict):
        raise PayloadError("not a safetensors file: the header is not a JSON object")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise PayloadError("safetensors __metadata__ must map strings to strings")
    data_len = len(data) - 8 - header_len
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise PayloadError(f"safetensors entry {name!r} is malformed")
        offsets, shape = entry["data_offsets"], entry["shape"]
        if entry["dtype"] not in _SAFETENSORS_DTYPES:
            raise PayloadError(f"tensor {name!r} has unknown dtype {entry['dtype']!r}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise PayloadError(f"tensor {name!r} has an invalid shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(o, int) for o in offsets)
                and 0 <= offsets[0] <= offsets[1] <= data_len):
            raise PayloadError(f"tensor {name!r} has data offsets outside the file")
        spans.append((offsets[0], offsets[1]))
    # Tensors must tile the data section exactly: no gaps where other bytes could hide.
    position = 0
    for start, end in sorted(spans):
        if start != position:
            raise PayloadError("safetensors data section has gaps or overlapping tensors")
        position = end
    if position != data_len:
        raise PayloadError("safetensors data section is longer than its tensors")
    return header


@dataclass(frozen=True)
class CheckedWeights:
    """What the weights check learnt about an upload."""

    architecture: str
    input_shape: list[int]
    task: str
    num_classes: int
    metadata: dict[str, str]


def check_weights(data: bytes, architecture: str, num_classes: int | None = None) -> CheckedWeights:
    """Refuse weights that are not safetensors or do not fit `architecture` exactly.

    `num_classes` (the head size; the vocabulary for the char model) comes from the argument,
    else the file's `num_classes` metadata, else the architecture's default.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load as load_safetensors

    from wattcap.models import get_model_spec

    try:
        # never user code: resolving `pkg.module:factory` or `file.py:factory` would run it
        spec = get_model_spec(architecture, allow_user_code=False)
    except KeyError as err:
        raise PayloadError(str(err).strip("'\"")) from None
    header = parse_safetensors_header(data)
    metadata: dict[str, str] = header.get("__metadata__", {})
    declared = metadata.get("model")
    if declared is not None and declared != architecture:
        raise PayloadError(f"the weights' metadata says model {declared!r}, but they were "
                           f"uploaded as {architecture!r}")
    if "input_shape" in metadata:
        try:
            shape = [int(d) for d in json.loads(metadata["input_shape"])]
        except (ValueError, TypeError):
            raise PayloadError("the weights' input_shape metadata is not a JSON list") from None
        if shape != list(spec.input_shape):
            raise PayloadError(f"the weights are for input shape {shape}, {architecture} takes "
                               f"{list(spec.input_shape)}")
    if num_classes is None:
        try:
            num_classes = int(metadata.get("num_classes", spec.default_num_classes))
        except ValueError:
            raise PayloadError("the weights' num_classes metadata is not an integer") from None
    try:
        model = spec.build(num_classes=num_classes)
    except ValueError as err:
        raise PayloadError(str(err)) from None
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    mismatch = _tensor_mismatch(expected, header)
    if mismatch:
        raise PayloadError(f"the weights do not match {architecture} with {num_classes} "
                           f"classes: {mismatch}")
    # The header is sound; now the real loader (safetensors, no pickle) and a strict load,
    # which also catches dtypes torch cannot copy into the model.
    try:
        model.load_state_dict(load_safetensors(data), strict=True)
    except (SafetensorError, RuntimeError, ValueError) as err:
        raise PayloadError(f"the weights do not load into {architecture}: "
                           f"{str(err).splitlines()[0]}") from None
    return CheckedWeights(
        architecture=architecture, input_shape=list(spec.input_shape), task=spec.task,
        num_classes=num_classes, metadata=dict(metadata),
    )


def _tensor_mismatch(expected: dict[str, tuple], header: dict) -> str:
    """How a safetensors header's tensors differ from a model's state dict ('' if they do
    not): missing, unexpected, or of the wrong shape, with an example of each."""
    found = {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    wrong = sorted(k for k in set(expected) & set(found) if expected[k] != found[k])
    parts = []
    if missing:
        parts.append(f"missing {len(missing)} tensors (e.g. {missing[0]})")
    if unexpected:
        parts.append(f"{len(unexpected)} unexpected tensors (e.g. {unexpected[0]})")
    if wrong:
        k = wrong[0]
        parts.append(f"{len(wrong)} tensors of the wrong shape (e.g. {k}: {list(found[k])}, "
                     f"expected {list(expected[k])})")
    return "; ".join(parts)


def check_profile(text: str) -> ProfileTable:
    """A profile upload, validated like a profile file (kind, schema version, fields)."""
    try:
        return ProfileTable.from_json(text, source="uploaded profile")
    except WattcapFileError as err:
        raise PayloadError(str(err)) from None


def check_efficiency(text: str) -> EfficiencyVector:
    """An efficiency-vector upload, validated like the file; when its model is registered, its
    input shape must be that model's."""
    from wattcap.models import get_model_spec

    try:
        vector = EfficiencyVector.from_json(text, source="uploaded efficiency vector")
    except WattcapFileError as err:
        raise PayloadError(str(err)) from None
    try:
        spec = get_model_spec(vector.model, allow_user_code=False)
    except KeyError:
        return vector  # a model this server does not know: the vector is still well-formed
    if vector.input_shape != list(spec.input_shape):
        raise PayloadError(f"uploaded efficiency vector: input shape {vector.input_shape} is not "
                           f"{vector.model}'s {list(spec.input_shape)}")
    return vector
