"""A model by name: registered architectures, user models (``pkg.module:factory``,
``file.py:factory``) and instances registered in this process, and their fingerprints."""

from __future__ import annotations

from pathlib import Path

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


def model_source_sha256(name: str) -> str | None:
    """The sha256 of a user model's source file (a ``.py`` file, or the file of a module
    name); None for a registered model, whose source is wattcap's own. With the architecture
    fingerprint it identifies a user model wherever its folder is copied to: a changed
    ``forward`` keeps the fingerprint but not this."""
    import hashlib
    import importlib.util

    from wattcap.models.user import UserModelError, looks_like_user_model, parse_user_model

    if not looks_like_user_model(name):
        return None
    try:
        ref = parse_user_model(name)
    except UserModelError:
        return None
    if ref.is_file:
        path = Path(ref.source)
    else:
        try:
            found = importlib.util.find_spec(ref.source)
        except (ImportError, ValueError):
            return None
        if found is None or not found.origin or not Path(found.origin).is_file():
            return None
        path = Path(found.origin)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def model_identity(name: str) -> dict[str, str | None]:
    """What identifies a model in every record of a run (checkpoints, recorded sweep runs):
    its name without a user model's folder, its architecture fingerprint and its source's
    content hash (see `model_source_sha256`)."""
    from wattcap.core.profile import portable_model_name

    try:
        fingerprint: str | None = model_fingerprint(name)
    except (KeyError, ValueError):
        fingerprint = None
    return {"model": portable_model_name(name) or name, "architecture": fingerprint,
            "model_source_sha256": model_source_sha256(name)}
