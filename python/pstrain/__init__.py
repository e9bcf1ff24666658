"""pstrain: parameter-server training from Python, over libpstrain (ctypes).

A thin binding of pstrain.h: a Job declares named float32 variables (or
one of pstrain's own models, Job.model) and the job's rules; a Server
holds one shard of them; a Worker pushes gradients and pulls values on
(variable, offset, count) ranges, with requests that run while Python
computes and are waited for later; a Net computes the loss and gradient
of a job's pstrain model on a batch.

Arrays are handed to the library, not copied: they must be NumPy float32
arrays, C-contiguous (a TypeError says so otherwise), and a request keeps
a reference to them until it is waited for, so they stay alive; do not
change a pushed array or read a pulled one before wait().

Install: `python3 -m pip install ./python` (from the source tree, into
any interpreter or venv that has NumPy; no network needed). The package
is pure Python: it loads libpstrain at import, found through
$PSTRAIN_LIB (the library's path), else the source tree's build/lib
when the package is imported from there, else where `make install` put
it (PREFIX/lib beside the package it installed, or beside the `pstrain`
found on PATH), else the system's library path. pstrain.version() is the library's version.
"""
import ctypes
import ctypes.util
import os
import shutil
import sys

try:
    import numpy as np
except ImportError as e:
    raise ImportError(
        "pstrain needs NumPy, which this interpreter (%s) cannot import "
        "(%s): install it here (python3 -m pip install numpy, or Debian's "
        "python3-numpy for /usr/bin/python3)" % (sys.executable, e)) from None

__version__ = "0.11.0"  # the Makefile's VERSION_NUM
__all__ = ["Error", "Job", "Net", "Server", "Worker", "ALL",
           "log_to_stderr", "version", "node_task", "node_address",
           "node_publish", "node_gather"]

ALL = -1  # a range of the whole key space, as PT_ALL
API_VERSION = 2  # the PT_API_VERSION this binding needs, at least
SONAME = "libpstrain.so.1"


def _places():
    """Where the library may be, in the order tried."""
    here = os.path.dirname(os.path.abspath(__file__))
    places = [os.path.join(here, "..", "..", "build", "lib", SONAME),
              os.path.join(here, "..", "..", "..", SONAME)]  # PREFIX/lib
    exe = shutil.which("pstrain")
    if exe:  # PREFIX/bin/pstrain, or the source tree's bin/pstrain
        top = os.path.dirname(os.path.dirname(os.path.realpath(exe)))
        places += [os.path.join(top, "lib", SONAME),
                   os.path.join(top, "build", "lib", SONAME)]
    return [os.path.normpath(p) for p in places]


def _load():
    env = os.environ.get("PSTRAIN_LIB", "")
    if env:
        try:
            lib = ctypes.CDLL(env)
        except OSError as e:
            raise ImportError("PSTRAIN_LIB=%s: %s" % (env, e)) from None
        where = env
    else:
        places = [p for p in _places() if os.path.exists(p)]
        found = ctypes.util.find_library("pstrain")
        lib = ctypes.CDLL(places[0] if places else found) \
            if places or found else None
        if lib is None:
            raise ImportError(
                "%s not found (looked in %s and the system's library path):"
                " build it (make lib, in pstrain's source tree), install it "
                "(make install PREFIX=...), or set PSTRAIN_LIB to its path"
                % (SONAME, ", ".join(_places()) or "no place"))
        where = places[0] if places else found
    have = lib.pt_api_version() if hasattr(lib, "pt_api_version") else 1
    if have < API_VERSION:
        raise ImportError(
            "the libpstrain at %s is too old for this package (API version "
            "%d, needs %d): install the library of the same pstrain "
            "(make install), or set PSTRAIN_LIB to it" % (where, have,
                                                          API_VERSION))
    return lib


_lib = _load()
_P = ctypes.c_void_p
_F = ctypes.POINTER(ctypes.c_float)
_U64 = ctypes.c_uint64


def _sig(name, res, *args):
    f = getattr(_lib, name)
    f.restype, f.argtypes = res, list(args)
    return f


class _Stats(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int64), ("updates", _U64),
                ("dropped", _U64), ("rejected", _U64),
                ("stale_max", _U64), ("stale_mean", ctypes.c_double),
                ("done", ctypes.c_uint32), ("lost", ctypes.c_uint32)]


_errmsg = _sig("pt_errmsg", ctypes.c_char_p, ctypes.c_int)
_job_alloc = _sig("pt_job_alloc", ctypes.c_int, ctypes.POINTER(_P))
_job_free = _sig("pt_job_free", None, _P)
_job_var = _sig("pt_job_var", ctypes.c_int, _P, ctypes.c_char_p, _U64,
                ctypes.c_double)
_job_var_values = _sig("pt_job_var_values", ctypes.c_int, _P, ctypes.c_int,
                        _F)
_job_set = _sig("pt_job_set", ctypes.c_int, _P, ctypes.c_char_p,
                ctypes.c_char_p)
_job_model = _sig("pt_job_model", ctypes.c_int, _P, ctypes.c_char_p,
                  ctypes.c_uint32, ctypes.c_uint32)
_job_table = _sig("pt_job_table", ctypes.c_int, _P, ctypes.c_char_p,
                  ctypes.c_uint32, ctypes.c_double)
_ID = ctypes.POINTER(ctypes.c_uint64)
_U8 = ctypes.POINTER(ctypes.c_uint8)
_D = ctypes.POINTER(ctypes.c_double)
_net_alloc = _sig("pt_net_alloc", ctypes.c_int, ctypes.POINTER(_P), _P,
                  ctypes.c_uint32)
_net_free = _sig("pt_net_free", None, _P)
_net_size = _sig("pt_net_size", _U64, _P)
_net_grad = _sig("pt_net_grad", ctypes.c_int, _P, _F, _D, _F, _F, _U8,
                 ctypes.c_uint32)
_net_eval = _sig("pt_net_eval", ctypes.c_int, _P, _D,
                 ctypes.POINTER(ctypes.c_uint32), _F, _F, _U8,
                 ctypes.c_uint32)
_server_open = _sig("pt_server_open", ctypes.c_int, ctypes.POINTER(_P), _P,
                    ctypes.c_uint32, ctypes.c_char_p)
_server_url = _sig("pt_server_url", ctypes.c_int, _P, ctypes.c_char_p, _U64)
_server_serve = _sig("pt_server_serve", ctypes.c_int, _P)
_server_stop = _sig("pt_server_stop", None, _P)
_server_close = _sig("pt_server_close", None, _P)
_worker_open = _sig("pt_worker_open", ctypes.c_int, ctypes.POINTER(_P), _P,
                    ctypes.c_uint32, ctypes.c_char_p)
_push = _sig("pt_push", ctypes.c_int, _P, ctypes.c_int64, ctypes.c_int, _U64,
             _U64, _F, ctypes.POINTER(_P))
_pull = _sig("pt_pull", ctypes.c_int, _P, ctypes.c_int, _U64, _U64, _F,
             ctypes.POINTER(_P))
_pushpull = _sig("pt_pushpull", ctypes.c_int, _P, ctypes.c_int64,
                 ctypes.c_int, _U64, _U64, _F, _F, ctypes.POINTER(_P))
_wait = _sig("pt_wait", ctypes.c_int, _P, _P)
_worker_start = _sig("pt_worker_start", ctypes.c_int64, _P)
_worker_stats = _sig("pt_worker_stats", ctypes.c_int, _P,
                     ctypes.POINTER(_Stats))
_worker_step = _sig("pt_worker_step", ctypes.c_int, _P, ctypes.c_int64,
                    ctypes.c_double, ctypes.c_double, ctypes.c_double)
_worker_eval = _sig("pt_worker_eval", ctypes.c_int, _P, ctypes.c_int64,
                    ctypes.c_double, ctypes.c_double, ctypes.c_double)
_worker_final = _sig("pt_worker_final", ctypes.c_int, _P, ctypes.c_double,
                     ctypes.c_double)
_job_summary = _sig("pt_job_summary", ctypes.c_int, _P)
_worker_done = _sig("pt_worker_done", ctypes.c_int, _P)
_worker_close = _sig("pt_worker_close", None, _P)
_pushpull_rows = _sig("pt_pushpull_rows", ctypes.c_int, _P, ctypes.c_int,
                      ctypes.c_int64, _U64, _ID, _F, _U64, _ID, _F)
_log_set = _sig("pt_log_set", None, _P, _P)
_node_task = _sig("pt_node_task", ctypes.c_int, ctypes.POINTER(ctypes.c_uint32),
                  ctypes.POINTER(ctypes.c_uint32), ctypes.c_char_p, _U64)
_node_address = _sig("pt_node_address", ctypes.c_int, ctypes.c_char_p, _U64)
_node_publish = _sig("pt_node_publish", ctypes.c_int, ctypes.c_char_p,
                     ctypes.c_char_p, ctypes.c_uint32, ctypes.c_char_p)
_node_gather = _sig("pt_node_gather", ctypes.c_int, ctypes.c_char_p,
                    ctypes.c_char_p, ctypes.c_uint32, ctypes.c_double,
                    ctypes.c_char_p, _U64)
_version = _sig("pt_version", ctypes.c_char_p)


def version():
    """The library's version, as `pstrain --version` prints it."""
    return _version().decode()


def node_task():
    """(rank, tasks, job id) of this process under srun or mpirun
    (pt_node_task); Error when no scheduler says."""
    r, n = ctypes.c_uint32(), ctypes.c_uint32()
    buf = ctypes.create_string_buffer(256)
    _check(_node_task(ctypes.byref(r), ctypes.byref(n), buf, len(buf)),
           "node")
    return r.value, n.value, buf.value.decode()


def node_address():
    """The address this host is reached at (pt_node_address)."""
    buf = ctypes.create_string_buffer(64)
    _check(_node_address(buf, len(buf)), "node address")
    return buf.value.decode()


def node_publish(folder, role, rank, url):
    """url as ROLE-rank's address in folder (pt_node_publish)."""
    _check(_node_publish(folder.encode(), role.encode(), rank, url.encode()),
           "publish")


def node_gather(folder, role, n, timeout_s):
    """The addresses of ROLE-0 .. ROLE-(n-1) in folder, in rank order,
    waited for at most timeout_s seconds (pt_node_gather)."""
    buf = ctypes.create_string_buffer(65536)
    _check(_node_gather(folder.encode(), role.encode(), n, timeout_s, buf,
                        len(buf)), "gather")
    return buf.value.decode().split(",")


def log_to_stderr(on=True):
    """The library's messages (a server's address, refused requests, lost
    or rejoining workers, checkpoints) on stderr, one line each; with
    False, nowhere, as at first. Call it before opening servers or
    workers."""
    fn = ctypes.cast(_lib.pt_log_stderr, _P) if on else None
    _log_set(fn, None)


class Error(Exception):
    """A pstrain call failed: .code is its PT_E* code."""

    def __init__(self, code, what):
        self.code = code
        super().__init__("%s: %s" % (what, _errmsg(code).decode()))


def _check(rv, what):
    if rv != 0:
        raise Error(rv, what)


def _floats(a, name):
    if not isinstance(a, np.ndarray) or a.dtype != np.float32 or \
            not a.flags["C_CONTIGUOUS"]:
        raise TypeError("%s must be a C-contiguous numpy float32 array "
                        "(pstrain hands it over, it does not copy)" % name)
    return a.ctypes.data_as(_F)


class Job:
    """The variables and rules every process of a job builds alike.

    options: pt_job_set names and values, e.g. {"mode": "async",
    "workers": 4, "lr": 0.1}; variables: (name, size, bound) in order.
    """

    def __init__(self, variables=(), **options):
        self._p = _P()
        _check(_job_alloc(ctypes.byref(self._p)), "job")
        self.names = []
        self.sizes = []
        for name, size, *bound in variables:
            self.var(name, size, bound[0] if bound else 0.0)
        for k, v in options.items():
            self.set(k.replace("_", "-"), v)

    def var(self, name, size, bound=0.0, values=None):
        """Declares the next variable: size floats, initially uniform in
        [-bound, bound] from the job's seed, or values (size float32s,
        copied) when given. Returns its index."""
        i = _job_var(self._p, name.encode(), size, bound)
        if i < 0:
            raise Error(-i, "variable %s" % name)
        self.names.append(name)
        self.sizes.append(size)
        if values is not None:
            if values.size != size:
                raise ValueError("variable %s: %d values for %d floats" %
                                 (name, values.size, size))
            _check(_job_var_values(self._p, i, _floats(values, "values")),
                   "variable %s" % name)
        return i

    def model(self, spec, dim, classes):
        """Declares pstrain's model spec ("softmax", "mlp:H1,...",
        "cnn:C1,...[/H1,...]") as the job's variables w0, b0, w1, ..., for inputs of
        dim floats and classes classes, initialized as pstrain run
        initializes them. Only on a job with no variables yet."""
        _check(_job_model(self._p, spec.encode(), dim, classes),
               "model %s" % spec)
        self.spec, self.dim, self.classes = spec, dim, classes

    def table(self, name, dim, init=0.0):
        """Declares the next embedding table: rows of dim floats by 64-bit
        id, each created on the server a hash of its id picks, with
        initial values uniform in [-init, init] from (seed, table, id).
        Returns its index."""
        i = _job_table(self._p, name.encode(), dim, init)
        if i < 0:
            raise Error(-i, "table %s" % name)
        self.tables = getattr(self, "tables", []) + [(name, dim)]
        return i

    def set(self, name, value):
        if isinstance(value, bool):
            value = "true" if value else "false"
        _check(_job_set(self._p, name.encode(), str(value).encode()),
               "option %s" % name)

    def summary(self):
        """OUT/summary.json of this job, ended (pt_job_summary): once
        every server has closed, in one process."""
        _check(_job_summary(self._p), "summary")

    def index(self, var):
        return var if isinstance(var, int) else self.names.index(var)

    def __del__(self):
        if getattr(self, "_p", None):
            _job_free(self._p)
            self._p = None


class Net:
    """The loss and gradient of job's pstrain model (Job.model), for
    batches of up to max_batch rows. Parameters and gradients are the
    whole key space, flat: float32 arrays of .size (push and pull them
    with var ALL). x is (b, dim) float32, y (b,) labels (uint8)."""

    def __init__(self, job, max_batch):
        self._p = _P()
        _check(_net_alloc(ctypes.byref(self._p), job._p, max_batch), "net")
        self.size = int(_net_size(self._p))
        self.dim = getattr(job, "dim", 0)

    def _batch(self, params, x, y):
        if params.shape != (self.size,):
            raise ValueError("params must have %d floats" % self.size)
        y = np.ascontiguousarray(y, dtype=np.uint8)
        if x.ndim != 2 or x.shape[0] != y.shape[0] or \
                (self.dim and x.shape[1] != self.dim):
            raise ValueError("x must be (b, %d) and y (b,)" % self.dim)
        return _floats(params, "params"), _floats(x, "x"), \
            y.ctypes.data_as(_U8), y

    def grad(self, params, x, y, out=None):
        """(gradient, mean loss) of the batch; the gradient goes to out
        when given (float32, .size)."""
        p, xp, yp, keep = self._batch(params, x, y)
        g = np.empty(self.size, np.float32) if out is None else out
        loss = ctypes.c_double()
        _check(_net_grad(self._p, _floats(g, "out"), ctypes.byref(loss), p,
                         xp, yp, len(keep)), "net grad")
        return g, loss.value

    def eval(self, params, x, y):
        """(summed loss, number correct) of the batch."""
        p, xp, yp, keep = self._batch(params, x, y)
        loss, correct = ctypes.c_double(), ctypes.c_uint32()
        _check(_net_eval(self._p, ctypes.byref(loss), ctypes.byref(correct),
                         p, xp, yp, len(keep)), "net eval")
        return loss.value, correct.value

    def __del__(self):
        if getattr(self, "_p", None):
            _net_free(self._p)
            self._p = None


class Server:
    """Shard `rank` of job, listening on url ("tcp://127.0.0.1:0" picks a
    port: see .url). serve() blocks (without the GIL) until the job ends
    or stop() is called from another thread; it raises when the server
    stopped because no worker was left (job option "alone-timeout")."""

    def __init__(self, job, rank, url):
        self._p = _P()
        _check(_server_open(ctypes.byref(self._p), job._p, rank,
                            url.encode()), "server %d" % rank)
        buf = ctypes.create_string_buffer(1024)
        _check(_server_url(self._p, buf, len(buf)), "server url")
        self.url = buf.value.decode()

    def serve(self):
        _check(_server_serve(self._p), "serve")

    def stop(self):
        _server_stop(self._p)

    def close(self):
        if self._p:
            _server_close(self._p)
            self._p = None


class Request:
    """A push, pull or pushpull under way; wait() once."""

    def __init__(self, worker, handle, *arrays):
        self._w, self._h, self._keep = worker, handle, arrays

    def wait(self):
        if self._h is None:
            raise Error(7, "wait: this request was waited for already")
        h, self._h = self._h, None
        rv = _wait(self._w._p, h)
        self._keep = None
        _check(rv, "wait")


class Worker:
    """Worker `rank` of job, dialing the servers' urls (a list, in rank
    order). Ranges are (var, off, n): var a name or an index, or ALL."""

    def __init__(self, job, rank, urls):
        self._job = job
        self._p = _P()
        _check(_worker_open(ctypes.byref(self._p), job._p, rank,
                            ",".join(urls).encode()), "worker %d" % rank)

    @property
    def start(self):
        """The step to go on from (0 in a new job)."""
        return _worker_start(self._p)

    def _range(self, var, off, a):
        return (ALL if var == ALL else self._job.index(var)), off, a.size

    def push(self, step, var, grad, off=0):
        v, off, n = self._range(var, off, grad)
        h = _P()
        _check(_push(self._p, step, v, off, n, _floats(grad, "grad"),
                     ctypes.byref(h)), "push")
        return Request(self, h, grad)

    def pull(self, var, out, off=0):
        v, off, n = self._range(var, off, out)
        h = _P()
        _check(_pull(self._p, v, off, n, _floats(out, "out"),
                     ctypes.byref(h)), "pull")
        return Request(self, h, out)

    def pushpull(self, step, var, grad, out, off=0):
        v, off, n = self._range(var, off, grad)
        if out.size != n:
            raise ValueError("pushpull: grad and out differ in size")
        h = _P()
        _check(_pushpull(self._p, step, v, off, n, _floats(grad, "grad"),
                         _floats(out, "out"), ctypes.byref(h)), "pushpull")
        return Request(self, h, grad, out)

    def _ids(self, ids, name):
        if not isinstance(ids, np.ndarray) or ids.dtype != np.uint64 or \
                not ids.flags["C_CONTIGUOUS"] or ids.ndim != 1:
            raise TypeError("%s must be a 1-d C-contiguous numpy uint64 "
                            "array" % name)
        return ids.ctypes.data_as(_ID)

    def pushpull_rows(self, table, step, ids, grads, pull_ids, out):
        """Pushes grads (len(ids) x dim; an id given twice has its
        gradients summed) for step, then pulls the rows pull_ids into out
        (len(pull_ids) x dim); in sync mode this is the worker's part of
        the table's step, and out gets the closed step's rows. Blocks."""
        dim = self._job.tables[table][1]
        if grads.size != ids.size * dim or out.size != pull_ids.size * dim:
            raise ValueError("rows: %d floats a row" % dim)
        _check(_pushpull_rows(self._p, table, step, ids.size,
                              self._ids(ids, "ids"), _floats(grads, "grads"),
                              pull_ids.size, self._ids(pull_ids, "pull_ids"),
                              _floats(out, "out")), "rows")

    def pull_rows(self, table, ids, out):
        """The rows ids as they are, into out (len(ids) x dim). Blocks."""
        empty = np.zeros(0, np.uint64)
        self.pushpull_rows(table, -1, empty, np.zeros(0, np.float32), ids,
                           out)

    def push_rows(self, table, step, ids, grads):
        """pushpull_rows pulling nothing. Blocks."""
        empty = np.zeros(0, np.uint64)
        self.pushpull_rows(table, step, ids, grads, empty,
                           np.zeros(0, np.float32))

    def record_step(self, step, loss, grad_norm, compute_ms):
        """With the job's option out: step's row of OUT/worker-R.csv, as
        pstrain's own workers write it (pt_worker_step: the library adds
        the step's length, communication time, staleness, lr, version and
        bytes). Call it after the step's requests were waited for."""
        _check(_worker_step(self._p, step, loss, grad_norm, compute_ms),
               "record step %d" % step)

    def record_eval(self, loss, acc, eval_s, version=-1):
        """With the job's option out: a row of OUT/eval.csv for the
        values of version (-1: those this worker pulled last), evaluated
        on held-out validation data in eval_s seconds."""
        _check(_worker_eval(self._p, version, loss, acc, eval_s),
               "record eval")

    def final(self, test_loss=float("nan"), test_acc=float("nan")):
        """With the job's option out: OUT/final.csv, the final
        parameters' test loss and accuracy with what the library kept
        (pt_worker_final). One worker, after its last step."""
        _check(_worker_final(self._p, test_loss, test_acc), "final")

    def stats(self):
        s = _Stats()
        _check(_worker_stats(self._p, ctypes.byref(s)), "stats")
        return {k: getattr(s, k) for k, _ in _Stats._fields_}

    def done(self):
        _check(_worker_done(self._p), "done")

    def close(self):
        if self._p:
            _worker_close(self._p)
            self._p = None
