"""Files are the user's and they are safe (issue 27 item 3): written with the umask's mode,
handed to the sudo user, atomic and fsynced, for every kind of file wattcap writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from wattcap.core import files
from wattcap.core.files import atomic_path, write_file


@pytest.fixture
def umask():
    def set_umask(mask: int) -> None:
        previous.append(os.umask(mask))
    previous: list[int] = []
    yield set_umask
    if previous:
        os.umask(previous[0])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_file_gets_the_umasks_mode(tmp_path: Path, umask, mask: int, mode: int,
                                     nano_resnet18_profile) -> None:
    umask(mask)
    assert _mode(write_file(tmp_path / "a.txt", "x")) == mode
    assert _mode(nano_resnet18_profile.save(tmp_path / "profile.json")) == mode


def test_under_sudo_files_and_folders_go_to_the_user(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    chowned: list[tuple[str, int, int]] = []
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("SUDO_UID", "1234")
    monkeypatch.setenv("SUDO_GID", "5678")
    monkeypatch.setattr(files.os, "chown",
                        lambda path, uid, gid: chowned.append((Path(path).name, uid, gid)))
    write_file(tmp_path / "out" / "deeper" / "report.md", "# report")
    names = [name for name, _, _ in chowned]
    assert names[:2] == ["out", "deeper"]  # the folders it created, outermost first
    assert names[2].startswith(".report.md.")  # the file, before its rename
    assert {(uid, gid) for _, uid, gid in chowned} == {(1234, 5678)}


def test_not_root_no_chown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("SUDO_UID", "1234")
    monkeypatch.setattr(files.os, "chown", lambda *a: pytest.fail("chown without root"))
    write_file(tmp_path / "a.txt", "x")


def test_writes_are_synced_then_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(files.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(files.os, "replace",
                        lambda a, b: (events.append("rename"), real_replace(a, b)))
    write_file(tmp_path / "a.json", "{}")
    assert events == ["fsync", "rename", "fsync"]  # the file, the rename, then its folder


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = write_file(tmp_path / "results.csv", "old\n")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half of the new")
        raise RuntimeError("killed")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["results.csv"]


def test_weights_and_checkpoints_get_the_umasks_mode(tmp_path: Path, umask) -> None:
    """safetensors writers (weights, checkpoints) keep no temporary 0600 either."""
    import torch
    from torch import nn

    from wattcap.models.weights import save_weights
    from wattcap.runtime.checkpoint import Checkpoint, SessionState
    from wattcap.runtime.meter import MeterState

    umask(0o027)
    model = nn.Linear(2, 2)
    weights = save_weights(model, tmp_path / "w.safetensors", {"model": "x"})
    checkpoint = Checkpoint(tmp_path / "ckpt")
    checkpoint.save(model, torch.optim.Adam(model.parameters()), SessionState(
        identity={}, samples=0, steps=0, curve=[], device_time_s=0.0, meter=MeterState(),
        events=[], counter_energy_j=None, frequency_hz=None, batch_size=1))
    assert {_mode(weights), _mode(checkpoint.path), _mode(tmp_path / "ckpt")} == \
        {0o640, 0o750}


#: the only places that may open a file for writing themselves: the writer, the state files of
#: devices (root's, by design), sysfs writes, downloads to a temporary folder, the image-cache
#: probe of writability, and the server's temporary weights of a job
ALLOWED_WRITERS = {"core/files.py", "devices/found_state.py", "devices/jetson.py",
                   "server/client.py", "server/jobs.py", "train/tasks.py", "data/pixel_cache.py"}


def test_every_file_goes_through_the_writer() -> None:
    import re

    import wattcap

    package = Path(wattcap.__file__).parent
    writes = re.compile(r"\.write_text\(|\.write_bytes\(|savefig\((?!tmp)|"
                        r"open\([^)]*[\"'][wa]b?[\"']")
    offenders = []
    for path in sorted(package.rglob("*.py")):
        relative = str(path.relative_to(package))
        if relative in ALLOWED_WRITERS:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if writes.search(line):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert not offenders, "write through wattcap.core.files:\n" + "\n".join(offenders)
