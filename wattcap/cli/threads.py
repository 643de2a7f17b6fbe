"""How many CPU threads torch uses in wattcap's commands.

The models wattcap trains on the CPU (the emulated device runs the real math on the CPU) are
small: a second intra-op thread gains little on them, and on a busy machine OpenMP's spinning
threads made the same run five times slower (measured on the 2-core development machine:
21.5 s with 1 thread, 101.7 s with 2, under a load of 6). So the commands use one thread
unless WATTCAP_TORCH_THREADS says otherwise (raise it for a large model trained on a quiet
CPU). GPU work is not affected. Set before torch loads (OMP_NUM_THREADS, inherited by worker
processes), or through torch when it is loaded already.
"""

from __future__ import annotations

import os
import sys

#: environment variable that sets the number of threads
THREADS_ENV = "WATTCAP_TORCH_THREADS"
DEFAULT_THREADS = 1


def configure_torch_threads() -> int:
    """Apply WATTCAP_TORCH_THREADS (default 1) and return the number of threads."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw and os.environ.get("OMP_NUM_THREADS"):
        raw = os.environ["OMP_NUM_THREADS"]  # the user's own setting wins over our default
    try:
        threads = max(1, int(raw)) if raw else DEFAULT_THREADS
    except ValueError:
        threads = DEFAULT_THREADS
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    else:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    return threads
