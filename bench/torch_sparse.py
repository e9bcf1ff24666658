#!/usr/bin/env python3
"""bench/torch_sparse.py - PyTorch's speed on pstrain's sparse benchmark
job, the anchor make bench compares a sparse job against
(docs/PERFORMANCE.md).

The same job as `pstrain run --data ctr:... --model lr|fm:K --batch B
--lr LR` (optimizer sgd), in one process, on the same examples (the
training set bench/ctrdump wrote):

  lr     logistic regression: nn.EmbeddingBag(mode='sum', sparse=True) of
         one float per id over an example's F ids, and a bias;
  fm:K   the factorization machine: rows of 1 + K floats per id (its
         weight, then its factors) from nn.Embedding(sparse=True), the
         logit bias + sum of weights + ((sum of factors)^2 - sum of
         squared factors) / 2 (EmbeddingBag sums rows but cannot square
         them, so the rows are looked up one by one, as FM code in
         PyTorch does);

mean log loss, torch.optim.SGD (sparse gradients: only the touched rows
are updated), a fresh random order each epoch, initial rows uniform in
[-0.01, 0.01] for fm and 0 for lr, as pstrain's. The table holds the ids
the training set uses, renumbered densely before the clock starts (what a
PyTorch user would do; a table of every possible id would be larger and
no faster).

  torch_sparse.py --dump FILE --examples N --fields F --model fm:15 \\
      --batch 256 --lr 0.1 --steps 600

One thread. The figure is training time only, from before the first
step to after the last. Prints "samples_per_s S train_s T final_loss L",
as bench/torch_ref.py does.
"""
import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn as nn


class LR(nn.Module):
    def __init__(self, n_ids):
        super().__init__()
        self.w = nn.EmbeddingBag(n_ids, 1, mode="sum", sparse=True)
        nn.init.zeros_(self.w.weight)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        return self.w(ids).squeeze(1) + self.bias


class FM(nn.Module):
    def __init__(self, n_ids, k):
        super().__init__()
        self.k = k
        self.rows = nn.Embedding(n_ids, 1 + k, sparse=True)
        nn.init.uniform_(self.rows.weight, -0.01, 0.01)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        r = self.rows(ids)  # (B, F, 1 + k)
        w, v = r[:, :, 0], r[:, :, 1:]
        s = v.sum(1)
        pairs = (s * s - (v * v).sum(1)).sum(1) / 2
        return self.bias + w.sum(1) + pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True, help="bench/ctrdump's file")
    ap.add_argument("--examples", type=int, required=True)
    ap.add_argument("--fields", type=int, required=True)
    ap.add_argument("--model", default="fm:15")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    n, f = a.examples, a.fields
    raw = np.fromfile(a.dump, dtype=np.uint8)
    if len(raw) != n * f * 8 + n:
        raise SystemExit("torch_sparse: %s: %d bytes, not %d examples of "
                         "%d fields" % (a.dump, len(raw), n, f))
    ids = raw[:n * f * 8].view(np.uint64).reshape(n, f)
    y = torch.from_numpy(raw[n * f * 8:].astype(np.float32))
    uniq, dense = np.unique(ids, return_inverse=True)
    x = torch.from_numpy(dense.reshape(n, f).astype(np.int64))
    if a.model == "lr":
        m = LR(len(uniq))
    elif a.model.startswith("fm:"):
        m = FM(len(uniq), int(a.model[3:]))
    else:
        raise SystemExit("torch_sparse: --model %s: lr or fm:K" % a.model)
    opt = torch.optim.SGD(m.parameters(), lr=a.lr)
    loss_fn = nn.BCEWithLogitsLoss()
    g = torch.Generator().manual_seed(a.seed)
    order, pos, loss = torch.randperm(n, generator=g), 0, float("nan")
    t0 = time.perf_counter()
    for _ in range(a.steps):
        if pos + a.batch > n:
            order, pos = torch.randperm(n, generator=g), 0
        b = order[pos:pos + a.batch]
        pos += a.batch
        opt.zero_grad()
        out = loss_fn(m(x[b]), y[b])
        out.backward()
        opt.step()
        loss = out.item()
    t = time.perf_counter() - t0
    print("samples_per_s %.1f train_s %.3f final_loss %.6f"
          % (a.steps * a.batch / t, t, loss))


if __name__ == "__main__":
    main()
