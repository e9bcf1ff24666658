"""tests/torch_check.py CASE OUT - the torch bridge (pstrain.torch) against
plain PyTorch; tests/torch_test.sh runs each case in its own process.

sync: a torch MLP trained through 2 servers by 2 workers in sync ends
  equal, within float rounding, to the same model (same initial values)
  trained by SGD on the whole global batch in one process; sent as one
  pushpull a step, or in 3 buckets as backward reaches them.
async: 4 workers at the per-example-matched lr (lr / W) reach 0.9
  accuracy on a separable task where the initial model is near chance.
node: the sync job as three tasks of a scheduler (SLURM_PROCID 0-2 set
  by hand, as srun sets it; then torchrun's RANK and WORLD_SIZE): one
  server and two workers that find it through OUT/nodes/ID
  (pstrain.torch.node), ending as the sync case.
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import torch

import pstrain
import pstrain.torch as pt

B, STEPS, LR = 32, 8, 0.2
ASYNC_STEPS = 300  # a worker's


def model_fn():
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 3))


def batch(step, b=B):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(b, 12, generator=g)
    w = torch.arange(36, dtype=torch.float32).reshape(12, 3).sin()
    return x, (x @ w).argmax(1)


def train_sync(ctx):
    for step in range(STEPS):
        x, y = ctx.shard(*batch(step))
        loss = torch.nn.functional.cross_entropy(ctx.model(x), y)
        ctx.ps.zero_grad()
        loss.backward()
        ctx.ps.step(loss.item())
    if ctx.rank == 0:
        np.save(os.path.join(os.environ["OUT"], "pstrain.npy"),
                ctx.ps.values)
        with open(os.path.join(os.environ["OUT"], "copies"), "w") as f:
            f.write("%d %d\n" % (ctx.ps.copies, ctx.ps.overlapped))


def train_async(ctx):
    ctx.ready()
    for step in range(ASYNC_STEPS):
        x, y = ctx.shard(*batch(step * ctx.workers + ctx.rank))
        loss = torch.nn.functional.cross_entropy(ctx.model(x), y)
        ctx.ps.zero_grad()
        loss.backward()
        ctx.ps.step()
    if ctx.rank == 0:
        ctx.worker.pull(pstrain.ALL, ctx.ps.values).wait()
        with open(os.path.join(os.environ["OUT"], "acc"), "w") as f:
            f.write("%.4f\n" % accuracy(ctx.model))


def accuracy(model):
    x, y = batch(-1, 4096)  # held out: the training batches' seeds are >= 0
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def reference():
    """The same model trained by SGD on the whole batch in one process."""
    torch.manual_seed(1)
    m = model_fn()
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()]).numpy()


def records(path):
    """The data of each TFRecord of an events file (lengths only: the
    CRCs are tests/tboard_test.sh's to check)."""
    d, i, out = open(path, "rb").read(), 0, []
    while i < len(d):
        n = int.from_bytes(d[i:i + 8], "little")
        out.append(d[i + 12:i + 12 + n])
        i += 16 + n
    return out


def sync(out, bucket_mb):
    tb = os.path.join(out, "tb-%g" % bucket_mb)
    pt.launch(train_sync, model_fn, servers=2, workers=2, mode="sync",
              lr=LR, batch=B, out=out, bucket_mb=bucket_mb, tensorboard=tb)
    got = np.load(os.path.join(out, "pstrain.npy"))
    diff = np.abs(got - reference()).max()
    print("bucket_mb %g: largest difference %.3g over %d parameters" %
          (bucket_mb, diff, got.size))
    assert diff < 1e-5, diff
    # No gradient copied; with buckets, 3 a step sent during backward.
    copies, early = open(os.path.join(out, "copies")).read().split()
    assert copies == "0" and int(early) == (3 * STEPS if bucket_mb else 0), \
        (copies, early)
    # Each worker's worker-R.csv as pstrain's own workers write it:
    # a row a step, versions counting steps (sync), the loss given.
    for r in range(2):
        with open(os.path.join(out, "worker-%d.csv" % r)) as f:
            rows = [line.strip().split(",") for line in f]
        cols = rows[0]
        assert len(rows) == STEPS + 1, rows
        for t, row in enumerate(rows[1:]):
            v = dict(zip(cols, row))
            assert int(v["step"]) == t + 1 and int(v["version"]) == t + 1
            assert float(v["loss"]) > 0 and float(v["grad_norm"]) > 0
            assert float(v["lr"]) == LR and int(v["tx_bytes"]) > 259 * 4
    # launch() wrote the job's summary.json from those files.
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    assert s["outcome"] == "ok" and s["mode"] == "sync", s
    assert s["steps"] == STEPS and s["samples"] == STEPS * B, s
    assert s["startup_s"] > 0 and s["samples_per_s"] > 0, s
    # Option tensorboard: the event files, from the same files: a record
    # per step (after the file's first), and the session's hparams,
    # final scores and end.
    for r in range(2):
        ev = glob.glob(os.path.join(tb, "worker-%d" % r, "events.out.*"))
        assert len(ev) == 1 and len(records(ev[0])) == STEPS + 1, ev
    session = b"".join(records(glob.glob(os.path.join(tb,
                                                      "events.out.*"))[0]))
    for want in (b"_hparams_/session_start_info", b"hparams", b"mode",
                 b"samples_per_s", b"_hparams_/session_end_info"):
        assert want in session, want


def node(out):
    """Three tasks, as srun starts them, then as torchrun does: task 0
    serves, 1 and 2 work."""
    launchers = [("slurm-%d.0" % os.getpid(), "SLURM_PROCID",
                  {"SLURM_NTASKS": "3", "SLURM_JOB_ID": str(os.getpid()),
                   "SLURM_STEP_ID": "0"}),
                 ("torchrun-t%d" % os.getpid(), "RANK",
                  {"WORLD_SIZE": "3",
                   "TORCHELASTIC_RUN_ID": "t%d" % os.getpid()})]
    for job, rank_var, env in launchers:
        env = dict(os.environ, **env)
        env.setdefault("PSTRAIN_SECRET", os.urandom(32).hex())  # the job's
        procs = [subprocess.Popen([sys.executable, __file__, "node-task",
                                   out], env=dict(env, **{rank_var: str(r)}))
                 for r in range(3)]
        codes = [p.wait(timeout=240) for p in procs]
        assert codes == [0, 0, 0], (job, codes)
        got = np.load(os.path.join(out, "pstrain.npy"))
        diff = np.abs(got - reference()).max()
        print("node (%s): largest difference %.3g" % (rank_var, diff))
        assert diff < 1e-5, diff
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        assert s["outcome"] == "ok" and s["workers"] == 2, s
        assert os.path.exists(os.path.join(out, "nodes", job, "server-0.url"))
        os.remove(os.path.join(out, "pstrain.npy"))


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.environ["OUT"] = out
    if case == "sync":
        for mb in (0, 16 * 4 / 2 ** 20):  # one pushpull; buckets of 16 floats
            sync(out, mb)
    elif case == "node":
        node(out)
    elif case == "node-task":
        pt.node(train_sync, model_fn, servers=1, out=out, mode="sync", lr=LR,
                batch=B)
    else:
        # async, ssp (bound 1) and sync with a backup worker (a step
        # closes on 3 of 4 gradients), each through buckets: all learn.
        opts = {"async": dict(mode="async", matched_lr=True),
                "ssp": dict(mode="ssp", staleness=1, matched_lr=True),
                "backup": dict(mode="sync", backup_workers=1)}[case]
        pt.launch(train_async, model_fn, servers=1, workers=4, lr=LR,
                  batch=B, out=out, bucket_mb=16 * 4 / 2 ** 20, **opts)
        acc = float(open(os.path.join(out, "acc")).read())
        first = accuracy(pt._model(model_fn, 1))
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        print("%s: accuracy %.4f (initial %.4f), dropped %s" %
              (case, acc, first, s["dropped_gradients"]))
        assert first < 0.6 and acc >= 0.9, (first, acc)
        assert s["outcome"] == "ok" and s["mode"] == opts["mode"], s


if __name__ == "__main__":
    main()
