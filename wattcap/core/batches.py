"""The batch sizes wattcap considers, in a module that imports nothing heavy (no torch), so the
command line and the profile file format can name them without loading a model library."""

from __future__ import annotations

#: batch sizes wattcap considers: powers of two, 4 to 128 (DESIGN §1)
DEFAULT_BATCH_SIZES: tuple[int, ...] = (4, 8, 16, 32, 64, 128)
