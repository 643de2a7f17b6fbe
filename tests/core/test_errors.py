"""Every error a user can meet derives from WattcapError, with a message and a hint (issue 25)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

import wattcap
from wattcap.core.errors import WattcapError

#: exceptions that are control flow, not errors a user reads
NOT_USER_ERRORS = {
    "wattcap.devices.signals.Terminated",  # a SystemExit that restores the device on a signal
}
#: modules kept only to re-export old names
DEPRECATED_SHIMS = {"planner", "profiling", "sampling", "training", "efficiency", "references",
                    "gns_replan", "session", "run", "caps", "noise_scale", "executors"}


def _exception_classes() -> dict[str, type[BaseException]]:
    found = {}
    for info in pkgutil.walk_packages(wattcap.__path__, "wattcap."):
        if info.name.split(".")[1] in DEPRECATED_SHIMS or info.name.endswith("__main__"):
            continue
        if info.name.startswith("wattcap.integrations."):  # optional extras: imported below
            continue
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as err:
            # a module of an optional extra (wattcap.server needs the `server` extra's fastapi)
            # on a machine without it: its errors are checked where the extra is installed
            if err.name is None or err.name.split(".")[0] == "wattcap":
                raise
            continue
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == module.__name__):
                found[f"{module.__name__}.{name}"] = value
    return found


EXCEPTIONS = _exception_classes()


def test_the_walk_finds_the_package_errors() -> None:
    assert len(EXCEPTIONS) >= 20
    assert "wattcap.devices.errors.DeviceError" in EXCEPTIONS
    assert "wattcap.core.schema.WattcapFileError" in EXCEPTIONS


@pytest.mark.parametrize("name", sorted(set(EXCEPTIONS) - NOT_USER_ERRORS))
def test_every_user_error_is_a_wattcap_error(name: str) -> None:
    assert issubclass(EXCEPTIONS[name], WattcapError), f"{name} is not a WattcapError"


def test_the_builtin_bases_are_kept_for_existing_except_clauses() -> None:
    from wattcap.core.plan import InfeasibleCapError
    from wattcap.core.schema import WattcapFileError
    from wattcap.devices.errors import DeviceError, DeviceOutOfMemoryError

    assert issubclass(WattcapFileError, ValueError)
    assert issubclass(InfeasibleCapError, ValueError)
    assert issubclass(DeviceError, RuntimeError)
    assert issubclass(DeviceOutOfMemoryError, MemoryError)


def test_message_and_hint_are_kept_and_shown_once() -> None:
    err = WattcapError("the profile is for another device", hint="profile this device")
    assert err.message == "the profile is for another device"
    assert err.hint == "profile this device"
    assert str(err) == "the profile is for another device (profile this device)"
    same = WattcapError("no permission: run with sudo", hint="run with sudo")
    assert str(same) == "no permission: run with sudo"  # the hint is already in the text


def test_device_errors_keep_their_fix_line_and_survive_pickling() -> None:
    from wattcap.devices.errors import DevicePermissionError

    err = DevicePermissionError("cannot write min_freq", hint="run with sudo")
    assert err.message == "cannot write min_freq" and err.hint == "run with sudo"
    assert str(err) == "cannot write min_freq\n  fix: run with sudo"
    again = pickle.loads(pickle.dumps(err))  # errors cross process boundaries (executors)
    assert isinstance(again, DevicePermissionError)
    assert "run with sudo" in str(again)
