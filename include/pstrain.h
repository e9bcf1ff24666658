// pstrain.h - pstrain's public API: train any model through parameter
// servers in synchronous, asynchronous or bounded-staleness (ssp) mode.
//
// A job is a key space of named float32 variables plus the rules every
// process of the job agrees on (mode, workers, servers, learning rate,
// optimizer, ...). Server processes each hold one contiguous shard of the
// variables and apply the workers' gradients with a server-side
// optimizer; worker processes push gradients and pull values on
// (variable, offset, count) ranges, the way ps-lite's KVWorker pushes and
// pulls key ranges. Every process builds the same pt_job; the servers
// check at hello that a worker's variables, mode and worker count match
// theirs.
//
// Errors: every call that can fail returns 0 or a PT_E* code, and leaves
// a message naming what was wrong (the variable, the option, the server)
// for pt_errmsg, per thread. Objects are opaque; each _open or _alloc has
// its _close or _free, which accepts NULL.
//
// Threads: a pt_job is read-only once opened from; a pt_server may be
// stopped from any thread; a pt_worker is used by one thread at a time.
// Nothing here installs signal handlers or reads the dataset: the program
// owns its process.
//
// Build: cc prog.c $(pkg-config --cflags --libs pstrain)
#ifndef PSTRAIN_H
#define PSTRAIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PT_API __attribute__((visibility("default")))
#else
#define PT_API
#endif

#define PT_API_VERSION 2

// pt_version is the library's version (`git describe` when it was built,
// as `pstrain --version` prints it); pt_api_version is the
// PT_API_VERSION it was built with, so that a program or binding that
// loads the library at run time can tell one too old for it.
PT_API const char *pt_version(void);
PT_API int pt_api_version(void);

// Error codes.
enum {
	PT_OK = 0,
	PT_ENOMEM,     // out of memory
	PT_EINVAL,     // bad argument, option or spec
	PT_EPROTO,     // malformed or unexpected message
	PT_EIO,        // file or socket I/O failed
	PT_ECORRUPT,   // a file's contents are not what its format says
	PT_ETIMEDOUT,  // no answer in time
	PT_ESTATE,     // operation out of turn
	PT_ERANGE,     // index or range outside what is held
	PT_ENOENT,     // no such file or thing
	PT_ETRANSPORT, // nng reported an error
	PT_EDIVERGED,  // training produced a non-finite loss
	PT_ECLOSED,    // peer or socket closed
	PT_EAUTH,      // the peer has not proven the job secret, or acts
		       // beyond the role it proved
	PT_NERR
};

// pt_errmsg returns the calling thread's message for its last failed
// call, or a description of code when there is none. The text stays
// valid until the thread's next call into pstrain.
PT_API const char *pt_errmsg(int code);

// ---------------------------------------------------------------- log

// What the library has to say besides its return codes (a server's
// address, refused requests, workers lost or rejoining, checkpoints
// written or failed, a worker's notes on a silent server) goes to one
// function, as nng's log does: none at first, so the library prints
// nothing. pt_log_set installs fn (NULL: none again), called with arg,
// the message's level and its text, one line without a newline, valid
// during the call. fn may run on any of the library's threads and with
// its locks held: it must return promptly and must not call pstrain.
// Set it before opening servers or workers. pt_log_stderr is a ready
// fn: each message and a newline on stderr (pstrain's commands use it).
enum { PT_LOG_ERR = 1, PT_LOG_WARN, PT_LOG_INFO };
typedef void (*pt_log_fn)(void *arg, int level, const char *msg);
PT_API void pt_log_set(pt_log_fn fn, void *arg);
PT_API void pt_log_stderr(void *arg, int level, const char *msg);

// ---------------------------------------------------------------- job

typedef struct pt_job pt_job;

// pt_job_alloc makes an empty job with the defaults of `pstrain run`:
// sync mode, 1 server, 1 worker, global batch 256, plain SGD, seed 1, and
// lr unset (or set to 0): the optimizer's usual rate, 0.1 for SGD,
// momentum and Nesterov, 0.01 for Adagrad, 0.001 for Adam. PT_ENOMEM.
PT_API int pt_job_alloc(pt_job **out);
PT_API void pt_job_free(pt_job *job);

// pt_job_var declares the next variable: `name` (1 to 31 bytes, unique),
// n floats, initial values uniform in [-bound, bound] drawn from the
// job's seed (0: zeros). Variables are laid end to end in declaration
// order and the servers split that key space evenly. Returns the
// variable's index (>= 0), or -PT_EINVAL / -PT_ERANGE.
PT_API int pt_job_var(pt_job *job, const char *name, uint64_t n,
    double bound);

// pt_job_var_values gives variable var (an index of pt_job_var) initial
// values of the program's own instead of the uniform draw: n floats,
// copied, all finite (a model whose initialisation is its framework's,
// such as PyTorch's). Every process of the job gives the same values:
// the hello compares a hash of them. Before pt_server_open. PT_ERANGE
// (no such variable), PT_EINVAL (a value not finite, named), PT_ENOMEM.
PT_API int pt_job_var_values(pt_job *job, int var, const float *values);

// pt_job_table declares the next embedding table: `name` (1 to 31 bytes,
// unique among variables and tables), rows of dim floats (1 to 65536)
// addressed by 64-bit ids, kept apart from the variables' key space. Row
// id lives on one server, chosen by a hash of the id, and is created
// there when first pushed to, with initial values uniform in [-init,
// init] that depend only on (the job's seed, the table, id): any number
// of servers gives the same values. A job with tables needs at least one
// variable as well; checkpoints hold the rows. Returns the table's index
// (>= 0), or -PT_EINVAL / -PT_ERANGE (past 8 tables).
PT_API int pt_job_table(pt_job *job, const char *name, uint32_t dim,
    double init);

// pt_job_set sets option `name` to value, checked as pstrain's flag of
// that name is (docs/API.md). The options are the job's own: mode,
// servers, workers, batch, lr, seed, out, tls-cert, tls-key, tls-ca,
// rpc-timeout, auth-timeout, secret-file, t0, tensorboard, staleness,
// backup-workers,
// staleness-lr, max-staleness, optimizer, weight-decay, checkpoint-dir,
// checkpoint-every, resume-version, worker-timeout, lr-scaling,
// matched-lr, alone-timeout, connect-timeout, step-max, grad-bound,
// table-capacity, table-evict, table-admit; and
// warmup-steps, which ramps the learning rate linearly from 0 over that
// many steps. Options about pstrain's own trainer and data (model, data,
// epochs, ...) are refused. Switches take true or false. PT_EINVAL naming the option.
PT_API int pt_job_set(pt_job *job, const char *name, const char *value);

// pt_job_model declares pstrain's own model `spec` as the job's variables:
// "softmax", "mlp:H1,H2,..." (ReLU hidden layers) or "cnn:C1,..." (3x3
// conv layers with ReLU and 2x2 max-pools, then a dense layer; dim must
// be a square, one-channel image), for inputs of dim floats and `classes`
// classes. Its weights and biases are the variables w0, b0, w1, b1, ...
// in that order (docs/FORMATS.md gives their shapes), initialized as
// `pstrain run --model spec` initializes them, so that a program and
// pstrain's own processes can serve and train the same job. Only on a job
// with no variables yet. PT_EINVAL naming the spec or the dim.
PT_API int pt_job_model(pt_job *job, const char *spec, uint32_t dim,
    uint32_t classes);

// pt_job_summary writes OUT/summary.json and OUT/staleness.csv for a job
// of the program that has ended, from its processes' files in OUT (option
// out), as `pstrain run` does for its own (docs/OUTPUTS.md), so that
// `pstrain compare --report-only`, the dashboard and the plots read it:
// the records of pt_worker_step, pt_worker_eval and pt_worker_final, and
// the servers' server-R.json, waited for up to 30 s. One process calls
// it once every server has closed (a launcher of the job's processes, or
// the worker whose pt_worker_done stopped the servers). The model and
// data are "program"; the steps, the most any worker recorded; start-up
// and wall time count from option t0 (null without it). With option
// tensorboard DIR it writes the job's TensorBoard event files there too,
// from the same files, as `pstrain run --tensorboard DIR` does. Nothing
// is printed: the log says where it went. PT_EINVAL without option out,
// PT_EIO naming the file, PT_ENOMEM.
PT_API int pt_job_summary(const pt_job *job);

// ---------------------------------------------------------------- net

// A pt_net computes the loss and gradient of a job's pstrain model
// (pt_job_model) on a batch, as pstrain's own workers do: the parameters
// and gradient are the job's whole key space, one flat vector of
// pt_net_size floats (variable PT_ALL, offset 0, for push and pull). It
// holds shapes and scratch sized at alloc for max_batch rows, never the
// parameters; one thread at a time, and it allocates nothing after
// pt_net_alloc. Images and features are row-major floats, labels bytes.
typedef struct pt_net pt_net;

// pt_net_alloc makes the net of job's model for batches of up to
// max_batch rows (job may be freed after). PT_EINVAL when the job's
// variables were declared one by one (pt_job_var) or max_batch is 0;
// PT_ENOMEM. On success *out is the caller's, to pt_net_free.
PT_API int pt_net_alloc(pt_net **out, const pt_job *job, uint32_t max_batch);
PT_API void pt_net_free(pt_net *net);

// pt_net_size is the number of parameters: the length of params and grad.
PT_API uint64_t pt_net_size(const pt_net *net);

// pt_net_grad runs forward and backward on b examples (1 <= b <=
// max_batch): x is (b, dim), y (b) labels below classes, params
// (pt_net_size). The mean cross-entropy goes to *loss and its gradient to
// grad (pt_net_size floats, all overwritten). PT_EINVAL for a bad b or
// label (nothing written). A non-finite loss is returned as it is.
PT_API int pt_net_grad(pt_net *net, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b);

// pt_net_eval runs forward only on b examples (0 <= b <= max_batch):
// the summed (not mean) cross-entropy goes to *loss_sum, and the number of
// examples whose largest output is their label to *correct, so that a
// caller can add up a data set in chunks. PT_EINVAL as for pt_net_grad.
PT_API int pt_net_eval(pt_net *net, double *loss_sum, uint32_t *correct,
    const float *params, const float *x, const uint8_t *y, uint32_t b);

// ---------------------------------------------------------------- server

typedef struct pt_server pt_server;

// pt_server_open builds server `rank`'s shard of job (initial values, or
// the checkpoint to resume from), and listens on url (ipc://, tcp://,
// tls+tcp://; "tcp://127.0.0.1:0" picks a free port). The job's secret
// comes from option secret-file, or else the environment variable
// PSTRAIN_SECRET (hex); without one, PT_EINVAL. On success *out is the
// caller's, to pt_server_close.
PT_API int pt_server_open(pt_server **out, const pt_job *job, uint32_t rank,
    const char *url);

// pt_server_url writes the address workers dial (with the port chosen
// for ":0") into buf. PT_EINVAL when it does not fit.
PT_API int pt_server_url(const pt_server *s, char *buf, uint64_t size);

// pt_server_serve answers requests until the job ends (a worker's
// shutdown once every worker is done or lost, or a control client's) or
// pt_server_stop is called. Blocks; returns 0. A server also stops once
// no worker is left to end the job: none connected and each finished or
// lost, a worker that has not arrived within option "alone-timeout"
// seconds of pt_server_open counting as lost (60 by default; "0" waits
// forever). It then returns PT_ECLOSED.
PT_API int pt_server_serve(pt_server *s);

// pt_server_stop makes pt_server_serve return; from any thread.
PT_API void pt_server_stop(pt_server *s);

// pt_server_close writes the server's statistics (out/server-R.json when
// option out is set), stops listening and frees s.
PT_API void pt_server_close(pt_server *s);

// ---------------------------------------------------------------- worker

typedef struct pt_worker pt_worker;
typedef struct pt_req pt_req; // one push, pull or pushpull under way
typedef struct pt_lent pt_lent; // a reply whose values are read in place

// pt_worker_open dials every server (urls: comma-separated, in server
// rank order) as worker `rank`, and says hello: the servers check that
// this worker's variables, mode and worker count are theirs. Waits at
// most option rpc-timeout seconds for them. On success *out is the
// caller's, to pt_worker_close.
PT_API int pt_worker_open(pt_worker **out, const pt_job *job, uint32_t rank,
    const char *urls);

// Ranges: (var, off, n) is elements [off, off + n) of variable var, or of
// the whole key space when var is PT_ALL. A range may span servers; each
// gets its part (except a range whose values are lent).
#define PT_ALL (-1)

// pt_push sends the gradient of step `step` for a range: grad (n floats)
// stays the caller's and must not change until pt_wait returns. Sync: a
// step's gradient may arrive in several pushes, in any order, each range
// once; the step closes when every worker's whole gradient is in. Without
// backup workers a range every worker has pushed is applied at once (the
// same bits as at the close), and a pushpull or pull of it is answered
// then, with the next version's values for it. Async:
// applied at once. *req is the caller's, to pt_wait. Steps count from
// the value of pt_worker_start; push a step's ranges before the next
// step's.
PT_API int pt_push(pt_worker *w, int64_t step, int var, uint64_t off,
    uint64_t n, const float *grad, pt_req **req);

// pt_pull fetches a range into vals (n floats, written by pt_wait): in
// sync mode the values after the last step this worker pushed (waiting
// for that step to close), otherwise the latest. vals NULL lends the
// values instead (pt_wait_lent): the range must then lie within one
// server's shard, else PT_EINVAL saying that it spans servers.
PT_API int pt_pull(pt_worker *w, int var, uint64_t off, uint64_t n,
    float *vals, pt_req **req);

// pt_pushpull is pt_push then pt_pull of the same range; in ssp mode it
// is where the staleness bound holds the worker back. One round trip
// per server when the range covers its whole shard. vals NULL lends the
// values, as pt_pull does.
PT_API int pt_pushpull(pt_worker *w, int64_t step, int var, uint64_t off,
    uint64_t n, const float *grad, float *vals, pt_req **req);

// Rows of embedding tables (pt_job_table), each on the server a hash of
// its id picks. The calls block until every server concerned has
// answered. pt_pushpull_rows pushes the gradients of n rows of `table`
// (ids, grads n x dim; an id given more than once has its gradients
// summed) for step `step`, then pulls the values of n_pull rows
// (pull_ids, into vals n_pull x dim; an id may repeat). In sync mode a
// push is this worker's part of the table's step: every worker pushes
// (n may be 0) once per step, the step closes when every live worker's
// part is in, each row is updated once with the mean of its gradients,
// and the pulled rows are those of the closed step. In async and ssp
// each push is applied as it arrives and the pull reads the rows as they
// are. pt_pull_rows (no push, no step) reads rows as they are;
// pt_push_rows pushes and pulls nothing. A row never pushed to reads as
// its initial values. 0, or PT_ERANGE (no such table), PT_EINVAL, or an
// error of the servers naming the row or table.
PT_API int pt_pushpull_rows(pt_worker *w, int table, int64_t step,
    uint64_t n, const uint64_t *ids, const float *grads, uint64_t n_pull,
    const uint64_t *pull_ids, float *vals);
PT_API int pt_pull_rows(pt_worker *w, int table, uint64_t n,
    const uint64_t *ids, float *vals);
PT_API int pt_push_rows(pt_worker *w, int table, int64_t step, uint64_t n,
    const uint64_t *ids, const float *grads);

// pt_wait blocks until req is answered, writes any values, and frees
// req. Returns 0, or the first server's error (PT_ESTATE for a step out
// of turn, PT_ERANGE for a range outside the variables, PT_ETIMEDOUT,
// PT_ECLOSED for a server that went away, ...). A request that lends its
// values (vals NULL) is waited for too: its values are dropped.
PT_API int pt_wait(pt_worker *w, pt_req *req);

// pt_wait_lent is pt_wait for a pull or pushpull made with vals NULL: it
// blocks, frees req and fails as pt_wait does, and on success points
// *vals at the n values (read-only) where the reply brought them, no
// copy made, and gives the loan to *lent. The values stay valid until
// pt_lent_free(w, *lent), which the caller owes. Values the reply does
// not hold aligned for floats (a peer or transport that places them
// otherwise; pstrain's server pads its headers so that they are) are
// copied into an aligned buffer the loan owns, and that copy is lent.
// Any other request, or vals or lent NULL: PT_EINVAL, with req
// still waited for and freed as pt_wait does (values written into its
// buffer); *vals and *lent are written only on success.
PT_API int pt_wait_lent(pt_worker *w, pt_req *req, const float **vals,
    pt_lent **lent);

// pt_lent_free ends the loan: the values are gone, and the reply carries
// the next request of its server (no message allocated for it). NULL is
// fine. pt_worker_close frees the loans still out, and their values.
PT_API void pt_lent_free(pt_worker *w, pt_lent *lent);

// pt_worker_start is the step this worker goes on from: 0 in a new job;
// later when the servers resumed from a checkpoint or the worker
// rejoined after a restart.
PT_API int64_t pt_worker_start(const pt_worker *w);

// What the servers report to a worker (pt_worker_stats).
typedef struct pt_stats {
	int64_t version;    // lowest parameter version among the servers
	uint64_t updates;   // updates applied, summed over servers
	uint64_t dropped;   // gradients dropped by a consistency rule
	uint64_t rejected;  // requests refused with an error
	uint64_t stale_max; // largest staleness of an applied gradient
	double stale_mean;  // mean staleness of the applied gradients
	uint32_t done;      // workers that said done (server 0's count)
	uint32_t lost;      // workers lost (server 0's count)
} pt_stats;

// pt_worker_stats asks every server for its counters.
PT_API int pt_worker_stats(pt_worker *w, pt_stats *st);

// pt_worker_done tells the servers this worker has finished. The last
// worker to finish (every other done or lost) also stops the servers, so
// that pt_server_serve returns.
PT_API int pt_worker_done(pt_worker *w);

// Records. A worker whose job has option "out" (a folder) writes there
// what pstrain's own workers write (docs/OUTPUTS.md), so that `pstrain
// dashboard` and the readers of a job's files read a program's job as
// theirs: OUT/worker-R.csv, a row per pt_worker_step, OUT/eval.csv, a row
// per pt_worker_eval (a resumed or rejoining worker adds to them), and
// OUT/final.csv; pt_job_summary then writes summary.json. Without option
// out the worker calls return 0 and write nothing.
//
// pt_worker_step ends step `step` (its requests waited for): loss,
// grad_norm (the norm of the gradient it pushed; NAN if unknown) and
// compute_ms (the time the program spent computing it) are the
// program's. The library adds the rest: the step's length (since the
// previous call, or for the first step since its first request less
// compute_ms), its end as wall_s (seconds since option t0, the job's
// start that a launcher gives every process, else since the first
// step), comm_ms (the length less compute_ms), the largest staleness,
// learning rate and lowest version the servers replied with since the
// previous call, the bytes sent and received, the process's page faults
// and peak memory. PT_EINVAL for a negative step or compute_ms, PT_EIO
// naming the file.
PT_API int pt_worker_step(pt_worker *w, int64_t step, double loss,
    double grad_norm, double compute_ms);

// pt_worker_eval adds a row to OUT/eval.csv: the program evaluated the
// parameters of `version` (the servers' version; -1: that of the values
// this worker pulled last) on held-out validation data: mean loss,
// accuracy, and eval_s the seconds it took; the library adds wall_s and
// the steps this worker has recorded. Any worker may call it (pstrain's
// own jobs: worker 0). PT_EIO naming the file.
PT_API int pt_worker_eval(pt_worker *w, int64_t version, double loss,
    double acc, double eval_s);

// pt_worker_final ends this worker's records with OUT/final.csv, as
// pstrain's finishing worker writes it: test_loss and test_acc, the
// program's evaluation of the final parameters on its test set (NAN when
// it made none), with what the library kept: the steps and the last loss
// recorded, the training time, the last and the best of the rows this
// worker added to eval.csv. One worker calls it, after its last step.
// Without option out it returns 0. PT_EIO naming the file.
PT_API int pt_worker_final(pt_worker *w, double test_loss, double test_acc);

// pt_worker_close closes the connections and frees w, with the loans of
// pt_wait_lent not given back.
PT_API void pt_worker_close(pt_worker *w);

// ---------------------------------------------------------------- node

// A job whose scheduler starts one process per task (srun, mpirun), each
// finding the others through a folder every host sees, as `pstrain node`
// does (DIR/nodes/ID/ROLE-R.url). pt_node_task reads this task's rank and
// the task count (SLURM_PROCID and SLURM_NTASKS, else
// OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE, PMI_RANK and PMI_SIZE,
// RANK and WORLD_SIZE: srun, Open MPI, MPICH, torchrun) and names the job
// (slurm-JOB.STEP, ompi-ID, torchrun-ID) into id (id_size bytes):
// PT_ENOENT when no scheduler says, PT_EINVAL naming a variable that is
// wrong.
// pt_node_address writes the address this host is reached at (its first
// IPv4 address that is up and not loopback, else 127.0.0.1; size >= 16).
// pt_node_publish writes url as ROLE-R's address into dir, whole (by a
// rename); pt_node_gather waits at most timeout_s seconds for those of
// ROLE-0 .. ROLE-(n-1) and lists them in out (size bytes), comma-separated
// in rank order, as pt_worker_open takes them: PT_ETIMEDOUT naming the
// first file missing, PT_EIO, PT_EINVAL.
PT_API int pt_node_task(uint32_t *rank, uint32_t *size, char *id,
    uint64_t id_size);
PT_API int pt_node_address(char *out, uint64_t size);
PT_API int pt_node_publish(const char *dir, const char *role, uint32_t rank,
    const char *url);
PT_API int pt_node_gather(const char *dir, const char *role, uint32_t n,
    double timeout_s, char *out, uint64_t size);

#ifdef __cplusplus
}
#endif

#endif // PSTRAIN_H
