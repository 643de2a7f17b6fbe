"""`wattcap plan` is a table lookup: it must run without importing torch (issue 25)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHECK = """
import sys
from wattcap.cli import app
sys.argv = ["wattcap", "plan", "--profile", sys.argv[1], "--efficiency", sys.argv[2],
            "--power-cap", "4.5", "--json"]
try:
    app()
except SystemExit as exc:
    assert not exc.code, exc.code
print("torch imported:", "torch" in sys.modules)
"""


def test_plan_never_imports_torch(tmp_path: Path, nano_resnet18_profile,
                                  nano_reference_profiles, make_efficiency) -> None:
    # the reference profiles are in the session's cache folder (the fixture computed them),
    # as they are on a user's machine after the first plan
    profile = tmp_path / "profile.json"
    nano_resnet18_profile.save(profile)
    vector = tmp_path / "efficiency.json"
    make_efficiency({16: [900, 1000], 32: [1200, 1300], 64: [2000, 2100],
                       128: [3600, 3700]}).save(vector)
    out = subprocess.run([sys.executable, "-c", CHECK, str(profile), str(vector)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"batch_size"' in out.stdout  # it planned
    assert "torch imported: False" in out.stdout, out.stdout[-2000:]
