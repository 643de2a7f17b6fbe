"""Large image folders: first load (decode every PNG into the uint8 cache) and second load
(memory-map the cache), each in a fresh process: wall time to the first training batch and
memory (peak RSS, and at the end its anonymous and file-backed parts). Goal: a CINIC-10-sized
folder (270,000 32×32 RGB PNGs) within about 1 GB and a second run that starts in seconds.

    python bench/image_cache.py [--images 270000] [--folder DIR] [--keep]

Without --folder it writes a CINIC-10-like folder (train/<10 classes>/*.png, smooth random
images that compress like photos) into a temp folder first; its generation time is not part
of the measurement. Then two runs of: load_splits("imagefolder:DIR", subset_fraction=0.25)
(the paper's quarter of CINIC-10), one pass of 100 batches of 128 through the loader.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck")


def _write_some(args: tuple[Path, int, int]) -> None:
    from PIL import Image

    folder, start, stop = args
    rng = np.random.default_rng(start)
    for i in range(start, stop):
        coarse = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
        img = Image.fromarray(coarse).resize((32, 32), Image.Resampling.BILINEAR)
        noisy = np.clip(np.asarray(img, np.int16) + rng.integers(-8, 9, (32, 32, 3)), 0, 255)
        path = folder / "train" / CLASSES[i % 10] / f"{i:06d}.png"
        Image.fromarray(noisy.astype(np.uint8)).save(path)


def generate(folder: Path, n: int) -> float:
    for cls in CLASSES:
        (folder / "train" / cls).mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    step = 5000
    jobs = [(folder, s, min(n, s + step)) for s in range(0, n, step)]
    with multiprocessing.Pool(max(1, multiprocessing.cpu_count())) as pool:
        pool.map(_write_some, jobs)
    return time.monotonic() - start


_RUN = r"""
import json, sys, time
t0 = time.monotonic()
import numpy as np, torch
torch.set_num_threads(1)
from wattcap.data import load_splits
from wattcap.data.loader import StreamBatches, iterate_batches
from wattcap.train.loop import BatchStream
t_import = time.monotonic() - t0
t1 = time.monotonic()
train, test = load_splits("imagefolder:" + sys.argv[1], subset_fraction=0.25)
t_load = time.monotonic() - t1
batches = StreamBatches(BatchStream(len(train), 0), 0, 128, 100)
it = iterate_batches(train, batches, num_workers=2)
x, y = next(it)
t_first = time.monotonic() - t1
for x, y in it:
    pass
t_pass = time.monotonic() - t1
status = {k: int(v.split()[0]) for k, v in (
    line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile")}
print(json.dumps({"import_s": t_import, "load_s": t_load, "first_batch_s": t_first,
                  "100_batches_s": t_pass, "train": len(train), "test": len(test),
                  "memmap": isinstance(train.images, np.memmap),
                  "peak_rss_mb": status["VmHWM"] / 1024, "rss_mb": status["VmRSS"] / 1024,
                  "anon_mb": status["RssAnon"] / 1024, "file_mb": status["RssFile"] / 1024}))
"""


def run_once(folder: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _RUN, str(folder)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=270_000)
    parser.add_argument("--folder", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the generated folder")
    args = parser.parse_args()
    folder = args.folder
    made = folder is None
    if made:
        folder = Path(tempfile.mkdtemp(prefix="wattcap-cinic-"))
        seconds = generate(folder, args.images)
        print(f"wrote {args.images} PNGs to {folder} in {seconds:.0f} s (not measured)")
    try:
        for label in ("first run (decode + write cache)", "second run (memory-mapped cache)"):
            r = run_once(folder)
            print(f"{label}: load {r['load_s']:.1f} s, first batch after {r['first_batch_s']:.1f}"
                  f" s, 100 batches of 128 after {r['100_batches_s']:.1f} s (imports "
                  f"{r['import_s']:.1f} s); train/test {r['train']}/{r['test']}, memmap "
                  f"{r['memmap']}; peak RSS {r['peak_rss_mb']:.0f} MB, at the end "
                  f"{r['rss_mb']:.0f} MB = {r['anon_mb']:.0f} anonymous + {r['file_mb']:.0f} "
                  "file-backed")
    finally:
        if made and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
