#!/usr/bin/env python3
"""A PyTorch MLP on Fashion-MNIST, trained through pstrain's servers.

The model is torch's (nn.Sequential of Linear and ReLU, torch's own
initialisation), its forward and backward pass torch's; pstrain holds the
parameters on its servers and applies the optimizer there
(pstrain.torch). Each worker computes on its B / W rows of every global
batch; worker 0 evaluates on 5,000 held-out training examples
(validation) --evals-per-epoch times an epoch and once on the test set at
the end, and writes OUT/result.json.

    python3 -m pip install ./python      # once (or PYTHONPATH=python)
    python3 examples/torch/fashion_mlp.py --mode async --servers 1 --workers 2 --epochs 2 --out runs/torch

--mode async trains at the per-example-matched rate (lr / W an update).
OUT gets what `pstrain run` leaves: each worker's worker-R.csv, eval.csv
(worker 0's evaluations), final.csv, server-R.json and summary.json, so
that `pstrain dashboard OUT` shows the run.
"""
import argparse
import functools
import gzip
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402

import pstrain.torch as pt  # noqa: E402

VAL = 5000  # training examples held out for validation


def load(data, kind):
    with gzip.open(os.path.join(data, kind + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16)
    with gzip.open(os.path.join(data, kind + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    x = torch.from_numpy(x.reshape(len(y), 784).astype(np.float32) / 255)
    return x, torch.from_numpy(y.astype(np.int64))


def make_model(hidden):
    layers, width = [], 784
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def evaluate(ctx, xv, yv, epoch, say):
    """Worker 0's evaluation of the values it holds on the validation
    set, into eval.csv; printed at an epoch's end."""
    t = time.perf_counter()
    with torch.no_grad():
        z = ctx.model(xv)
        loss = torch.nn.functional.cross_entropy(z, yv).item()
        acc = (z.argmax(1) == yv).float().mean().item()
    ctx.ps.record_eval(loss, acc, time.perf_counter() - t)
    if say:
        print("worker 0: epoch %d validation loss %.4f accuracy %.4f" %
              (epoch + 1, loss, acc), flush=True)
    return {"epoch": epoch + 1, "step": ctx.ps.step_count, "val_loss": loss,
            "val_acc": acc}


def train(a, ctx):
    x, y = load(a.data, "train")
    perm = torch.from_numpy(np.random.default_rng(a.seed).permutation(len(y)))
    xv, yv = x[perm[:VAL]], y[perm[:VAL]]
    xt, yt = x[perm[VAL:]], y[perm[VAL:]]
    spe = len(yt) // a.batch
    evals = []
    ctx.ready()  # every worker's data loaded: training starts together
    for e in range(a.epochs):
        order = torch.from_numpy(
            np.random.default_rng(a.seed + e).permutation(len(yt)))
        for i in range(spe):
            idx = ctx.shard(order[i * a.batch:(i + 1) * a.batch])
            loss = torch.nn.functional.cross_entropy(ctx.model(xt[idx]),
                                                     yt[idx])
            ctx.ps.zero_grad()
            loss.backward()
            ctx.ps.step(loss.item())
            if ctx.rank == 0 and (i + 1) % (spe // a.evals_per_epoch) == 0:
                evals.append(evaluate(ctx, xv, yv, e, i + 1 == spe))
    if ctx.rank == 0:
        xs, ys = load(a.data, "t10k")
        with torch.no_grad():
            z = ctx.model(xs)
            test_loss = torch.nn.functional.cross_entropy(z, ys).item()
        ctx.ps.final(test_loss, accuracy(ctx.model, xs, ys))
        out = {"mode": a.mode, "servers": a.servers, "workers": a.workers,
               "batch": a.batch, "lr": a.lr, "optimizer": a.optimizer,
               "epochs": a.epochs,
               "hidden": a.hidden, "seed": a.seed, "evals": evals,
               "test_acc": accuracy(ctx.model, xs, ys),
               "gradients_copied": ctx.ps.copies}
        with open(os.path.join(a.out, "result.json"), "w") as f:
            json.dump(out, f, indent=1)
        print("worker 0: test accuracy %.4f" % out["test_acc"], flush=True)


def main(make=make_model, hidden="256,128", doc=__doc__):
    """Parses the flags and runs the job of the model make(widths) builds
    (fashion_cnn.py runs its CNN through here)."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--mode", default="sync", help="sync, async or ssp")
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=256, help="global batch")
    p.add_argument("--lr", type=float, default=0.4,
                   help="the servers' rate for the global batch")
    p.add_argument("--optimizer", default="sgd",
                   help="the servers' optimizer: sgd, momentum:M, adam, ...")
    p.add_argument("--hidden", default=hidden,
                   help="hidden layers' widths, comma-separated")
    p.add_argument("--staleness", type=int, default=0, help="ssp's bound")
    p.add_argument("--evals-per-epoch", type=int, default=4,
                   help="worker 0's evaluations on the validation set")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--out", default="runs/torch")
    p.add_argument("--tensorboard", default="",
                   help="also write TensorBoard event files into this folder")
    a = p.parse_args()
    a.hidden = [int(h) for h in a.hidden.split(",") if h]
    if a.batch % a.workers:
        p.error("--batch %d is not a multiple of --workers %d" %
                (a.batch, a.workers))
    os.makedirs(a.out, exist_ok=True)
    options = {"mode": a.mode, "lr": a.lr, "batch": a.batch,
               "optimizer": a.optimizer, "out": a.out}
    if a.mode == "async":
        options["matched_lr"] = True
    if a.mode == "ssp":
        options["staleness"] = a.staleness
    if a.tensorboard:
        options["tensorboard"] = a.tensorboard
    pt.launch(functools.partial(train, a),
              functools.partial(make, a.hidden), servers=a.servers,
              workers=a.workers, seed=a.seed, **options)


if __name__ == "__main__":
    main()
