"""The public API is a tested list (issue 25): every import the README shows, `wattcap.Session`
with its documented keywords, the callbacks, and the flat paths of earlier releases (kept as
deprecated re-exports)."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_imports() -> list[str]:
    """Every `from wattcap... import ...` / `import wattcap...` line of the README's Python
    blocks (continuation lines in parentheses joined)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
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


SESSION_KEYWORDS = {
    # the README's and the example's Session calls, and the integrations'
    "model", "model_name", "example_input", "profile", "efficiency", "power_cap",
    "power_cap_w", "target_accuracy", "sample_budget", "checkpoint_dir", "objective",
    "cap_policy", "batch_size", "frequency_hz", "method", "margin_sigmas", "watchdog",
    "progress", "restore",
}


def test_session_is_exported_from_the_root_with_its_documented_keywords() -> None:
    import wattcap

    parameters = inspect.signature(wattcap.Session).parameters
    assert "device" in parameters
    missing = SESSION_KEYWORDS - set(parameters)
    assert not missing, f"Session lost documented keywords: {sorted(missing)}"


def test_the_callbacks_and_samplers_are_where_the_readme_says() -> None:
    from wattcap.integrations.huggingface import WattcapTrainerCallback
    from wattcap.integrations.lightning import WattcapCallback
    from wattcap.runtime.sampling import SessionBatchSampler

    assert callable(WattcapCallback) and callable(WattcapTrainerCallback)
    assert "session" in inspect.signature(SessionBatchSampler).parameters


#: flat module of earlier releases -> (its new home, names users import from it)
DEPRECATED = {
    "wattcap.planner": ("wattcap.algorithms.planner", ["plan", "Plan", "Choice",
                                                        "InfeasibleCapError"]),
    "wattcap.profiling": ("wattcap.measure.profiling", ["Profiler", "ProfileTable",
                                                        "ProfilePoint"]),
    "wattcap.sampling": ("wattcap.runtime.sampling", ["SessionBatchSampler", "BatchStream"]),
    "wattcap.training": ("wattcap.train.loop", ["train_to_accuracy", "TrainConfig",
                                                "RunRecord", "pretrain"]),
    "wattcap.efficiency": ("wattcap.train.efficiency", ["estimate_efficiency",
                                                        "EfficiencyVector"]),
    "wattcap.references": ("wattcap.measure.references", ["emulated_reference_profiles"]),
    "wattcap.gns_replan": ("wattcap.runtime.gns_replan", ["GnsSettings"]),
    "wattcap.session": ("wattcap.runtime.session", ["Session", "SessionError"]),
    "wattcap.run": ("wattcap.core.run", ["RunRecord", "TrainConfig", "CurvePoint"]),
    "wattcap.caps": ("wattcap.devices.caps", ["CapSource", "parse_cap_source", "SolarCap"]),
    "wattcap.noise_scale": ("wattcap.train.noise_scale", ["measure_noise_scale",
                                                          "NoiseScaleEstimate"]),
    "wattcap.executors": ("wattcap.train.executors", ["get_executor", "SerialExecutor"]),
}


@pytest.mark.parametrize("old", sorted(DEPRECATED))
def test_flat_paths_still_import_with_a_deprecation_warning(old: str) -> None:
    new, names = DEPRECATED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=re.escape(new)):
        module = importlib.import_module(old)
    for name in names:
        assert hasattr(module, name), f"{old}.{name} is gone"
        value = getattr(module, name)
        home = importlib.import_module(value.__module__) if hasattr(value, "__module__") else None
        assert home is not None and getattr(home, name) is value  # the same object, re-exported


def test_new_paths_import_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for module in ("wattcap.algorithms.planner", "wattcap.measure.profiling",
                       "wattcap.runtime.sampling", "wattcap.train.loop", "wattcap.core.run",
                       "wattcap.train.efficiency", "wattcap.measure.references",
                       "wattcap.core.errors", "wattcap.runtime.session"):
            importlib.import_module(module)
