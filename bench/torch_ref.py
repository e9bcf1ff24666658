#!/usr/bin/env python3
"""bench/torch_ref.py - PyTorch's speed on pstrain's benchmark job, the
anchor make bench compares against (docs/PERFORMANCE.md).

The same job as `pstrain run --model mlp:H1,H2 --data fashion-mnist
--batch B --lr LR`: a 784-H1-H2-10 ReLU network, softmax cross-entropy,
plain SGD, a fresh random order each epoch, pixels / 255 as float32.

  torch_ref.py --workers 1 --steps N     one process, no DDP
  torch_ref.py --workers W --steps N     DDP (gloo) with W processes on
                                         this machine, batch B / W each
  torch_ref.py --workers W --bridge S --steps N
                                         the same torch model and steps
                                         through pstrain's servers in sync
                                         (pstrain.torch, S servers; SGD on
                                         the servers)

Every process uses one thread (as pstrain's do), unless --native: then
torch keeps its own thread count, as a user running one process on this
machine would (with OPENBLAS_NUM_THREADS unset by the caller, OpenBLAS
keeps its own too). The figure is training
time only: from a barrier before the first step to one after the last
(the bridge's: a multiprocessing barrier among its workers).
Prints "samples_per_s S train_s T final_loss L", as bench/solo does.
"""
import argparse
import gzip
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big")
             for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir):
    try:
        x = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))
        y = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))
    except OSError as e:
        sys.exit("torch_ref: %s (--data-dir)" % e)
    x = torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0)
    return x, torch.from_numpy(y.astype(np.int64))


def model(hidden):
    layers, d = [], 784
    for h in hidden:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    return nn.Sequential(*layers, nn.Linear(d, 10))


def train(rank, a, ret):
    if not a.native:
        torch.set_num_threads(1)
    ddp = a.workers > 1
    if ddp:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(a.port)
        dist.init_process_group("gloo", rank=rank, world_size=a.workers)
    x, y = load(a.data_dir)
    torch.manual_seed(a.seed)
    net = model(a.hidden)
    if ddp:
        net = nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(net.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    per = a.batch // a.workers
    spe = len(x) // a.batch
    gen = torch.Generator().manual_seed(a.seed)
    perm = None
    if ddp:
        dist.barrier()
    t0 = time.perf_counter()
    for t in range(a.steps):
        if t % spe == 0:
            perm = torch.randperm(len(x), generator=gen)
        lo = (t % spe) * a.batch + rank * per
        idx = perm[lo:lo + per]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x[idx]), y[idx])
        loss.backward()
        opt.step()
    if ddp:
        dist.barrier()
    secs = time.perf_counter() - t0
    if rank == 0:
        ret.put((secs, float(loss)))
    if ddp:
        dist.destroy_process_group()


def bridged(a, barrier, ret, ctx):
    """A worker of the bridge's job: train()'s loop, its update on the
    servers (ctx.ps.step())."""
    x, y = load(a.data_dir)
    loss_fn = nn.CrossEntropyLoss()
    per = a.batch // a.workers
    spe = len(x) // a.batch
    gen = torch.Generator().manual_seed(a.seed)
    perm = None
    barrier.wait()
    t0 = time.perf_counter()
    for t in range(a.steps):
        if t % spe == 0:
            perm = torch.randperm(len(x), generator=gen)
        lo = (t % spe) * a.batch + ctx.rank * per
        idx = perm[lo:lo + per]
        loss = loss_fn(ctx.model(x[idx]), y[idx])
        ctx.ps.zero_grad()
        loss.backward()
        ctx.ps.step()
    barrier.wait()
    if ctx.rank == 0:
        ret.put((time.perf_counter() - t0, float(loss)))


def bridge(a):
    import functools
    sys.path.insert(0, os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "..", "python"))
    import pstrain.torch
    ctx = mp.get_context("spawn")
    barrier, ret = ctx.Barrier(a.workers), ctx.SimpleQueue()
    pstrain.torch.launch(functools.partial(bridged, a, barrier, ret),
                         functools.partial(model, a.hidden),
                         servers=a.bridge, workers=a.workers, seed=a.seed,
                         mode="sync", lr=a.lr, batch=a.batch)
    return ret.get()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hidden", default="256,128")
    p.add_argument("--data-dir", default=DEBIAN_DIR)
    p.add_argument("--bridge", type=int, default=0, metavar="S",
                   help="through pstrain's S servers (pstrain.torch)")
    p.add_argument("--native", action="store_true",
                   help="torch's own thread count, not one thread")
    p.add_argument("--port", type=int, default=0,
                   help="DDP's rendezvous port (default: a free one)")
    a = p.parse_args()
    if a.workers < 1 or a.batch % a.workers:
        sys.exit("torch_ref: --batch must be a multiple of --workers")
    a.hidden = [int(h) for h in a.hidden.split(",")]
    if a.bridge > 0:
        secs, loss = bridge(a)
    elif a.workers == 1:
        q = [None]

        class Q:
            def put(self, v):
                q[0] = v
        train(0, a, Q())
        secs, loss = q[0]
    else:
        if a.port == 0:
            import socket
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                a.port = s.getsockname()[1]
        ctx = mp.get_context("spawn")
        ret = ctx.SimpleQueue()
        mp.spawn(train, args=(a, ret), nprocs=a.workers, join=True)
        secs, loss = ret.get()
    print("samples_per_s %.1f train_s %.3f final_loss %.4f"
          % (a.steps * a.batch / secs, secs, loss))


if __name__ == "__main__":
    main()
