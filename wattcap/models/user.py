"""Users' own models: ``package.module:factory``, ``path/to/file.py:factory``, or an
``nn.Module`` instance, each turned into an ordinary :class:`ModelSpec`.

A factory is any callable returning an ``nn.Module`` (a function or the class itself). It
gets ``num_classes=`` (for a char model also ``vocab_size=``) when its signature accepts it;
otherwise it builds its own head, and the number of classes is read from the model's output.
What cannot be inferred is given with the spec: the input shape (unless the model or the
factory has an ``input_shape`` attribute), the number of classes, the task (image
classification unless the model or factory says ``task = "char-lm"``).

The spec text carries all of it, so any process resolves it again — the profiler on the
device, the estimator on a server, a resumed run::

    /home/me/net.py:build[input_shape=3x32x32,num_classes=10]
    mypkg.models:TinyNet
    /home/me/charlm.py:make[input_shape=64,num_classes=96,task=char-lm]

:func:`user_model_text` writes that canonical text (absolute file path, options in a fixed
order); ``get_model_spec`` accepts it wherever a model name is accepted.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from wattcap.core.errors import WattcapError
from wattcap.models.fingerprint import architecture_fingerprint
from wattcap.models.registry import TASKS, ModelSpec


class UserModelError(WattcapError, ValueError):
    """A user's model cannot be resolved, built or run; the message says what to fix."""


@dataclass(frozen=True)
class UserModelRef:
    """A parsed user model spec."""

    source: str  # absolute path of a .py file, or a module name
    factory: str  # attribute (dotted for nested) of the module
    is_file: bool
    input_shape: tuple[int, ...] | None = None
    num_classes: int | None = None
    task: str | None = None

    @property
    def text(self) -> str:
        """The canonical spec text."""
        options = []
        if self.input_shape is not None:
            options.append("input_shape=" + "x".join(str(d) for d in self.input_shape))
        if self.num_classes is not None:
            options.append(f"num_classes={self.num_classes}")
        if self.task is not None:
            options.append(f"task={self.task}")
        suffix = f"[{','.join(options)}]" if options else ""
        return f"{self.source}:{self.factory}{suffix}"


def looks_like_user_model(text: str) -> bool:
    """Whether ``text`` has the shape of a user model spec (``something:factory``)."""
    head, sep, factory = text.split("[", 1)[0].rpartition(":")
    return bool(sep and head and factory)


def _parse_shape(text: str, spec: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(p) for p in text.lower().replace(",", "x").split("x"))
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise UserModelError(f"model {spec!r}: input shape {text!r} is not positive integers "
                             "like 3x32x32 (images) or 64 (a text context)")
    return shape


def parse_user_model(text: str) -> UserModelRef:
    """Parse ``SOURCE:FACTORY[options]`` (SOURCE: a .py file or a module name)."""
    body, options = text.strip(), {}
    if body.endswith("]") and "[" in body:
        body, _, raw = body[:-1].partition("[")
        for item in filter(None, (p.strip() for p in raw.split(","))):
            key, eq, value = item.partition("=")
            if not eq or key not in ("input_shape", "num_classes", "task"):
                raise UserModelError(f"model {text!r}: unknown option {item!r} (known: "
                                     "input_shape, num_classes, task)")
            options[key] = value.strip()
    source, sep, factory = body.rpartition(":")
    if not sep or not source or not factory:
        raise UserModelError(
            f"model {text!r}: expected package.module:factory or path/to/file.py:factory"
        )
    is_file = source.endswith(".py") or "/" in source or os.sep in source
    if is_file:
        source = str(Path(source).expanduser().resolve())
    elif not all(part.isidentifier() for part in source.split(".")):
        raise UserModelError(f"model {text!r}: {source!r} is neither a .py file nor a module name")
    if not all(part.isidentifier() for part in factory.split(".")):
        raise UserModelError(f"model {text!r}: {factory!r} is not a Python name")
    input_shape = _parse_shape(options["input_shape"], text) if "input_shape" in options else None
    num_classes = None
    if "num_classes" in options:
        try:
            num_classes = int(options["num_classes"])
        except ValueError:
            num_classes = 0
        if num_classes < 2:
            raise UserModelError(f"model {text!r}: num_classes must be an integer >= 2")
    task = options.get("task")
    if task is not None and task not in TASKS:
        raise UserModelError(f"model {text!r}: task must be one of {', '.join(TASKS)}")
    return UserModelRef(source, factory, is_file, input_shape, num_classes, task)


def user_model_text(
    target: str,
    *,
    input_shape: Sequence[int] | str | None = None,
    num_classes: int | None = None,
    task: str | None = None,
) -> str:
    """The canonical spec text for ``target`` (``file.py:factory`` or ``module:factory``) with
    these options (they replace the ones ``target`` may carry): what the CLI's
    ``--model``, ``--input-shape`` and ``--num-classes`` become, and what files record."""
    ref = parse_user_model(target)
    shape = ref.input_shape
    if input_shape is not None:
        shape = _parse_shape(input_shape if isinstance(input_shape, str)
                             else "x".join(str(int(d)) for d in input_shape), target)
    ref = UserModelRef(
        ref.source, ref.factory, ref.is_file, shape,
        ref.num_classes if num_classes is None else int(num_classes),
        ref.task if task is None else task,
    )
    return parse_user_model(ref.text).text  # validates the options


# -- loading --------------------------------------------------------------------------------


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise UserModelError(f"{path}: no such file")
    name = "wattcap_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserModelError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # classes defined there can then be pickled
    # Its own folder comes first while it runs, so it can import the files beside it.
    sys.path.insert(0, str(path.parent))
    try:
        # the file itself from its source, every time (not the loader's bytecode cache, keyed
        # by the file's mtime and size: an edit that keeps the size within the same second
        # would run the old code), and no bytecode of it written into the user's folder; the
        # files it imports go through the usual import
        exec(compile(path.read_bytes(), str(path), "exec", dont_inherit=True), module.__dict__)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise UserModelError(f"{path}: importing it raised {_one_line(exc)}") from None
    finally:
        try:
            sys.path.remove(str(path.parent))
        except ValueError:
            pass
    return module


def _import_module(name: str) -> ModuleType:
    # Like `python -m`, look in the working directory too.
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise UserModelError(
                f"no module named {exc.name!r} (install it, or run from the folder holding it, "
                "or give path/to/file.py:factory)"
            ) from None
        raise UserModelError(f"module {name}: importing it raised {_one_line(exc)}") from None
    except Exception as exc:
        raise UserModelError(f"module {name}: importing it raised {_one_line(exc)}") from None
    finally:
        if added:
            sys.path.remove(os.getcwd())


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _resolve_factory(ref: UserModelRef, text: str) -> Callable[..., Any]:
    module = _import_file(Path(ref.source)) if ref.is_file else _import_module(ref.source)
    obj: Any = module
    for part in ref.factory.split("."):
        if not hasattr(obj, part):
            raise UserModelError(f"model {text!r}: {ref.source} has no {ref.factory!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UserModelError(f"model {text!r}: {ref.factory!r} is a {type(obj).__name__}, not "
                             "a callable that returns an nn.Module")
    return obj


def _accepted(factory: Callable[..., Any]) -> set[str]:
    """Keyword names the factory accepts among num_classes and vocab_size."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return set()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return {"num_classes"}
    names = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                    inspect.Parameter.KEYWORD_ONLY)}
    return names & {"num_classes", "vocab_size"}


def _logits_only(module: nn.Module, args: Any, output: Any) -> torch.Tensor | None:
    """A forward hook: the logits of a model that returns them in a richer output (a Hugging
    Face model's `ModelOutput`, a dict with "logits"), so the profiler and the training loop
    get the tensor they take; any other output is left as it is (and refused by the check)."""
    if isinstance(output, torch.Tensor):
        return None
    logits = output.get("logits") if isinstance(output, Mapping) else \
        getattr(output, "logits", None)
    return logits if isinstance(logits, torch.Tensor) else None


def _call(factory: Callable[..., Any], text: str, num_classes: int | None) -> nn.Module:
    kwargs: dict[str, int] = {}
    if num_classes is not None:
        accepted = _accepted(factory)
        if "num_classes" in accepted:
            kwargs["num_classes"] = num_classes
        elif "vocab_size" in accepted:
            kwargs["vocab_size"] = num_classes
    try:
        model = factory(**kwargs)
    except Exception as exc:
        raise UserModelError(f"model {text!r}: the factory raised {_one_line(exc)}") from None
    if not isinstance(model, nn.Module):
        raise UserModelError(
            f"model {text!r}: the factory returned {type(model).__name__}, expected a "
            "torch.nn.Module"
        )
    model.register_forward_hook(_logits_only)
    return model


def _example_input(shape: tuple[int, ...], task: str, batch: int = 2) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    if task == "char-lm":
        return torch.randint(0, 2, (batch, *shape), generator=generator)
    return torch.randn((batch, *shape), generator=generator)


def _output_classes(model: nn.Module, example: torch.Tensor, task: str, what: str) -> int:
    """Number of classes (or vocabulary size) the model's output has, running it once."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            out = model(example)
    except Exception as exc:
        raise UserModelError(
            f"{what}: the model failed on an input of shape {tuple(example.shape)} "
            f"({_one_line(exc)}); is the input shape right?"
        ) from None
    finally:
        model.train(was_training)
    logits = _logits_only(model, None, out)  # the instance of spec_for_module has no hook
    out = out if logits is None else logits
    if not isinstance(out, torch.Tensor):
        raise UserModelError(f"{what}: the model returned {type(out).__name__}, expected a "
                             "tensor of logits (or an output with a `logits` tensor, as a "
                             "Hugging Face model's)")
    want_dims = 3 if task == "char-lm" else 2
    if out.dim() != want_dims or out.shape[0] != example.shape[0]:
        form = "(batch, context, vocabulary)" if task == "char-lm" else "(batch, classes)"
        raise UserModelError(f"{what}: the model's output has shape {tuple(out.shape)}; a "
                             f"{task} model returns logits {form}")
    return int(out.shape[-1])


def _attribute(name: str, *owners: Any) -> Any:
    for owner in owners:
        value = getattr(owner, name, None)
        if value is not None:
            return value
    return None


def _build_spec(text: str) -> ModelSpec:
    ref = parse_user_model(text)
    factory = _resolve_factory(ref, text)
    accepts = bool(_accepted(factory))
    first = _call(factory, text, ref.num_classes)
    shape = ref.input_shape or _attribute("input_shape", first, factory)
    if shape is None:
        raise UserModelError(
            f"model {text!r}: cannot tell its input shape",
            hint="give it: `--input-shape 3x32x32` on the command line (C x H x W, or a "
            "context length for a char model), `user_model_text(..., input_shape=\"3x32x32\")` "
            "or `file.py:build[input_shape=3x32x32]` in Python, or an `input_shape` attribute "
            "on the model or its factory")
    shape = tuple(int(d) for d in shape)
    task = ref.task or _attribute("task", first, factory) or "image-classification"
    if task not in TASKS:
        raise UserModelError(f"model {text!r}: task {task!r} is not one of {', '.join(TASKS)}")
    produced = _output_classes(first, _example_input(shape, task), task, f"model {text!r}")
    if ref.num_classes is not None and produced != ref.num_classes:
        raise UserModelError(
            f"model {text!r}: asked for {ref.num_classes} classes but the model outputs "
            f"{produced}" + ("" if accepts else " (its factory takes no num_classes)")
        )
    default = produced
    if default < 2:
        raise UserModelError(f"model {text!r}: the model outputs {default} class; need >= 2")

    def build(num_classes: int) -> nn.Module:
        if num_classes != default and not accepts:
            raise UserModelError(
                f"model {text!r} outputs {default} classes and its factory takes no "
                f"num_classes, but the data has {num_classes}"
            )
        return _call(factory, text, num_classes if accepts else None)

    return ModelSpec(
        name=text,
        input_shape=shape,
        input_dtype="int64" if task == "char-lm" else "float32",
        task=task,
        default_num_classes=default,
        reference=False,
        description=f"user model {ref.factory} from {ref.source}",
        factory=build,
    )


# canonical text -> (file stamp, spec): an edited file is imported again
_SPECS: dict[str, tuple[tuple[int, int] | None, ModelSpec]] = {}


def _stamp(ref: UserModelRef) -> tuple[int, int] | None:
    if not ref.is_file:
        return None
    try:
        st = os.stat(ref.source)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def user_model_spec(text: str) -> ModelSpec:
    """The ModelSpec of a user model spec text (imported, built and run once to check it;
    cached per process until the file changes). Raises UserModelError with one line."""
    ref = parse_user_model(text)
    canonical = ref.text
    stamp = _stamp(ref)
    cached = _SPECS.get(canonical)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    with torch.random.fork_rng(devices=[]):
        spec = _build_spec(canonical)
    _SPECS[canonical] = (stamp, spec)
    return spec


# -- instances --------------------------------------------------------------------------------


def spec_for_module(
    module: nn.Module,
    example_input: torch.Tensor,
    *,
    name: str | None = None,
    task: str | None = None,
    register: bool = True,
) -> ModelSpec:
    """A ModelSpec for an ``nn.Module`` instance, from an example input batch (batch first).

    The input shape is ``example_input.shape[1:]``; the task is char-lm for integer inputs,
    else image classification (``task`` overrides); the number of classes is read from the
    output. ``build()`` returns a deep copy, so profiling never touches the instance's
    weights. The name defaults to the class name and the architecture fingerprint; with
    ``register`` (default) ``get_model_spec(name)`` finds it in this process.
    """
    if not isinstance(module, nn.Module):
        raise UserModelError(f"expected a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(example_input, torch.Tensor) or example_input.dim() < 2:
        raise UserModelError("example_input must be a tensor with a batch dimension first")
    if task is None:
        task = "image-classification" if example_input.is_floating_point() else "char-lm"
    if task not in TASKS:
        raise UserModelError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    fingerprint = architecture_fingerprint(module)
    label = name or f"{type(module).__name__}-{fingerprint[:8]}"
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    classes = _output_classes(module, example_input.to(device), task, f"model {label!r}")
    if classes < 2:
        raise UserModelError(f"model {label!r}: the model outputs {classes} class; need >= 2")
    snapshot = copy.deepcopy(module).cpu()
    snapshot.register_forward_hook(_logits_only)

    def build(num_classes: int) -> nn.Module:
        if num_classes != classes:
            raise UserModelError(
                f"model {label!r} outputs {classes} classes, but the data has {num_classes}"
            )
        return copy.deepcopy(snapshot)

    spec = ModelSpec(
        name=label,
        input_shape=tuple(int(d) for d in example_input.shape[1:]),
        input_dtype="int64" if task == "char-lm" else "float32",
        task=task,
        default_num_classes=classes,
        reference=False,
        description=f"{type(module).__name__} instance",
        factory=build,
    )
    if register:
        from wattcap.models.registry import register_runtime_model

        register_runtime_model(spec, fingerprint)
    return spec
