"""What a weights file that is not safetensors looks like, from its first bytes: for the
refusals of the command line (wattcap.models.weights) and the server's uploads alike. Bytes
only, no torch: a server answers its first request without waiting seconds for torch."""

from __future__ import annotations


def what_weights_file_is(head: bytes) -> str:
    """A guess at what a file that is not safetensors is, from its first bytes, for the error
    message; "" when there is no good guess."""
    if head[:4] == b"PK\x03\x04":
        return " (it is a zip archive: torch.save output? Convert it with safetensors' save_file)"
    if head[:1] == b"\x80" or head[:1] in (b"(", b"}", b"]", b"c"):
        return " (it looks like a pickle: wattcap never unpickles weights)"
    return ""
