"""The fleet's Flower apps as a real deployment (issue 29 item 3): one SuperLink and two
SuperNodes on 127.0.0.1, `flwr run` of examples/fleet/flower-app, two rounds completed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.experiments.test_federation import LINK, _fleet
from wattcap.experiments.federation import FleetRun

pytest.importorskip("flwr")
pytestmark = pytest.mark.slow(seconds=45)  # a SuperLink, two SuperNodes, two rounds

APP = Path(__file__).resolve().parents[2] / "examples" / "fleet" / "flower-app"
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s:g} s")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    # killed, not stopped: the run is over and read, and a SuperNode told to stop waits out
    # Flower's 5 s force-exit timer. Each in its own session: its children (superexec, a
    # ClientApp still running after a failure) go with it
    for process in started:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for process in started:
        process.wait(timeout=20)


def test_a_superlink_and_two_supernodes_run_two_rounds(tmp_path: Path,
                                                       processes: list[subprocess.Popen],
                                                       ) -> None:
    clients = [
        {"name": "nano", "device": "emulated:jetson-nano", "power_cap": 4.0,
         "data": {"dataset": "digits", "fraction": 0.5}, "link": LINK},
        {"name": "tx2", "device": "emulated:jetson-tx2nx", "power_cap": 6.0,
         "data": {"dataset": "digits", "fraction": 0.5, "seed": 1}, "link": LINK},
    ]
    fleet = _fleet(tmp_path, clients, max_rounds=2, target_accuracy=0.99)
    home = tmp_path / "flwr-home"
    home.mkdir()
    port = _free_port()
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "local"\n\n[superlink.local]\naddress = "127.0.0.1:{port}"\n'
        "insecure = true\n")
    env = {**os.environ, "FLWR_HOME": str(home), "PATH": f"{BIN}:{os.environ['PATH']}"}

    def start(*args: str, log: str) -> None:
        processes.append(subprocess.Popen(
            [str(BIN / args[0]), *args[1:]], env=env, cwd=tmp_path, start_new_session=True,
            stdout=(tmp_path / log).open("w"), stderr=subprocess.STDOUT))

    start("flower-superlink", "--insecure", "--disable-runtime-dependency-installation",
          "--port", str(port), log="superlink.log")
    _wait_for_port(port)
    for index in range(2):
        start("flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{port}",
              "--port", str(_free_port()), "--node-config", f"partition-id={index}",
              log=f"supernode-{index}.log")
    app = tmp_path / "app"
    shutil.copytree(APP, app)
    done = subprocess.run(
        [str(BIN / "flwr"), "run", str(app), "--run-config", f'fleet="{fleet}"', "--stream"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    logs = "\n".join(p.read_text()[-2000:] for p in sorted(tmp_path.glob("*.log")))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    summary = json.loads(next(line for line in done.stdout.splitlines()
                              if line.startswith('{"record"')))
    run = FleetRun.load(summary["record"])
    assert run.engine == "flower" and len(run.rounds) == 2 and not run.reached
    for r in run.rounds:
        assert {c.name: c.status for c in r.clients} == {"nano": "aggregated",
                                                         "tx2": "aggregated"}
        assert r.accuracy > 0
    assert run.rounds[1].start_s == pytest.approx(run.rounds[0].round_s)
