#!/usr/bin/env python3
"""A NumPy model trained through pstrain's Python binding only.

A tanh network 784-H-10 (pstrain's own MLP uses ReLU) on Fashion-MNIST,
its forward and backward pass in NumPy. The servers and workers are
processes started here; each worker computes on its slice of every
global batch and pushes its gradient with one pushpull over the whole
key space, its parameters and gradient being one float32 array each that
pstrain reads and writes in place (the variables are views into it).
Worker 0 then reports accuracy on 5,000 held-out training examples
(validation) and, once, on the test set.

    python3 fashion_tanh.py --mode sync --servers 2 --workers 2 --epochs 2

The binding is the package in python/ (python3 -m pip install ./python, or
PYTHONPATH=python); it finds the library as its docstring says.
"""
import argparse
import gzip
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

# One OpenBLAS thread per process (NumPy's), set before NumPy starts it:
# the job's processes share the cores.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

import pstrain  # noqa: E402

VAL = 5000  # training examples held out for validation


def load(data, kind):
    with gzip.open(os.path.join(data, kind + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16)
    with gzip.open(os.path.join(data, kind + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return (x.reshape(len(y), 784) / np.float32(255)).astype(np.float32), y


def make_job(a):
    h = a.hidden
    return pstrain.Job(
        [("w1", 784 * h, 784 ** -0.5), ("b1", h, 0.0),
         ("w2", h * 10, h ** -0.5), ("b2", 10, 0.0)],
        mode=a.mode, servers=a.servers, workers=a.workers, batch=a.batch,
        lr=a.lr, seed=a.seed)


def views(flat, h):
    """The model's variables as views into one flat array, in the order
    the job declares them (pstrain lays them end to end)."""
    w1 = flat[:784 * h].reshape(784, h)
    b1 = flat[784 * h:784 * h + h]
    w2 = flat[785 * h:795 * h].reshape(h, 10)
    b2 = flat[795 * h:795 * h + 10]
    return w1, b1, w2, b2


def grad(p, g, x, y, h):
    """Mean cross-entropy loss of the batch; its gradient into g."""
    w1, b1, w2, b2 = views(p, h)
    gw1, gb1, gw2, gb2 = views(g, h)
    a = np.tanh(x @ w1 + b1)
    z = a @ w2 + b2
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e / e.sum(axis=1, keepdims=True)
    loss = -np.log(s[np.arange(len(y)), y] + 1e-12).mean()
    dz = s
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)
    gw2[:] = a.T @ dz
    gb2[:] = dz.sum(axis=0)
    da = (dz @ w2.T) * (1 - a * a)
    gw1[:] = x.T @ da
    gb1[:] = da.sum(axis=0)
    return float(loss)


def accuracy(p, x, y, h):
    w1, b1, w2, b2 = views(p, h)
    return float(((np.tanh(x @ w1 + b1) @ w2 + b2).argmax(1) == y).mean())


def serve(make_job, a, rank, url):
    s = pstrain.Server(make_job(a), rank, url)
    s.serve()
    s.close()


def split(a):
    """The training set less VAL held-out examples, and those: (xt, yt,
    xv, yv), the same in every process of the job."""
    x, y = load(a.data, "train")
    perm = np.random.default_rng(a.seed).permutation(len(y))
    return x[perm[VAL:]], y[perm[VAL:]], x[perm[:VAL]], y[perm[:VAL]]


def my_slice(a, rank, t, n):
    """Indices of worker rank's slice of global step t's batch, over a
    training set of n examples reshuffled every epoch."""
    b = a.batch // a.workers
    e, i = divmod(t, n // a.batch)
    order = np.random.default_rng(a.seed + e).permutation(n)
    return order[i * a.batch + rank * b:i * a.batch + (rank + 1) * b]


def work(a, rank, urls):
    job = make_job(a)
    xt, yt, xv, yv = split(a)
    spe = len(yt) // a.batch
    steps = a.epochs * spe
    n = sum(job.sizes)
    params = np.zeros(n, np.float32)
    g = np.zeros(n, np.float32)
    w = pstrain.Worker(job, rank, urls)
    w.pull(pstrain.ALL, params).wait()
    t0, loss = time.time(), float("nan")
    for t in range(w.start, steps):
        idx = my_slice(a, rank, t, len(yt))
        loss = grad(params, g, xt[idx], yt[idx], a.hidden)
        w.pushpull(t, pstrain.ALL, g, params).wait()
        if rank == 0 and (t + 1) % spe == 0:
            print("worker 0: epoch %d loss %.4f val acc %.4f (%.1fs)" % (
                (t + 1) // spe, loss, accuracy(params, xv, yv, a.hidden),
                time.time() - t0), flush=True)
    st = w.stats()
    if rank == 0:
        w.pull(pstrain.ALL, params).wait()
        xs, ys = load(a.data, "t10k")
        res = {"mode": a.mode, "servers": a.servers, "workers": a.workers,
               "steps": steps, "final_loss": loss,
               "val_acc": accuracy(params, xv, yv, a.hidden),
               "test_acc": accuracy(params, xs, ys, a.hidden),
               "updates": st["updates"], "stale_mean": st["stale_mean"],
               "seconds": time.time() - t0}
        report(a, res)
    w.done()
    w.close()


def report(a, res):
    """Prints worker 0's result as JSON, and writes it to --out."""
    print(json.dumps(res), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)


def options(doc):
    """The job's command-line options, shared with fashion_cnn.py."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--mode", default="sync", choices=["sync", "async", "ssp"])
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--out", default="", help="write the result as JSON")
    return p


def main():
    p = options(__doc__)
    p.add_argument("--hidden", type=int, default=64)
    launch(p.parse_args(), make_job, work)


def launch(a, make_job, work):
    """Starts a.servers servers of make_job(a) and a.workers work(a, rank,
    urls) processes on ipc addresses of a folder of their own, waits for
    them, and exits 1 if any failed."""
    if a.batch % a.workers:
        sys.exit("--batch must be a multiple of --workers")
    # One secret for the job's processes, in their environment.
    os.environ.setdefault("PSTRAIN_SECRET", os.urandom(32).hex())
    d = tempfile.mkdtemp(prefix="pstrain-py-")
    urls = ["ipc://%s/server-%d" % (d, i) for i in range(a.servers)]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=serve, args=(make_job, a, i, u))
             for i, u in enumerate(urls)]
    procs += [ctx.Process(target=work, args=(a, r, urls))
              for r in range(a.workers)]
    for q in procs:
        q.start()
    for q in procs:
        q.join()
    for i in range(a.servers):
        try:
            os.unlink("%s/server-%d" % (d, i))
        except OSError:
            pass
    os.rmdir(d)
    bad = [q.exitcode for q in procs if q.exitcode != 0]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
