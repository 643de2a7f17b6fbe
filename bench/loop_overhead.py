"""Our training loop (device execution, power sampling, watchdog, accounting) vs a plain PyTorch
loop on the same model, data, batch order and evaluation cadence, measured side by side in one
run (interleaved repetitions, median). Prints the throughput ratio; goal ≥ 0.98.

    python bench/loop_overhead.py [--model digits32-cnn] [--data digits-32] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice
from wattcap.models import get_model_spec
from wattcap.training import BatchStream, TrainConfig, evaluate, train_to_accuracy


def plain_loop(model_name: str, train, test, batch_size: int, samples: int, seed: int) -> float:
    """The same math with nothing around it; returns wall seconds."""
    start = time.perf_counter()  # setup included, as in train_to_accuracy
    spec = get_model_spec(model_name)
    torch.manual_seed(seed)
    model = spec.build(num_classes=train.num_classes).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * (batch_size / 32) ** 0.5)
    x, y = train.to_tensors()
    xt, yt = test.to_tensors()
    stream = BatchStream(len(train), seed)
    for position in range(0, samples, batch_size):
        idx = torch.from_numpy(stream.indices(position, batch_size))
        optimizer.zero_grad(set_to_none=True)
        spec.loss(model(x[idx]), y[idx]).backward()
        optimizer.step()
    evaluate(model, spec, xt, yt)
    return time.perf_counter() - start


def our_loop(model_name: str, train, test, batch_size: int, samples: int, seed: int) -> float:
    """train_to_accuracy on the emulated Nano with a cap (watchdog on); returns wall seconds."""
    config = TrainConfig(model=model_name, batch_size=batch_size, target_accuracy=1.0,
                         sample_budget=samples, eval_every_samples=samples, seed=seed)
    device = EmulatedDevice("jetson-nano")
    start = time.perf_counter()
    train_to_accuracy(config, train, test, device=device, power_cap_w=5.0)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="digits32-cnn")
    parser.add_argument("--data", default="digits-32")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    train, test = get_dataset(args.data).split(0.2, seed=0)
    # Workload measurement and imports are one-time costs: warm both paths first.
    our_loop(args.model, train, test, args.batch_size, args.batch_size * 4, 0)
    plain_loop(args.model, train, test, args.batch_size, args.batch_size * 4, 0)
    plain, ours = [], []
    for repeat in range(args.repeats):
        plain.append(plain_loop(args.model, train, test, args.batch_size, args.samples, repeat))
        ours.append(our_loop(args.model, train, test, args.batch_size, args.samples, repeat))
    p, o = statistics.median(plain), statistics.median(ours)
    print(f"model {args.model}, b={args.batch_size}, {args.samples} samples, "
          f"{args.repeats} interleaved repeats (median)")
    print(f"plain PyTorch loop : {args.samples / p:8.1f} samples/s")
    print(f"wattcap loop       : {args.samples / o:8.1f} samples/s")
    print(f"throughput ratio (wattcap / plain): {p / o:.3f}   (goal >= 0.98)")


if __name__ == "__main__":
    main()
