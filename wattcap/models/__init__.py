"""Neural network models, written in plain torch (torchvision and timm do not import here).

Every model is registered under a name with a `ModelSpec` that says how to build it, what its
input looks like and how to score it:

    >>> from wattcap.models import get_model_spec
    >>> spec = get_model_spec("resnet18")
    >>> model = spec.build(num_classes=10)
    >>> x, y = spec.example_batch(8)
    >>> loss = spec.loss(model(x), y)

Users' own models resolve through the same call: ``get_model_spec("path/net.py:build")``
(see :mod:`wattcap.models.user`).
"""

from __future__ import annotations

# importing the model modules registers them
from wattcap.models import char_transformer, efficientvit, mobilenetv2, resnet, small_cnn
from wattcap.models.fingerprint import architecture_fingerprint
from wattcap.models.flops import flop_counter, train_flops_per_sample
from wattcap.models.lookup import (
    build_model,
    get_model_spec,
    model_fingerprint,
    model_identity,
    model_source_sha256,
)
from wattcap.models.registry import (
    ModelSpec,
    list_models,
    reference_models,
    register_model,
)
from wattcap.models.user import (
    UserModelError,
    spec_for_module,
    user_model_spec,
    user_model_text,
)

__all__ = [
    "ModelSpec",
    "UserModelError",
    "architecture_fingerprint",
    "build_model",
    "char_transformer",
    "efficientvit",
    "flop_counter",
    "get_model_spec",
    "list_models",
    "mobilenetv2",
    "model_fingerprint",
    "model_identity",
    "model_source_sha256",
    "reference_models",
    "register_model",
    "resnet",
    "small_cnn",
    "spec_for_module",
    "train_flops_per_sample",
    "user_model_spec",
    "user_model_text",
]
