#!/usr/bin/env python3
"""pstrain's own CNN trained through the Python binding only.

The job declares pstrain's model (Job.model: the same variables and
initial values as `pstrain run --model cnn:8,16`), and each worker
computes its slice's loss and gradient with pstrain.Net, pushing it with
one pushpull over the whole key space, as pstrain's own workers do. The
servers and workers are processes started here (fashion_tanh.py's
launcher). Worker 0 reports validation accuracy on 5,000 held-out
training examples each epoch and, once, test accuracy.

    python3 fashion_cnn.py --model cnn:8,16 --servers 1 --workers 2 --epochs 2

The binding is the package in python/ (python3 -m pip install ./python, or
PYTHONPATH=python); it finds the library as its docstring says.
"""
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import fashion_tanh as ft  # noqa: E402
import pstrain  # noqa: E402

CHUNK = 500  # rows a Net evaluates at once


def make_job(a):
    j = pstrain.Job(mode=a.mode, servers=a.servers, workers=a.workers,
                    batch=a.batch, lr=a.lr, seed=a.seed)
    j.model(a.model, 784, 10)
    return j


def accuracy(net, p, x, y):
    right = 0
    for i in range(0, len(y), CHUNK):
        right += net.eval(p, x[i:i + CHUNK], y[i:i + CHUNK])[1]
    return right / len(y)


def work(a, rank, urls):
    job = make_job(a)
    xt, yt, xv, yv = ft.split(a)
    spe = len(yt) // a.batch
    steps = min(a.epochs * spe, a.steps or a.epochs * spe)
    net = pstrain.Net(job, max(a.batch // a.workers, CHUNK))
    params = np.zeros(net.size, np.float32)
    g = np.zeros(net.size, np.float32)
    w = pstrain.Worker(job, rank, urls)
    w.pull(pstrain.ALL, params).wait()
    t0, loss = time.time(), float("nan")
    for t in range(w.start, steps):
        idx = ft.my_slice(a, rank, t, len(yt))
        _, loss = net.grad(params, xt[idx], yt[idx], out=g)
        w.pushpull(t, pstrain.ALL, g, params).wait()
        if rank == 0 and ((t + 1) % spe == 0 or t + 1 == steps):
            print("worker 0: step %d loss %.4f val acc %.4f (%.1fs)" % (
                t + 1, loss, accuracy(net, params, xv, yv),
                time.time() - t0), flush=True)
    st = w.stats()
    if rank == 0:
        w.pull(pstrain.ALL, params).wait()
        xs, ys = ft.load(a.data, "t10k")
        res = {"model": a.model, "mode": a.mode, "servers": a.servers,
               "workers": a.workers, "steps": steps, "final_loss": loss,
               "val_acc": accuracy(net, params, xv, yv),
               "test_acc": accuracy(net, params, xs, ys),
               "updates": st["updates"], "seconds": time.time() - t0}
        ft.report(a, res)
    w.done()
    w.close()


def main():
    p = ft.options(__doc__)
    p.add_argument("--model", default="cnn:8,16")
    p.add_argument("--steps", type=int, default=0,
                   help="stop after this many steps (0: --epochs)")
    ft.launch(p.parse_args(), make_job, work)


if __name__ == "__main__":
    main()
