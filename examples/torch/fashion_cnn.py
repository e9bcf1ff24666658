#!/usr/bin/env python3
"""A PyTorch CNN on Fashion-MNIST, trained through pstrain's servers.

Two 3x3 convolutions (--hidden C1,C2 channels, each with ReLU and a 2x2
max-pool) and a linear layer, torch's own layers and initialisation;
everything else as examples/torch/fashion_mlp.py, whose flags it takes.

    python3 examples/torch/fashion_cnn.py --mode sync --servers 1 --workers 2 --epochs 2 --out runs/torch-cnn
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import fashion_mlp  # noqa: E402


def make_cnn(channels):
    layers, c, side = [torch.nn.Unflatten(1, (1, 28, 28))], 1, 28
    for k in channels:
        layers += [torch.nn.Conv2d(c, k, 3, padding=1), torch.nn.ReLU(),
                   torch.nn.MaxPool2d(2)]
        c, side = k, side // 2
    return torch.nn.Sequential(*layers, torch.nn.Flatten(),
                               torch.nn.Linear(c * side * side, 10))


if __name__ == "__main__":
    fashion_mlp.main(make_cnn, "16,32", __doc__)
