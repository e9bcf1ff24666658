"""pstrain.torch: a torch.nn.Module trained through pstrain's servers.

The model's parameters become the job's variables (one per entry of
named_parameters(), in that order, initialised as the model was, by
PyTorch); the optimizer runs on the servers, as everywhere in pstrain.
In each worker, ParameterServer points every parameter and its .grad at
two flat float32 buffers that the library reads and writes in place
(NumPy views of the same memory, no copy): backward() adds the gradient
into one and pushes it bucket by bucket as it goes, step() waits for
the new values in the other.

    import torch, pstrain.torch as pt

    def model_fn():                      # the same model in every process
        return torch.nn.Sequential(torch.nn.Linear(784, 128), ...)

    def train(ctx):                      # each worker process runs this
        ctx.ready()                      # (its data loaded) start together
        for step in range(STEPS):
            x, y = ctx.shard(*global_batch(step))   # this worker's B / W
            loss = torch.nn.functional.cross_entropy(ctx.model(x), y)
            ctx.ps.zero_grad()
            loss.backward()
            ctx.ps.step(loss.item())     # the loss, for worker-R.csv

    pt.launch(train, model_fn, servers=1, workers=2, mode="async",
              lr=0.1, matched_lr=True)

launch() starts the servers and workers as processes of this machine
(multiprocessing, spawn: train and model_fn must be importable, i.e.
defined at a module's top level) and returns when the job ends; options
are pstrain's job options (pstrain.Job); with out=DIR the job leaves
what `pstrain run` leaves: each worker's worker-R.csv (a row a step),
eval.csv (ps.record_eval), final.csv (ps.final), the servers'
server-R.json, and summary.json, which launch() writes at the end, so
that `pstrain dashboard DIR` and `pstrain compare --report-only` read
it. Under srun or mpirun, node() is one task of such a job.
"""
import functools
import multiprocessing as mp
import multiprocessing.connection
import os
import tempfile
import time
import zlib

import numpy as np
import torch

import pstrain

__all__ = ["ParameterServer", "Context", "job_of", "launch", "node"]

NAME_MAX = 31  # bytes of a variable's name (pt_job_var)


def _var_name(name):
    """name as a variable's name: as it is when it fits, else its head
    and a CRC of the whole, the same in every process."""
    if len(name.encode()) <= NAME_MAX:
        return name
    return "%s~%08x" % (name.encode()[:NAME_MAX - 9].decode("ascii", "ignore"),
                        zlib.crc32(name.encode()))


def job_of(model, **options):
    """The pstrain.Job whose variables are model's parameters, with their
    present values as initial values, and the given options."""
    job = pstrain.Job(**options)
    for name, p in model.named_parameters():
        if p.dtype != torch.float32 or p.device.type != "cpu":
            raise TypeError("parameter %s is %s on %s: pstrain holds CPU "
                            "float32 parameters" % (name, p.dtype, p.device))
        values = np.ascontiguousarray(p.detach().numpy().reshape(-1))
        job.var(_var_name(name), p.numel(), 0.0, values)
    return job


class ParameterServer:
    """Trains model's parameters through worker (a pstrain.Worker of a job
    built by job_of(model)): each step pushes the gradients backward()
    leaves and pulls the values of the next version, in sync, async or
    ssp as the job says. The step count starts at worker.start.

    Pushes overlap backward: the parameters are cut into buckets of about
    bucket_mb MB, contiguous in the key space and taken in the reverse of
    named_parameters() (about the order backward reaches them), and a
    bucket's pushpull leaves as soon as backward has added the last of
    its gradients (a hook on each parameter's gradient accumulator), so
    that the servers sum and apply it, and its values come back, while
    backward goes on. step() sends what is left and waits. bucket_mb=0:
    one pushpull of the whole model in step()."""

    def __init__(self, model, worker, bucket_mb=1.0):
        self.model = model
        self.worker = worker
        self.params = [p for _, p in model.named_parameters()]
        n = sum(p.numel() for p in self.params)
        self.values = np.empty(n, np.float32)
        self.grads = np.zeros(n, np.float32)
        self._ptr, self._off = [], []
        off = 0
        with torch.no_grad():
            for p in self.params:
                k = p.numel()
                self.values[off:off + k] = p.detach().numpy().reshape(-1)
                p.data = torch.from_numpy(self.values[off:off + k]).view(
                    p.shape)
                p.grad = torch.from_numpy(self.grads[off:off + k]).view(
                    p.shape)
                self._ptr.append(p.grad.data_ptr())
                self._off.append(off)
                off += k
        self.step_count = worker.start
        self.copies = 0  # gradients torch put elsewhere, copied back
        self.comm_ms = 0.0  # of the last step: waiting in step()
        self.overlapped = 0  # buckets sent while backward ran
        self._buckets(bucket_mb)
        # A step's computing starts at its first forward pass since the
        # previous step (or evaluation) ended.
        self._begun = None
        model.register_forward_pre_hook(self._forward)

    def _buckets(self, mb):
        """Buckets of parameter indices, last parameters first; a hook on
        each parameter's gradient accumulator counts it in."""
        self._bucket_of, self._members, self._acc = {}, [], []
        size, limit = 0, mb * 2 ** 20 / 4
        for i in reversed(range(len(self.params))) if mb > 0 else ():
            if not self._members or size >= limit:
                self._members.append([])
                size = 0
            self._members[-1].append(i)
            self._bucket_of[i] = len(self._members) - 1
            size += self.params[i].numel()
            acc = self.params[i].expand_as(self.params[i]).grad_fn \
                .next_functions[0][0]
            acc.register_hook(functools.partial(self._ready, i))
            self._acc.append(acc)  # kept: the hooks live on it
        self._left = [len(m) for m in self._members]
        self._sent = []

    def _forward(self, module, inputs):
        if self._begun is None:
            self._begun = time.perf_counter()

    def zero_grad(self):
        """Zeroes the gradient buffer (in place: .grad stays a view)."""
        self.grads.fill(0)

    def _own(self, i):
        # backward() adds into .grad in place while it is the only
        # reference; if torch replaced a .grad, copy it back and re-point.
        p, k = self.params[i], self.params[i].numel()
        if p.grad is None or p.grad.data_ptr() != self._ptr[i]:
            view = self.grads[self._off[i]:self._off[i] + k]
            view[:] = 0 if p.grad is None else \
                p.grad.detach().numpy().reshape(-1)
            p.grad = torch.from_numpy(view).view(p.shape)
            self.copies += 1

    def _ready(self, i, *unused):
        b = self._bucket_of[i]
        self._left[b] -= 1
        if self._left[b] == 0:
            self._send(b)
            self.overlapped += 1

    def _send(self, b):
        """The pushpull of bucket b (its parameters' flat range)."""
        for i in self._members[b]:
            self._own(i)
        lo = min(self._off[i] for i in self._members[b])
        hi = max(self._off[i] + self.params[i].numel()
                 for i in self._members[b])
        self._sent.append(self.worker.pushpull(
            self.step_count, pstrain.ALL, self.grads[lo:hi],
            self.values[lo:hi], off=lo))
        self._left[b] = -1  # sent this step

    def step(self, loss=None):
        """Sends what backward has not (every bucket when it ran no hook,
        a bucket with a parameter that got no gradient) and waits for the
        next values, which the model's parameters then hold. With the
        job's option out, records the step's row of OUT/worker-R.csv:
        loss (a tensor or a number), the gradient's norm, and the time
        since the step's first forward pass as its computing."""
        t0 = time.perf_counter()
        compute_ms = (t0 - self._begun) * 1e3 if self._begun else 0.0
        if not self._members:
            for i in range(len(self.params)):
                self._own(i)
            self._sent.append(self.worker.pushpull(
                self.step_count, pstrain.ALL, self.grads, self.values))
        for b in range(len(self._members)):
            if self._left[b] >= 0:
                self._send(b)
        for r in self._sent:
            r.wait()
        self.comm_ms = (time.perf_counter() - t0) * 1e3
        self._sent = []
        self._left = [len(m) for m in self._members]
        norm = float(np.sqrt(np.dot(self.grads, self.grads)))
        loss = float("nan") if loss is None else float(loss)
        self.worker.record_step(self.step_count, loss, norm, compute_ms)
        self.step_count += 1
        self._begun = None

    def final(self, test_loss=float("nan"), test_acc=float("nan")):
        """With the job's option out, OUT/final.csv: the test loss and
        accuracy of the final values this worker holds, with its last
        step's loss and its best evaluation (one worker, at the end)."""
        self.worker.final(test_loss, test_acc)

    def record_eval(self, loss, acc, eval_s):
        """With the job's option out, a row of OUT/eval.csv: the values
        this worker holds, evaluated on held-out validation data. The next
        step's computing starts after it."""
        self.worker.record_eval(loss, acc, eval_s)
        self._begun = None


class Context:
    """What a worker's train function gets: rank, workers, model (the
    worker's copy, trained through ps), ps (its ParameterServer), worker
    (the pstrain.Worker), seed, shard() and ready()."""

    def __init__(self, rank, workers, model, ps, seed, barrier=None):
        self.rank, self.workers = rank, workers
        self.model, self.ps, self.worker, self.seed = model, ps, ps.worker, seed
        self._barrier = barrier

    def ready(self):
        """Waits until every worker is ready (its data loaded): called
        before the first step, it starts the workers' training together,
        so that in async and ssp no worker trains alone while another
        still starts up."""
        if self._barrier is not None:
            self._barrier.wait()

    def shard(self, *tensors):
        """This worker's rows of a global batch: rows [r B / W, (r + 1) B /
        W) of each tensor (the per-replica batch is B / W)."""
        out = []
        for t in tensors:
            b = t.shape[0]
            out.append(t[self.rank * b // self.workers:
                         (self.rank + 1) * b // self.workers])
        return out[0] if len(out) == 1 else tuple(out)


def _model(model_fn, seed):
    torch.manual_seed(seed)
    return model_fn()


def _server(model_fn, rank, url, seed, options, folder=None):
    torch.set_num_threads(1)
    job = job_of(_model(model_fn, seed), seed=seed, **options)
    s = pstrain.Server(job, rank, url)
    if folder is not None:  # node(): where the workers find it
        pstrain.node_publish(folder, "server", rank, s.url)
    try:
        s.serve()
    finally:
        s.close()


def _worker(train_fn, model_fn, rank, urls, seed, bucket_mb, barrier,
            options):
    torch.set_num_threads(1)
    model = _model(model_fn, seed)
    job = job_of(model, seed=seed, **options)
    w = pstrain.Worker(job, rank, urls)
    try:
        train_fn(Context(rank, options["workers"], model,
                         ParameterServer(model, w, bucket_mb), seed,
                         barrier))
        w.done()
    finally:
        w.close()


def node(train_fn, model_fn, servers=1, out=None, seed=1, bucket_mb=1.0,
         timeout=60.0, **options):
    """One task of a job a scheduler started on every task (srun
    python3 prog.py, mpirun python3 prog.py), as `pstrain node` is: tasks
    below `servers` serve, the others work (worker rank = task rank -
    servers), so the job has as many workers as the other tasks. Each
    server listens on this host's address (pstrain.node_address(), a free
    port) and publishes it in OUT/nodes/ID (out: a folder every host
    sees; ID the scheduler's job), where the workers wait for them at
    most timeout seconds. train_fn and model_fn are launch()'s; ctx.ready()
    waits for nothing here. Worker 0 writes summary.json at the end.
    Returns when this task's part is done."""
    if not out:
        raise ValueError("pstrain.torch.node: out=DIR is needed, a folder "
                         "every host sees")
    rank, size, job_id = pstrain.node_task()
    if size <= servers:
        raise ValueError("%d tasks leave no worker beside %d servers" %
                         (size, servers))
    folder = os.path.join(out, "nodes", job_id)
    os.makedirs(folder, exist_ok=True)
    options = dict(options, servers=servers, workers=size - servers,
                   out=out)
    if rank < servers:
        url = "tcp://%s:0" % pstrain.node_address()
        _server(model_fn, rank, url, seed, options, folder)
        return
    urls = pstrain.node_gather(folder, "server", servers, timeout)
    _worker(train_fn, model_fn, rank - servers, urls, seed, bucket_mb, None,
            options)
    if rank == servers:  # worker 0: the job's summary, once servers wrote
        job_of(_model(model_fn, seed), seed=seed, **options).summary()


def launch(train_fn, model_fn, servers=1, workers=1, seed=1, bucket_mb=1.0,
           **options):
    """Runs a job on this machine: `servers` server processes and
    `workers` worker processes, each worker calling train_fn(ctx) with
    the model model_fn() builds (after torch.manual_seed(seed), in every
    process alike); bucket_mb is ParameterServer's. options are the
    job's (mode="async", lr=0.1, ...); with out=DIR the job's files and,
    at the end, summary.json go there, and with tensorboard=DIR its
    TensorBoard event files too.
    Returns when every process has ended; raises naming any that failed.
    """
    # Every process's wall_s counts from the job's start (option t0).
    options = dict(options, servers=servers, workers=workers)
    options.setdefault("t0", "%.6f" % time.time())
    if not os.environ.get("PSTRAIN_SECRET"):
        os.environ["PSTRAIN_SECRET"] = os.urandom(32).hex()
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="pstrain-torch-") as d:
        urls = ["ipc://%s/s%d" % (d, r) for r in range(servers)]
        procs = [("server %d" % r, ctx.Process(
            target=_server, args=(model_fn, r, urls[r], seed, options)))
            for r in range(servers)]
        barrier = ctx.Barrier(workers)  # ctx.ready()
        procs += [("worker %d" % r, ctx.Process(
            target=_worker, args=(train_fn, model_fn, r, urls, seed,
                                  bucket_mb, barrier, options)))
                  for r in range(workers)]
        for _, p in procs:
            p.start()
        failed = []
        left = dict(procs)
        while left:  # the first process to fail ends the job
            mp.connection.wait([p.sentinel for p in left.values()])
            for name, p in list(left.items()):
                if p.exitcode is None:
                    continue
                del left[name]
                if p.exitcode != 0:
                    failed.append("%s exited %s" % (name, p.exitcode))
            if failed:
                for p in left.values():
                    p.terminate()
                    p.join()
                break
        if failed:
            raise RuntimeError("pstrain.torch.launch: " + ", ".join(failed))
    if options.get("out"):  # the job's summary.json, from its files
        job_of(_model(model_fn, seed), seed=seed, **options).summary()
