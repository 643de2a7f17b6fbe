"""Architecture fingerprints: what identifies a model's structure across processes and files.

Profiles, efficiency vectors and run records name a model, but a name does not pin an
architecture down: a user's ``net.py:build`` may be edited between profiling and training.
The fingerprint hashes every parameter's and buffer's name and shape, in module order, so
two builds of the same code agree in any process and any change of a layer's shape, or an
added or removed layer, changes it. Values (weights) do not enter it.
"""

from __future__ import annotations

import hashlib

from torch import nn


def architecture_fingerprint(module: nn.Module) -> str:
    """16 hex digits of SHA-256 over the names and shapes of ``module``'s parameters and
    buffers (not their values)."""
    digest = hashlib.sha256()
    for kind, items in (("param", module.named_parameters()), ("buffer", module.named_buffers())):
        for name, tensor in items:
            digest.update(f"{kind} {name} {tuple(tensor.shape)}\n".encode())
    return digest.hexdigest()[:16]


# name -> (the spec object it was computed for, fingerprint): a user model whose file changed
# resolves to a new spec object, and so gets a new fingerprint.
_FINGERPRINTS: dict[str, tuple[object, str]] = {}


