"""A model by name: registered architectures, user models (``pkg.module:factory``,
``file.py:factory``) and instances registered in this process, and their fingerprints."""

from __future__ import annotations

import torch
from torch import nn

from wattcap.models.fingerprint import _FINGERPRINTS, architecture_fingerprint
from wattcap.models.registry import _REGISTRY, _RUNTIME, ModelSpec, list_models


def get_model_spec(name: str, allow_user_code: bool = True) -> ModelSpec:
    """The spec of a registered model, of a user's model (``package.module:factory`` or
    ``path/to/file.py:factory``, see wattcap.models.user), or of an instance registered in
    this process. KeyError listing the known names for an unknown name; a user model that
    cannot be loaded raises UserModelError (a ValueError) saying why.

    Resolving a user model imports and runs its code: with ``allow_user_code=False`` (for
    names from untrusted input, such as a server's uploads) only built-in and registered
    models resolve, and anything else is a KeyError.
    """
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in _RUNTIME:
        return _RUNTIME[name][0]
    from wattcap.models.user import looks_like_user_model, user_model_spec

    known = ", ".join(list_models())
    if looks_like_user_model(name):
        if allow_user_code:
            return user_model_spec(name)
        raise KeyError(f"model {name!r} is a user's code; only built-in models are accepted "
                       f"here: {known}")
    raise KeyError(
        f"unknown model {name!r}; known models: {known}; or your own as "
        "package.module:factory or path/to/file.py:factory"
    )

def build_model(name: str, num_classes: int | None = None) -> nn.Module:
    """Build a fresh model by registry name."""
    return get_model_spec(name).build(num_classes)


def model_fingerprint(name: str) -> str:
    """Fingerprint of a model spec as built with its default number of classes (or vocabulary):
    the architecture a profile measures, whatever head a later run gives it. Cached per
    process; torch's random state is left as it was."""

    spec = get_model_spec(name)
    cached = _FINGERPRINTS.get(name)
    if cached is None or cached[0] is not spec:
        with torch.random.fork_rng(devices=[]):
            cached = (spec, architecture_fingerprint(spec.build()))
        _FINGERPRINTS[name] = cached
    return cached[1]
