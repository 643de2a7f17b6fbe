"""Our training loop (device execution, power sampling, watchdog, accounting) and a user's own
loop driven by a `wattcap.Session`, each against a plain PyTorch loop on the same model, data,
batch order and evaluation cadence, measured side by side in one run (interleaved repetitions,
median). Prints the throughput ratios; goal ≥ 0.98 for both.

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
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import PlanSettings
from wattcap.train.loop import BatchStream, TrainConfig, evaluate, train_to_accuracy


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


def session_loop(model_name: str, train, test, batch_size: int, samples: int, seed: int
                 ) -> float:
    """The plain loop as a user would wrap it: their model and optimiser, `session.step()`
    around each optimiser step, on the emulated Nano with a cap; returns wall seconds."""
    start = time.perf_counter()
    spec = get_model_spec(model_name)
    torch.manual_seed(seed)
    model = spec.build(num_classes=train.num_classes).train()
    device = EmulatedDevice("jetson-nano")
    with Session(device, model=model, example_input=train.to_tensors()[0][:batch_size],
                 planning=PlanSettings(batch_size=batch_size,
                                       frequency_hz=device.frequencies_hz()[-1], lr_ref=1e-3,
                                       batch_size_ref=32),
                 cap=5.0) as session:
        model = session.prepare(model)
        optimizer = torch.optim.Adam(model.parameters(), lr=session.learning_rate)
        x, y = train.to_tensors()
        xt, yt = test.to_tensors()
        stream = BatchStream(len(train), seed)
        for position in range(0, samples, batch_size):
            idx = torch.from_numpy(stream.indices(position, batch_size))
            inputs, targets = session.to_device(x[idx], y[idx])
            with session.step():
                optimizer.zero_grad(set_to_none=True)
                spec.loss(model(inputs), targets).backward()
                optimizer.step()
        session.report(evaluate(model, spec, xt, yt))
    return time.perf_counter() - start


SESSION_LOOP = "Session in a user's loop"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="digits32-cnn")
    parser.add_argument("--data", default="digits-32")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1, as wattcap's commands: with 2 on 2 cores the "
                        "loops' ratios swung by +-20 %% from run to run)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train, test = get_dataset(args.data).split(0.2, seed=0)
    # Workload measurement and imports are one-time costs: warm both paths first.
    loops = {"plain PyTorch loop": plain_loop, "wattcap loop": our_loop,
             SESSION_LOOP: session_loop}
    times: dict[str, list[float]] = {name: [] for name in loops}
    for loop in loops.values():
        loop(args.model, train, test, args.batch_size, args.batch_size * 4, 0)
    for repeat in range(args.repeats):
        for name, loop in loops.items():
            times[name].append(loop(args.model, train, test, args.batch_size, args.samples,
                                    repeat))
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"model {args.model}, b={args.batch_size}, {args.samples} samples, "
          f"{args.repeats} interleaved repeats (median)")
    for name, seconds in median.items():
        print(f"{name:26s}: {args.samples / seconds:8.1f} samples/s")
    plain = median["plain PyTorch loop"]
    print(f"throughput ratio (wattcap loop / plain): {plain / median['wattcap loop']:.3f}   "
          "(goal >= 0.98)")
    print(f"throughput ratio (Session user loop / plain): "
          f"{plain / median[SESSION_LOOP]:.3f}   "
          "(goal >= 0.98)")


if __name__ == "__main__":
    main()
