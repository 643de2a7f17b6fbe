"""Would the target's gradient noise scale tell a wrong proxy apart? The same model (digits32-cnn
pre-trained on digits 0-4) fine-tuned at b = 32 on the target and on each bundled proxy, the
gradient noise scale B_simple (McCandlish et al. 2018, Adam-preconditioned, from 4 chunks of
each batch: `wattcap.runtime.noise_scale`) read every 1,024 samples over the first 8,192.

The large-batch fits of `bench/noise_scale_by_target.py` put the target's B_noise at 23-40 and
the proxies' at 68-114: a method that corrects the proxy with the target's own noise scale needs
B_simple to differ between them by about that factor, early in the run.

    python bench/noise_scale_transfer.py [--weights FILE] [--batch-size 32] [--samples 8192]

Prints B_simple [95 % interval] per dataset and sample count, and the target's over each
proxy's at the same sample count.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from wattcap.experiments.compare import dataset_splits
from wattcap.models import get_model_spec
from wattcap.models.weights import load_weights
from wattcap.runtime.noise_scale import GradientNoiseScale
from wattcap.train.loop import BatchStream, pretrain

MODEL = "digits32-cnn"
TARGET = "digits-5-9-32"
PROXIES = ("digits-rotated-32", "digits-32", "shapes-32")
EVERY = 1024


def trajectory(dataset: str, weights: Path, batch_size: int, samples: int
               ) -> list[tuple[int, float | None, float | None, float | None]]:
    """(samples, B_simple, low, high) every EVERY samples of a fine-tuning run."""
    spec = get_model_spec(MODEL)
    train, _ = dataset_splits(dataset)
    torch.manual_seed(0)
    net = spec.build(num_classes=train.num_classes)
    load_weights(net, weights, expect_model=MODEL, new_head_classes=train.num_classes)
    optimizer = torch.optim.Adam(net.parameters(), lr=5e-4 * (batch_size / 128) ** 0.5)
    gns = GradientNoiseScale(net, optimizer, chunk_size=batch_size // 4)
    stream, seen, out = BatchStream(len(train), 0), 0, []
    while seen < samples:
        x, y = train.batch(stream.indices(seen, batch_size))
        inputs = torch.from_numpy(np.ascontiguousarray(x))
        targets = torch.from_numpy(np.ascontiguousarray(y))
        optimizer.zero_grad()
        gns.backward(lambda a, t: spec.loss(net(a), t), inputs, targets)
        optimizer.step()
        seen += batch_size
        if seen % EVERY == 0:
            estimate = gns.estimate()
            out.append((seen, estimate.b_noise, estimate.b_noise_low, estimate.b_noise_high))
    return out


def _text(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, default=None,
                        help="digits32-cnn weights (default: pre-trained here on digits-0-4-32)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--samples", type=int, default=8192)
    args = parser.parse_args()
    weights = args.weights
    if weights is None:
        weights = Path(tempfile.mkdtemp(prefix="wattcap-gns-")) / "pretrained.safetensors"
        pretrain(MODEL, "digits-0-4-32", weights, epochs=3)
    runs = {d: trajectory(d, weights, args.batch_size, args.samples)
            for d in (TARGET, *PROXIES)}
    counts = [s for s, *_ in runs[TARGET]]
    print(f"B_simple [95 % interval] at b = {args.batch_size}, by samples trained")
    print(f"{'dataset':18} " + " ".join(f"{s:>14}" for s in counts))
    for dataset, points in runs.items():
        cells = [f"{_text(b)} [{_text(lo)},{_text(hi)}]" for _, b, lo, hi in points]
        print(f"{dataset:18} " + " ".join(f"{cell:>14}" for cell in cells))
    print("\nthe target's B_simple over each proxy's, at the same samples")
    for proxy in PROXIES:
        ratios = [f"{t[1] / p[1]:.2f}" if t[1] and p[1] else "-"
                  for t, p in zip(runs[TARGET], runs[proxy], strict=True)]
        print(f"{proxy:18} " + " ".join(f"{r:>14}" for r in ratios))


if __name__ == "__main__":
    main()
