"""The public API is a tested list: every import the README shows, `wattcap.Session` with its
documented arguments and parts, the callbacks, and one home per module (no flat re-exports)."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the pages users copy code from: the README and the documentation site's pages
DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _readme_imports() -> list[str]:
    """Every `from wattcap... import ...` / `import wattcap...` line of the Python blocks of the
    README and the docs pages (continuation lines in parentheses joined)."""
    text = "\n".join(page.read_text() for page in DOC_PAGES)
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    found = []
    for block in blocks:
        for match in re.finditer(r"^(from wattcap[\w.]* import [^\n(]*(\([^)]*\))?|"
                                 r"import wattcap[\w.]*)", block, flags=re.M):
            found.append(" ".join(match.group(0).split()))
    return sorted(set(found))


README_IMPORTS = _readme_imports()


def test_the_readme_shows_imports() -> None:
    assert len(README_IMPORTS) >= 8  # the parser above reads the blocks


@pytest.mark.parametrize("statement", README_IMPORTS)
def test_every_readme_import_works_without_deprecation(statement: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        exec(statement, {})  # noqa: S102 - the README's own line


SESSION_ARGUMENTS = {
    # the README's and the example's Session calls, and the integrations'
    "device", "model", "model_name", "example_input", "planning", "cap", "goal", "checkpoint",
    "reporting", "device_handling",
}
#: each part of a Session's settings, with the fields the README's calls use
SESSION_PARTS = {
    "PlanSettings": {"profile", "efficiency", "objective", "batch_size", "frequency_hz",
                     "method", "margin_sigmas"},
    "CapSettings": {"power_cap", "policy", "watchdog"},
    "Goal": {"target_accuracy", "target_metric", "sample_budget"},
    "CheckpointSettings": {"directory"},
    "Reporting": {"progress"},
    "DeviceHandling": {"restore"},
}


def test_session_is_exported_from_the_root_with_its_documented_arguments() -> None:
    import wattcap

    parameters = inspect.signature(wattcap.Session).parameters
    missing = SESSION_ARGUMENTS - set(parameters)
    assert not missing, f"Session lost documented arguments: {sorted(missing)}"
    assert wattcap.SessionConfig is importlib.import_module(
        "wattcap.runtime.session_config").SessionConfig


@pytest.mark.parametrize("part", sorted(SESSION_PARTS))
def test_the_session_parts_keep_their_documented_fields(part: str) -> None:
    import dataclasses

    kind = getattr(importlib.import_module("wattcap.runtime.session_config"), part)
    missing = SESSION_PARTS[part] - {f.name for f in dataclasses.fields(kind)}
    assert not missing, f"{part} lost documented fields: {sorted(missing)}"


def test_the_callbacks_and_samplers_are_where_the_readme_says() -> None:
    from wattcap.integrations.huggingface import WattcapTrainerCallback
    from wattcap.integrations.lightning import WattcapCallback
    from wattcap.runtime.sampling import SessionBatchSampler

    assert callable(WattcapCallback) and callable(WattcapTrainerCallback)
    assert "session" in inspect.signature(SessionBatchSampler).parameters


#: the flat modules of the layout before the layers: each name has one home now
FLAT_MODULES = ["planner", "profiling", "sampling", "training", "efficiency", "references",
                "gns_replan", "session", "run", "caps", "noise_scale", "executors"]


@pytest.mark.parametrize("name", FLAT_MODULES)
def test_the_flat_modules_are_gone(name: str) -> None:
    sys.modules.pop(f"wattcap.{name}", None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"wattcap.{name}")


def test_new_paths_import_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for module in ("wattcap.algorithms.planner", "wattcap.measure.profiling",
                       "wattcap.runtime.sampling", "wattcap.train.loop", "wattcap.core.run",
                       "wattcap.train.efficiency", "wattcap.measure.references",
                       "wattcap.core.errors", "wattcap.runtime.session"):
            importlib.import_module(module)
