"""Install on a Jetson with JetPack 6: the built wheel goes into a fresh environment that
already holds NVIDIA's torch and numpy 1, and pip keeps both.

The install runs offline. The environment stands in for JetPack's: a tiny `torch` wheel with
the version of NVIDIA's JetPack 6 builds (a pre-release with a local label, and, like NVIDIA's
wheels, no numpy requirement: torch is built against numpy 1 but does not say so), a numpy 1
(each a module that states its version), in the environment or in the system's site-packages
that a `--system-site-packages` environment sees, and the rest of wattcap's dependencies from
this project's .venv, seen through a folder of links that leaves out .venv's own torch, numpy
and wattcap. Newer stand-ins (torch 2.5.0, numpy 2.0.0) sit in the --find-links folder, as PyPI
has them: a requirement that asked for them would get them, and the version checks would fail.
"""

from __future__ import annotations

import base64
import email
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Iterable
from email.message import Message
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]

#: NVIDIA's torch for JetPack 6 (L4T 36, the Orin family), as its wheels name it
JETPACK6_TORCH = "2.3.0a0+40ec155e58.nv24.03"
#: the numpy NVIDIA's JetPack 6 torch instructions install beside it (a numpy 1)
JETPACK6_NUMPY = "1.26.4"
#: Ubuntu 22.04's numpy (apt's python3-numpy on JetPack 6): older than wattcap's lower bound
APT_NUMPY = "1.21.5"
#: NVIDIA's newest torch for JetPack 5 (L4T 35, Python 3.8)
JETPACK5_TORCH = "2.1.0a0+41361538.nv23.06"
#: what PEP 508 markers see on JetPack 6 (Ubuntu 22.04 on aarch64)
JETPACK6_MARKERS = {
    "python_version": "3.10", "python_full_version": "3.10.12", "platform_machine": "aarch64",
    "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
    "implementation_name": "cpython", "platform_python_implementation": "CPython",
}
#: what the stand-in folder offers beyond JetPack's own: newer releases, as PyPI has them
NEWER_ON_THE_INDEX = {"torch": "2.5.0", "numpy": "2.0.0"}


def _jetson_extras() -> list[str]:
    """The extras a Jetson user may install: all but NVML (a Jetson has none) and the
    project's own documentation and development tools."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    return sorted(set(extras) - {"nvml", "docs", "dev"})


def _applies_on_jetpack6(requirement: Requirement, extra: str) -> bool:
    environment = {**JETPACK6_MARKERS, "extra": extra}
    return requirement.marker is None or requirement.marker.evaluate(environment)


def jetpack6_conflicts(metadata: Message, extras: Iterable[str]) -> list[str]:
    """What in a wheel's metadata JetPack 6 cannot meet: a Requires-Python without Python
    3.10, or a requirement (of the package or of one of `extras`) on torch or numpy that
    NVIDIA's torch or numpy 1.26.4 does not satisfy."""
    conflicts = []
    requires_python = metadata.get("Requires-Python")
    python = JETPACK6_MARKERS["python_full_version"]
    if requires_python and not SpecifierSet(requires_python).contains(python):
        conflicts.append(f"Requires-Python {requires_python} rejects Python {python}")
    stack = {"torch": JETPACK6_TORCH, "numpy": JETPACK6_NUMPY}
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        version = stack.get(canonicalize_name(requirement.name))
        if version is None or not any(
                _applies_on_jetpack6(requirement, extra) for extra in ("", *extras)):
            continue
        # pip counts an installed pre-release (NVIDIA's 2.3.0a0) as meeting `torch>=2.1`
        if not requirement.specifier.contains(version, prereleases=True):
            conflicts.append(f"{line} rejects {requirement.name} {version}")
    return conflicts


def jetpack_stack_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What an install did to JetPack's stack: torch replaced (any other version), numpy moved
    to another major version (NVIDIA's torch is built against numpy 1). Versions compare as
    PEP 440 reads them: pip writes NVIDIA's `.nv24.03` as `.nv24.3`."""
    changes = []
    if Version(after.get("torch", "0")) != Version(before["torch"]):
        changes.append(f"torch {before['torch']} became {after.get('torch')}")
    if Version(after.get("numpy", "0")).major != Version(before["numpy"]).major:
        changes.append(f"numpy {before['numpy']} became {after.get('numpy')}")
    return changes


# --- the built wheel and the stand-ins ------------------------------------------------------


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _stand_in_wheel(folder: Path, name: str, version: str) -> Path:
    """A wheel of `name` at `version` holding a module that states its version."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: wattcap-tests\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = [f"{path},{_record_hash(text.encode())},{len(text.encode())}"
              for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in files.items():
            wheel.writestr(member, text)
    return path


@pytest.fixture(scope="session")
def wattcap_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from a copy of the sources (a build in the tree would
    reuse its build/ folder, where modules deleted since linger)."""
    source = tmp_path_factory.mktemp("wattcap-source")
    shutil.copytree(ROOT / "wattcap", source / "wattcap",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("wattcap-dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
                    "--no-build-isolation", str(source), "--wheel-dir", str(dist)],
                   check=True, env=_pip_environment(dist))
    (wheel,) = dist.glob("wattcap-*.whl")
    return wheel


@pytest.fixture(scope="session")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The --find-links folder: JetPack's torch and numpy, and newer releases of both."""
    folder = tmp_path_factory.mktemp("stand-ins")
    versions = [("torch", JETPACK6_TORCH), ("numpy", JETPACK6_NUMPY), ("numpy", APT_NUMPY),
                *NEWER_ON_THE_INDEX.items()]
    for name, version in versions:
        _stand_in_wheel(folder, name, version)
    return folder


@pytest.fixture(scope="session")
def dependencies_view(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of links to this .venv's installed packages but torch, numpy and wattcap:
    wattcap's other dependencies (and pip), installed, without the network."""
    view = tmp_path_factory.mktemp("site-packages-view")
    left_out = re.compile(r"^(torch|torchgen|functorch|numpy|wattcap)([-.].*)?$|^__editable__"
                          r"|\.pth$")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not left_out.match(entry.name):
            (view / entry.name).symlink_to(entry)
    return view


def _pip_environment(cache: Path) -> dict[str, str]:
    """No pip configuration, user site or PYTHONPATH of whoever runs the tests."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PIP_", "PYTHON"))}
    return {**environment, "PIP_CONFIG_FILE": os.devnull, "PIP_CACHE_DIR": str(cache / "cache"),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}


class JetsonEnvironment:
    """A fresh virtual environment that sees JetPack's torch, a numpy and wattcap's other
    dependencies; torch and numpy in the environment, or with `system` in a folder after it
    on sys.path, where `--system-site-packages` puts the system's."""

    def __init__(self, folder: Path, view: Path, stand_ins: Path, numpy: str,
                 system: bool = False) -> None:
        # without pip of its own (ensurepip takes seconds): the view holds .venv's pip, which
        # this environment's Python runs, so it installs here
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
        self.python = folder / "bin" / "python"
        self.stand_ins = stand_ins
        self.folder = folder
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        purelib = folder / "lib" / version / "site-packages"
        jetpack = folder / "system-site-packages" if system else purelib
        # .pth lines go after the environment's own site-packages on sys.path
        (purelib / "zz-dependencies.pth").write_text(f"{jetpack}\n{view}\n")
        # the stand-ins are pure wheels: unpacked into site-packages they are installed (what
        # pip would do, a second faster)
        for name, stand_in in (("torch", JETPACK6_TORCH), ("numpy", numpy)):
            with zipfile.ZipFile(stand_ins / f"{name}-{stand_in}-py3-none-any.whl") as wheel:
                wheel.extractall(jetpack)

    def run_python(self, code: str) -> str:
        # run from the environment's folder: `python -c` puts the working directory first on
        # sys.path, and from the project's root `import wattcap` would find its sources
        return subprocess.run([str(self.python), "-c", code], check=True, capture_output=True,
                              text=True, cwd=self.folder,
                              env=_pip_environment(self.folder)).stdout.strip()

    def pip(self, command: str, *arguments: str) -> str:
        """Run pip `command` offline, with the stand-ins folder as its index."""
        line = [str(self.python), "-m", "pip", command, "--no-index", "--find-links",
                str(self.stand_ins), *arguments]
        done = subprocess.run(line, capture_output=True, text=True, cwd=self.folder,
                              env=_pip_environment(self.folder))
        assert done.returncode == 0, f"{shlex.join(line)}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def install(self, *requirements: str) -> None:
        # --no-warn-conflicts: after installing, pip would parse the requirements of every
        # distribution the environment sees (~150 through the view) to print warnings about
        # conflicts, which never fail the install and which nothing here reads: about 40 % of an
        # install's time. What pip resolves, installs and keeps is the same without it.
        self.pip("install", "--quiet", "--no-compile", "--no-warn-conflicts", *requirements)

    def would_install(self, *requirements: str) -> dict[str, str]:
        """{name: version} pip would install for `requirements` (its dry run's report)."""
        report = json.loads(self.pip("install", "--quiet", "--dry-run", "--report", "-",
                                     *requirements))
        return {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
                for item in report["install"]}

    def versions(self) -> dict[str, str]:
        """{name: version} of what pip finds installed (what it would keep or replace)."""
        listed = json.loads(self.pip("list", "--format", "json"))
        return {canonicalize_name(d["name"]): d["version"] for d in listed}


@pytest.fixture
def jetson_environment(tmp_path: Path, dependencies_view: Path,
                       stand_ins: Path) -> Callable[..., JetsonEnvironment]:
    """Make a JetsonEnvironment: (a name for its folder, its numpy version, system=...)."""
    return lambda name, numpy, system=False: JetsonEnvironment(
        tmp_path / name, dependencies_view, stand_ins, numpy, system)


def _readme_install_arguments() -> list[str]:
    """What the README's Jetson route adds after `pip install .` (the dry run aside)."""
    readme = (ROOT / "README.md").read_text()
    (line,) = re.findall(r"^~/wattcap-env/bin/pip install \. ([^#\n]*)", readme, flags=re.M)
    return shlex.split(line)


# --- the install ----------------------------------------------------------------------------


@pytest.mark.slow(seconds=8)  # a wheel build and an install that resolves ~150 packages
def test_the_wheel_installs_beside_jetpacks_torch_and_numpy_1(wattcap_wheel: Path,
                                                              jetson_environment) -> None:
    environment = jetson_environment("jetpack6", JETPACK6_NUMPY)
    before = environment.versions()
    # pip sees the stand-ins (normalised: .nv24.03 reads .nv24.3), not .venv's torch
    assert Version(before["torch"]) == Version(JETPACK6_TORCH)
    assert before["numpy"] == JETPACK6_NUMPY and "wattcap" not in before

    environment.install(f"{wattcap_wheel}[{','.join(_jetson_extras())}]")

    after = environment.versions()
    assert jetpack_stack_changes(before, after) == []
    assert after["numpy"] == JETPACK6_NUMPY
    assert after["wattcap"] == "0.1.0"
    location = environment.run_python("import wattcap; print(wattcap.__file__)")
    assert Path(location).is_relative_to(environment.folder)


@pytest.mark.slow(seconds=4)  # a dry run and an install
def test_the_readme_route_lifts_apt_numpy_to_numpy_1_where_a_plain_install_takes_numpy_2(
        wattcap_wheel: Path, jetson_environment) -> None:
    # apt's numpy (in the system's site-packages, with NVIDIA's torch installed system-wide,
    # as the README's environment sees them) is below wattcap's numpy>=1.24, so pip must
    # upgrade it: to the newest numpy unless the install holds it below 2, as the README does
    environment = jetson_environment("apt-numpy", APT_NUMPY, system=True)
    before = {"torch": JETPACK6_TORCH, "numpy": APT_NUMPY}

    plain = {**before, **environment.would_install(str(wattcap_wheel))}
    assert jetpack_stack_changes(before, plain) == [
        f"numpy {APT_NUMPY} became {NEWER_ON_THE_INDEX['numpy']}"]  # the check can fail

    arguments = _readme_install_arguments()
    assert "numpy<2" in arguments
    environment.install(str(wattcap_wheel), *arguments)
    after = environment.versions()
    assert jetpack_stack_changes(before, after) == []
    assert after["numpy"] == JETPACK6_NUMPY


# --- what the wheel asks for, against JetPack's versions --------------------------------------


@pytest.fixture(scope="session")
def wattcap_metadata(wattcap_wheel: Path) -> Message:
    with zipfile.ZipFile(wattcap_wheel) as wheel:
        (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(wheel.read(name))


def test_the_wheel_asks_nothing_jetpack_6_cannot_give(wattcap_metadata: Message) -> None:
    assert _jetson_extras()  # the check covers the extras, not the base package alone
    assert jetpack6_conflicts(wattcap_metadata, _jetson_extras()) == []


def _metadata(requires_python: str, *requires_dist: str) -> Message:
    metadata = Message()
    metadata["Requires-Python"] = requires_python
    for line in requires_dist:
        metadata["Requires-Dist"] = line
    return metadata


@pytest.mark.parametrize("metadata", [
    _metadata(">=3.11"),
    _metadata(">=3.10", "numpy>=2"),
    _metadata(">=3.10", "torch>=2.4"),
    _metadata(">=3.10", "torch==2.3.0"),  # the pre-release is not 2.3.0
    _metadata(">=3.10", 'numpy>=2; extra == "hf"'),
    _metadata(">=3.10", 'torch>=2.5; platform_machine == "aarch64"'),
], ids=["python", "numpy-2", "newer-torch", "exact-torch", "in-an-extra", "on-arm"])
def test_the_check_catches_what_jetpack_6_cannot_meet(metadata: Message) -> None:
    assert len(jetpack6_conflicts(metadata, ["hf"])) == 1


@pytest.mark.parametrize("metadata", [
    _metadata(">=3.10", "torch>=2.1", "numpy>=1.24,<3", "scipy>=1.12"),
    _metadata(">=3.10", 'numpy>=2; python_version >= "3.12"'),
    _metadata(">=3.10", 'torch>=2.5; platform_machine == "x86_64"'),
    _metadata(">=3.10", 'numpy>=2; extra == "nvml"'),
], ids=["bounds", "newer-python", "on-x86", "an-extra-not-taken"])
def test_the_check_passes_what_does_not_apply_on_jetpack_6(metadata: Message) -> None:
    assert jetpack6_conflicts(metadata, ["hf"]) == []


# --- what the docs say ------------------------------------------------------------------------


def _pythons(text: str) -> list[str]:
    return re.findall(r"(?<![\d.])3\.\d+(?![\d.])", text)


def test_the_docs_name_the_pythons_the_wheel_accepts_and_rejects(
        wattcap_metadata: Message) -> None:
    requires_python = SpecifierSet(wattcap_metadata["Requires-Python"])
    readme = (ROOT / "README.md").read_text()
    hardware = (ROOT / "docs" / "hardware.md").read_text()
    jetpack6 = re.search(r"\*\*On a Jetson with JetPack 6\*\*(.*?)```", readme, re.S)
    older = re.search(r"\*\*JetPack 4 and 5\*\*(.*?)cannot install", readme, re.S)
    installs = re.search(r"installs only on JetPack 6(.*?)JetPack 4\s+and 5(.*?)\)", hardware,
                         re.S)
    assert jetpack6 and older and installs
    supported = _pythons(jetpack6[1]) + _pythons(installs[1])
    unsupported = _pythons(older[1]) + _pythons(installs[2])
    assert supported == ["3.10", "3.10"] and sorted(set(unsupported)) == ["3.6", "3.8"]
    assert all(requires_python.contains(p) for p in supported)
    assert not any(requires_python.contains(p) for p in unsupported)
    # and NVIDIA's torch for JetPack 5 is below the wheel's bound, as the README says
    assert re.search(r"torch 2\.1\.0a0 at most", older[1].replace("\n", " "))
    torch = [Requirement(r) for r in wattcap_metadata.get_all("Requires-Dist") or []
             if canonicalize_name(Requirement(r).name) == "torch"]
    assert torch and not any(r.specifier.contains(JETPACK5_TORCH, prereleases=True)
                             for r in torch)
