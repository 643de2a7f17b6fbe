"""Train your own model, in your own plain PyTorch loop, through a `wattcap.Session`.

The model below is defined here and nowhere else; the data come through an ordinary
`DataLoader`. The Session profiles the model on the device (once: the profile is cached),
chooses the batch size and GPU frequency for the power cap, applies the frequency, watches the
cap, and leaves a run record; the device is restored however the loop ends.

Runs anywhere on the emulated Jetson Nano (about a minute on 2 CPU cores):

    python examples/train_your_own_model.py [--device jetson] [--power-cap 2.7]

On a Jetson, run it as root (or with the udev rule of docs/hardware.md) with `--device jetson`.
"""

from __future__ import annotations

import argparse

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import wattcap
from wattcap.runtime.session_config import Goal, PlanSettings


class MyNet(nn.Module):
    """A small CNN for 8x8 digits: your model goes here."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Linear(32 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def digits() -> tuple[TensorDataset, TensorDataset]:
    """scikit-learn's bundled digits, 80/20 split: stands for your own data."""
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(data.target)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    cut = int(0.8 * len(x))
    return (TensorDataset(x[order[:cut]], y[order[:cut]]),
            TensorDataset(x[order[cut:]], y[order[cut:]]))


@torch.no_grad()
def accuracy(net: nn.Module, data: TensorDataset, session: wattcap.Session) -> float:
    net.eval()
    x, y = session.to_device(*data.tensors)
    correct = (net(x).argmax(1) == y).float().mean().item()
    net.train()
    return correct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="emulated:jetson-nano")
    parser.add_argument("--power-cap", type=float, default=2.7, help="watts")
    parser.add_argument("--target-accuracy", type=float, default=0.95)
    parser.add_argument("--checkpoint-dir", default=None)
    args = parser.parse_args()

    train, test = digits()
    net = MyNet()
    with wattcap.Session(args.device, model=net, model_name="my-net",
                         example_input=train.tensors[0][:8], planning=PlanSettings(profile="auto"),
                         cap=args.power_cap,
                         goal=Goal(target_accuracy=args.target_accuracy, sample_budget=50_000),
                         checkpoint=args.checkpoint_dir) as session:
        print(f"plan: batch size {session.batch_size} at {session.frequency_hz / 1e6:.1f} MHz, "
              f"learning rate {session.learning_rate:.2e} (cap {args.power_cap:g} W)")
        net = session.prepare(net)
        optimizer = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
        session.attach(net, optimizer)  # with --checkpoint-dir: resumes an interrupted run
        loader = DataLoader(train, batch_size=session.batch_size, shuffle=True, drop_last=True)
        while not session.done:
            for x, y in loader:
                x, y = session.to_device(x, y)
                with session.step():
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(net(x), y).backward()
                    optimizer.step()
            session.report(accuracy(net, test, session))  # once per epoch
            print(f"  {session.samples:6d} samples: accuracy {session.curve[-1].accuracy:.1%}")

    record = session.record
    assert record is not None
    after = ("not reached" if record.samples_to_target is None
             else f"{record.samples_to_target:.0f} samples")  # interpolated: a fraction
    print(f"reached {args.target_accuracy:.0%}: {record.reached}, after {after}, "
          "time-to-accuracy "
          f"{record.time_to_accuracy_s or float('nan'):.1f} s (device), energy "
          f"{record.energy_j:.0f} J, peak {record.peak_power_w or 0:.2f} W vs cap "
          f"{args.power_cap:g} W, {len(record.cap_violations)} cap violations")


if __name__ == "__main__":
    main()
