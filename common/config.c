// common/config.c - the flag table and its parser (see config.h).
#include "common/config.h"

#include <errno.h>
#include <strings.h>
#include <math.h>
#include <stddef.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/data.h"
#include "common/err.h"
#include "common/layout.h"
#include "common/mode.h"
#include "common/outputs.h"
#include "common/proto.h"
#include "common/transport.h"

enum { T_U32, T_U64, T_I64, T_F64, T_STR, T_MODE, T_TRANSPORT, T_PLACE, T_BOOL,
	T_LIST, T_LRSCALE, T_LPUSH, T_EVICT };

typedef struct config_entry {
	const char *name;
	int type;
	size_t off, size;
	const char *def;
	double min, max;
	uint32_t cmds;
	const char *metavar;
	const char *help;
} config_entry;

#define RUN PT_CMD_RUN
#define SRV PT_CMD_SERVER
#define WRK PT_CMD_WORKER
#define EVL PT_CMD_EVAL
#define CMP PT_CMD_COMPARE
#define NOD PT_CMD_NODE
#define E(n, t, f, def, lo, hi, cmds, mv, help)                               \
	{n, t, offsetof(pti_config, f), sizeof(((pti_config *)0)->f), def, lo,  \
	    hi, cmds, mv, help}

// The names a flag of a few choices takes (T_MODE, T_TRANSPORT, T_PLACE,
// T_LRSCALE, T_LPUSH, T_EVICT: stored as an int), in the order its error
// lists them; the first also names a value that is none of them.
typedef struct config_choice {
	const char *name;
	int value;
} config_choice;

static const config_choice choice_mode[] = {{"sync", PT_MODE_SYNC},
    {"async", PT_MODE_ASYNC}, {"ssp", PT_MODE_SSP},
    {"allreduce", PT_MODE_ALLREDUCE}, {"hybrid", PT_MODE_HYBRID},
    {NULL, 0}};
static const config_choice choice_transport[] = {{"ipc", PT_TRANSPORT_IPC},
    {"tcp", PT_TRANSPORT_TCP}, {"tls", PT_TRANSPORT_TLS},
    {"shm", PT_TRANSPORT_SHM}, {"auto", PT_TRANSPORT_AUTO}, {NULL, 0}};
static const config_choice choice_place[] = {{"none", PT_PLACE_NONE},
    {"dedicated", PT_PLACE_DEDICATED}, {"colocated", PT_PLACE_COLOCATED},
    {NULL, 0}};
static const config_choice choice_lrscale[] = {{"none", PT_LR_NONE},
    {"linear", PT_LR_LINEAR}, {NULL, 0}};
static const config_choice choice_lpush[] = {{"auto", PT_LP_AUTO},
    {"on", PT_LP_ON}, {"off", PT_LP_OFF}, {NULL, 0}};
static const config_choice choice_evict[] = {{"lru", PTI_EVICT_LRU},
    {"lfu", PTI_EVICT_LFU}, {NULL, 0}};

// config_choices is the names of a choice type, or NULL.
static const config_choice *config_choices(int type)
{
	switch (type) {
	case T_MODE:
		return choice_mode;
	case T_TRANSPORT:
		return choice_transport;
	case T_PLACE:
		return choice_place;
	case T_LRSCALE:
		return choice_lrscale;
	case T_LPUSH:
		return choice_lpush;
	case T_EVICT:
		return choice_evict;
	}
	return NULL;
}

static const char *choice_name(const config_choice *ch, int value)
{
	for (const config_choice *k = ch; k->name != NULL; k++)
		if (k->value == value)
			return k->name;
	return ch[0].name;
}

// choice_set stores the value named v of flag e's choices ch at p, or
// refuses v naming every choice.
static int choice_set(const config_entry *e, const config_choice *ch,
    int *p, const char *v)
{
	char names[128] = "";
	size_t used = 0;
	for (const config_choice *k = ch; k->name != NULL; k++) {
		if (strcmp(v, k->name) == 0) {
			*p = k->value;
			return 0;
		}
		used += (size_t)snprintf(names + used, sizeof(names) - used,
		    "%s%s", k == ch ? "" : k[1].name == NULL ? " or " : ", ",
		    k->name);
	}
	return pti_err_set(PT_EINVAL, "--%s: '%s' is not %s", e->name, v,
	    names);
}

static const config_entry config_table[] = {
    E("mode", T_MODE, job.mode, "sync", 0, 0, RUN | SRV | WRK,
	"sync|async|ssp|allreduce|hybrid",
	"sync: each step waits for every worker's gradient and applies "
	"their mean; async: each gradient is applied as it arrives; ssp: "
	"as async, but no worker runs more than --staleness steps ahead; "
	"allreduce: no servers, each worker holds the model and the "
	"workers average their gradients in a ring; hybrid (lr, fm:K): "
	"embedding rows as async, each worker's at 1/W of its gradient, "
	"the other variables as sync"),
    E("servers", T_U32, job.servers, "1", 0, 256, RUN | SRV | WRK, "S",
	"number of parameter servers (none with --mode allreduce)"),
    E("workers", T_U32, job.workers, "1", 1, 1024, RUN | SRV | WRK, "W",
	"number of workers"),
    E("model", T_STR, model, "softmax", 0, 0, RUN | SRV | WRK, "SPEC",
	"softmax, mlp:H1,H2,... (ReLU hidden layers), cnn:C1,...[/H1,...] "
	"(1 to 4 3x3 conv layers of C channels, each with ReLU and 2x2 "
	"max-pool, on square one-channel images, then up to 3 ReLU dense "
	"layers of H units); on ids (ctr, fashion-mnist:hashed), lr (sparse "
	"logistic regression; softmax regression on more than 2 classes), "
	"fm:K (on a click set: a factorization machine of K factors) or "
	"wide-deep:K,H1,... (wide weights and K-float embeddings per id, the "
	"embeddings into an MLP of 1 to 3 ReLU hidden layers), whose rows "
	"of ids live in an embedding table on the servers"),
    E("data", T_STR, data, "fashion-mnist", 0, 0, RUN | SRV | WRK | EVL,
	"SPEC",
	"fashion-mnist, fashion-mnist:DIR (the four IDX .gz files), "
	"synthetic:N, fashion-mnist:hashed[:DIR] (its images as 378 hashed "
	"ids each: 2x2 blocks' intensity levels and pairs of neighbouring "
	"blocks, in 2^20 ids), or ctr:N,F,V[,SEED[,SKEW[,K]]] (a click "
	"set: N examples of F fields, each an id of V with Zipf frequencies "
	"of exponent SKEW (1.1), clicks from a planted factorization "
	"machine of K factors (4; 0: a linear model) whose AUC is the best "
	"any model can reach; SEED (1) is the data's own)"),
    E("epochs", T_U32, epochs, "1", 1, 100000, RUN | WRK, "E",
	"passes over the training set"),
    E("steps", T_U64, steps, "0", 0, 1e12, RUN | WRK, "N",
	"global steps to run instead of --epochs (0: use --epochs; the two "
	"together are refused)"),
    E("batch", T_U32, job.batch, "256", 1, 1 << 20, RUN | SRV | WRK, "B",
	"global batch; each worker computes on B/W examples"),
    E("lr", T_F64, job.lr, "0", 0, 1e6, RUN | SRV | WRK, "LR",
	"learning rate of the optimizer (the servers', or allreduce "
	"workers'); 0: its usual one, 0.1 for sgd, momentum, nesterov and "
	"ftrl (its alpha), 0.01 for adagrad, 0.001 for adam"),
    E("seed", T_U64, job.seed, "1", 0, 2e19, RUN | SRV | WRK | EVL, "N",
	"seeds initial values, data order and synthetic data"),
    E("eval-every", T_U64, eval_every, "0", 0, 1e12, RUN | WRK, "N",
	"evaluate every N steps (0: --evals-per-epoch times per epoch)"),
    E("out", T_STR, job.out, "", 0, 0, RUN | SRV | WRK, "DIR",
	"output folder (run: required; created if missing)"),
    E("save-model", T_STR, save_model, "", 0, 0, RUN | WRK, "FILE",
	"write the final parameters to FILE (docs/FORMATS.md)"),
    E("transport", T_TRANSPORT, transport, "auto", 0, 0, RUN | SRV | WRK,
	"auto|ipc|shm|tcp|tls",
	"ipc:// sockets; shm: ipc with the dense values in shared memory "
	"(not allreduce); tcp:// on 127.0.0.1; tls+tcp:// on 127.0.0.1 "
	"(with --tls-cert, --tls-key and --tls-ca); auto: shm for a mode "
	"with servers, ipc for allreduce, tcp between emulated hosts "
	"(compare: ipc for every job when one mode is allreduce). server, "
	"worker: their addresses say which; auto: a server at an ipc:// "
	"address offers shm, a worker whose servers all are uses it where "
	"they offer it; ipc (or tcp, tls): no shm"),
    E("link", T_STR, link, "", 0, 0, RUN, "RATE[,DELAY]",
	"emulated hosts (network namespaces on a bridge; needs root or "
	"unprivileged user namespaces), each host's link shaped both ways "
	"at RATE (tc units: 100mbit, 1gbit), and DELAY one way (200us, 1ms: "
	"netem, or where the kernel has none each process's --send-delay); "
	"implies --placement dedicated and --transport tcp"),
    E("send-delay", T_STR, send_delay, "", 0, 0, SRV | WRK | NOD, "DELAY",
	"hold each message this process sends for DELAY (us, ms or s: "
	"200us) before it goes out, as a link's one-way delay; run --link "
	"RATE,DELAY gives it to every process where the kernel has no "
	"netem"),
    E("placement", T_PLACE, placement, "none", 0, 0, RUN,
	"none|dedicated|colocated",
	"emulated hosts: dedicated puts each server and each worker on a "
	"host of its own, colocated server s on worker s's host (S <= W); "
	"none runs every process here"),
    E("tls-cert", T_STR, job.tls_cert, "", 0, 0, RUN | SRV | WRK, "FILE",
	"tls+tcp://: this process's certificate (PEM), signed by --tls-ca; "
	"run gives the same one to servers and workers "
	"(scripts/certs.sh makes them)"),
    E("tls-key", T_STR, job.tls_key, "", 0, 0, RUN | SRV | WRK, "FILE",
	"tls+tcp://: the private key of --tls-cert (PEM, unencrypted)"),
    E("tls-ca", T_STR, job.tls_ca, "", 0, 0, RUN | SRV | WRK, "FILE",
	"tls+tcp://: the CA certificate (PEM) that every peer's certificate "
	"must be signed by: servers refuse workers without one"),
    E("rpc-timeout", T_F64, job.rpc_timeout, "600", 0.1, 1e6, RUN | WRK, "S",
	"seconds a worker waits for a server's reply, or for a server that "
	"went away to come back, before failing"),
    E("rank", T_U32, rank, "0", 0, 1023, SRV | WRK, "R",
	"this process's rank among the servers or the workers"),
    E("listen", T_STR, listen, "", 0, 0, SRV | WRK, "URL",
	"address to serve on, e.g. tcp://0.0.0.0:7000, ipc:///tmp/ps0 or "
	"tls+tcp://0.0.0.0:7000 (with --tls-cert, --tls-key, --tls-ca); an "
	"allreduce worker's ring listens there (with --ring-dir; port 0: "
	"any free one)"),
    E("connect", T_STR, connect, "", 0, 0, WRK, "URL,URL,...",
	"the servers' addresses, in server rank order (allreduce: every "
	"worker's ring address, in worker rank order)"),
    E("ring-dir", T_STR, ring_dir, "", 0, 0, WRK, "D",
	"allreduce: publish this worker's ring address (--listen) as "
	"D/worker-R.url and find the others' there, instead of --connect; "
	"D is a folder every worker sees"),
    E("config", T_STR, config, "", 0, 0, RUN | SRV | WRK | CMP | NOD, "FILE",
	"more flags from FILE, one 'flag = value' a line (a switch: 'flag = "
	"true'; '#' starts a comment), taken before the command line's, "
	"which win"),
    E("cluster", T_STR, cluster, "", 0, 0, SRV | WRK, "FILE",
	"cluster file: 'server URL' lines in rank order and one 'worker "
	"HOST' line per worker (allreduce: 'worker URL' lines only, each "
	"worker's ring address in rank order); sets --servers, --workers, "
	"--listen and --connect"),
    E("ready-file", T_STR, ready_file, "", 0, 0, SRV, "FILE",
	"write the bound address to FILE once listening"),
    E("auth-timeout", T_F64, job.auth_timeout, "10", 0.1, 3600, RUN | SRV, "S",
	"seconds a connection may stay without proving the job secret "
	"before the server closes it (with any message it left unfinished)"),
    E("shm", T_BOOL, job.shm, "0", 0, 1, RUN | SRV | WRK, "",
	"dense values through shared memory, not the socket: a push's are "
	"read where the worker wrote them, a pull's where the server keeps "
	"them, copied out under a seqlock where they may change meanwhile, "
	"and a step's headers go through a box there with futex wake-ups "
	"(what --transport shm sets; ipc:// addresses, a mode with servers)"),
    E("secret-file", T_STR, job.secret_file, "", 0, 0, SRV | WRK, "FILE",
	"the job secret (hex, mode 0600; make one with 'pstrain secret "
	"FILE'); without it, the PSTRAIN_SECRET environment variable, which "
	"'pstrain run' sets for its processes"),
    E("t0", T_F64, job.t0, "0", 0, 1e12, SRV | WRK, "T",
	"job start time (seconds since 1970) for wall_s columns; 0: now"),
    E("model-file", T_STR, model_file, "", 0, 0, EVL, "FILE",
	"saved model to evaluate"),
    E("staleness", T_U32, job.staleness, "0", 0, 1e6, RUN | SRV, "S",
	"ssp: a worker may not start step c+1 until every worker has "
	"pushed step c-S (run: needed with --mode ssp)"),
    E("backup-workers", T_U32, job.backup_workers, "0", 0, 1023, RUN | SRV,
	"B", "sync: a step closes with the first W-B gradients; later ones "
	"are dropped and counted"),
    E("layer-push", T_LPUSH, layer_push, "auto", 0, 0, RUN | WRK,
	"auto|on|off", "sync: push each piece of the gradient as backward "
	"produces it, first layer first, and wait for a layer's new values "
	"only when the next forward needs them (the same result as one "
	"pushpull; not with --backup-workers). auto: on for a sync job of "
	"pstrain run whose processes fit the cores it may use, off "
	"otherwise (and in pstrain compare, and for a worker started by "
	"hand)"),
    E("prefetch", T_BOOL, prefetch, "0", 0, 1, RUN | WRK, "",
	"gather the next step's examples in a thread while this step "
	"computes (the same examples)"),
    E("pin", T_BOOL, pin, "0", 0, 1, RUN, "",
	"bind worker r to the r-th CPU the launcher may use and server s "
	"to the (W+s)-th, round the CPUs (the same results)"),
    E("worker-threads", T_U32, worker_threads, "1", 1, 64, RUN, "N",
	"OpenBLAS threads of each worker (every other process has one, "
	"unless OPENBLAS_NUM_THREADS says otherwise): 2 lets the worker of "
	"a 1 x 1 job compute on the core its server leaves idle "
	"(docs/PERFORMANCE.md)"),
    E("staleness-lr", T_BOOL, job.staleness_lr, "0", 0, 1, RUN | SRV, "",
	"async/ssp: scale each gradient's lr by 1/max(1, staleness)"),
    E("max-staleness", T_I64, job.max_staleness, "-1", -1, 1e9, RUN | SRV,
	"K", "async/ssp: drop (and count) gradients staler than K (-1: "
	"keep all)"),
    E("optimizer", T_STR, job.optimizer, "sgd", 0, 0, RUN | SRV | WRK,
	"sgd|momentum:M|nesterov:M|adagrad|adam[:B1,B2,EPS]|ftrl[:BETA,L1,L2]",
	"the optimizer; its state lives with each server's shard (allreduce: "
	"with every worker); ftrl is FTRL-proximal (defaults 1, 0, 0), which "
	"computes each value from its state alone: a value's start is "
	"forgotten at its first update"),
    E("weight-decay", T_F64, job.weight_decay, "0", 0, 1e3, RUN | SRV | WRK,
	"WD",
	"L2 weight decay: each gradient gains WD x parameter"),
    E("checkpoint-dir", T_STR, job.checkpoint_dir, "", 0, 0, RUN | SRV | WRK,
	"D", "each server writes its shard to D (allreduce: worker 0 the "
	"whole model; docs/FORMATS.md)"),
    E("checkpoint-every", T_STR, job.checkpoint_every, "", 0, 0,
	RUN | SRV | WRK,
	"N|Ns", "checkpoint every N steps (sync) or updates, or every N "
	"seconds"),
    E("resume", T_STR, resume, "", 0, 0, RUN, "D",
	"go on from the newest checkpoint in D that every server "
	"completed"),
    E("resume-version", T_I64, job.resume_version, "-1", -1, 1e15, SRV | WRK,
	"V", "load D/server-R-vV.ckpt from --checkpoint-dir before serving "
	"(allreduce workers: D/server-0-vV.ckpt, the whole model)"),
    E("worker-timeout", T_F64, job.worker_timeout, "0", 0, 1e6, RUN | SRV, "S",
	"a worker silent for S seconds while a step waits for it counts as "
	"dead (0: only a closed connection counts)"),
    E("restart-workers", T_U32, restart_workers, "0", 0, 1e6, RUN, "N",
	"restart failed workers, N times in all; the restarted worker "
	"rejoins at the current version (allreduce: every worker starts "
	"again from the newest checkpoint)"),
    E("restart-servers", T_U32, restart_servers, "0", 0, 1e6, RUN, "N",
	"restart a dead server from its newest checkpoint, N times in all; "
	"the workers reconnect (sync: every server goes back to the newest "
	"checkpoint they all completed)"),
    E("gone-workers", T_STR, gone_workers, "", 0, 0, SRV, "R,R,...",
	"workers that left the job before this server started (a restart): "
	"no step waits for them"),
    E("lr-scaling", T_LRSCALE, job.lr_scaling, "none", 0, 0,
	RUN | SRV | WRK,
	"none|linear", "linear: lr x batch / 256"),
    E("warmup-epochs", T_F64, warmup_epochs, "0", 0, 1e6,
	RUN | SRV | WRK, "E",
	"ramp the lr linearly from 0 to its target over E epochs"),
    E("straggler", T_LIST, straggler, "", 0, 0, RUN | WRK, "R:MS",
	"delay worker R by MS milliseconds every step (repeatable)"),
    E("delay", T_STR, delay, "", 0, 0, RUN | WRK, "exp:MEAN|uniform:LO:HI",
	"a seeded random delay in ms for every worker and step"),
    E("validation", T_STR, validation, "0", 0, 0, RUN | SRV | WRK, "N|P%",
	"hold N training examples (or P percent) out of training as a "
	"validation set, the same for every seed; periodic evaluations, "
	"best accuracy and time to target use it, the test set is "
	"evaluated only at the end (compare: 10% unless given)"),
    E("acc-floor", T_F64, acc_floor, "0", 0, 1, RUN, "A",
	"the outcome is collapsed when the final training accuracy on the "
	"whole training set is under A (0: twice chance, 2 / classes; none "
	"for 2 classes, a click set), or the final training loss is above "
	"0.9 ln(classes)"),
    E("evals-per-epoch", T_U32, evals_per_epoch, "1", 1, 1000, RUN | WRK,
	"K", "evaluate K times per epoch when --eval-every is 0 (compare: "
	"10 unless given)"),
    E("matched-lr", T_BOOL, job.matched_lr, "0", 0, 1, RUN | SRV, "",
	"async/ssp: apply each worker's gradient at lr / W, so that the "
	"parameters move as far per example as in sync at the same --lr "
	"(sgd, momentum, nesterov; adagrad and adam scale steps by the "
	"gradients' size, so there lr / W moves 1/W to 1/sqrt(W) as far)"),
    E("force", T_BOOL, force, "0", 0, 1, RUN, "",
	"write into an --out folder that holds a previous run (its files "
	"are removed first)"),
    E("supervised", T_BOOL, supervised, "0", 0, 1, SRV | WRK, "",
	"set by pstrain run for the processes it starts, since it shows "
	"the progress, writes summary.json and stops the servers itself; "
	"without it a worker creates --out, worker 0 prints the progress, "
	"the finishing worker writes summary.json, and a server stops "
	"once it has no workers left (--alone-timeout)"),
    E("step-max", T_I64, job.step_max, "0", 0, 1125899906842624.0, SRV, "N",
	"the highest step a worker's push or hello may carry, refused above "
	"(0: 2^50); pstrain run gives its servers the job's planned steps "
	"and a tenth more"),
    E("grad-bound", T_F64, job.grad_bound, "1e4", 0, 1e30, RUN | SRV, "K",
	"a server refuses (and counts) a push whose gradient, as root mean "
	"square over its range, is more than K times the median of the last "
	"32 pushes it took for that range (a median under 1e-4 counts as "
	"1e-4): one poisoned push changes nothing and the job ends damaged "
	"(0: no bound)"),
    E("table-capacity", T_U64, job.table_capacity, "0", 0, 1e15,
	RUN | SRV, "N",
	"embedding tables: each server holds at most N rows of each table; "
	"a new row past it evicts one (--table-evict), which then reads as "
	"its initial values again (0: no limit)"),
    E("table-evict", T_EVICT, job.table_evict, "lru", 0, 0, RUN | SRV,
	"lru|lfu",
	"the row a table at --table-capacity evicts: the least recently "
	"or the least often touched of 16 sampled"),
    E("table-admit", T_U32, job.table_admit, "1", 1, 1000000, RUN | SRV, "K",
	"embedding tables: an id becomes a row at its K-th push (a "
	"count-min sketch counts the ones before); until then its "
	"gradients are dropped and it reads as its initial values"),
    E("alone-timeout", T_F64, job.alone_timeout, "60", 0, 1e6, SRV, "S",
	"without --supervised: a worker that has not arrived S seconds "
	"after the server started counts as lost, and the server stops "
	"when no worker is left to finish the job (0: wait forever)"),
    E("connect-timeout", T_F64, job.connect_timeout, "60", 0.1, 1e6, WRK,
	"S", "seconds a worker waits for a server it has never reached (one "
	"not started yet, or not reachable from this host) before failing"),
    E("node-rank", T_I64, node_rank, "-1", -1, 1279, NOD, "N",
	"this process's rank among the job's S+W processes, servers first "
	"(-1: from SLURM_PROCID under srun, OMPI_COMM_WORLD_RANK under "
	"mpirun)"),
    E("job-id", T_STR, job_id, "", 0, 0, NOD, "ID",
	"names the job's folder DIR/nodes/ID where servers publish their "
	"addresses (default: SLURM_JOB_ID.SLURM_STEP_ID, or Open MPI's job "
	"id)"),
    E("advertise", T_STR, advertise, "", 0, 0, NOD, "HOST",
	"the address other hosts reach this one at (default: its first "
	"non-loopback IPv4 address, else 127.0.0.1)"),
    E("port", T_U32, port, "0", 0, 65535, NOD, "P",
	"server R listens on port P+R (0: on any free port; either way "
	"it publishes its address in DIR/nodes/ID)"),
    E("dashboard", T_BOOL, dashboard, "0", 0, 1, RUN, "",
	"serve the running job over HTTP at --dashboard-listen (its "
	"address printed at start): a page whose charts move as it trains "
	"(loss, accuracy, step time and utilization, gradient norm, "
	"staleness and idle time, events, ETA), its data at /data.json and "
	"Prometheus metrics at /metrics, read from the job's files; "
	"read-only, in the launcher (compare: one page of every job)"),
    E("dashboard-listen", T_STR, dashboard_listen, "127.0.0.1:0", 0, 0,
	RUN, "HOST:PORT", "where --dashboard serves (port 0: a free one; "
	"another host than 127.0.0.1 only when given)"),
    E("tensorboard", T_STR, job.tensorboard, "", 0, 0, RUN, "DIR",
	"write TensorBoard event files into DIR as the job runs: a run per "
	"worker (loss, gradient norm, step, compute and communication ms, "
	"staleness, lr at each step), one of the evaluations, and DIR's own "
	"with the job's flags and final scores (the HParams tab); "
	"tensorboard --logdir DIR shows them (compare: each job's under "
	"DIR/LABEL/seed-S)"),
    E("modes", T_STR, modes, "sync,async", 0, 0, CMP, "LIST",
	"modes to compare, each MODE[:S][:key=value...]: sync, async, "
	"ssp:S, allreduce, hybrid or sgd-small (one worker at batch B/W and lr/W: "
	"the small-batch control), then modifiers, each a flag of pstrain "
	"run for that mode's jobs alone (:key for a switch), e.g. "
	"sync:backup=1, async:matched-lr, sync:optimizer=adam:lr=0.001 "
	"(docs/COMPARE.md)"),
    E("target-acc", T_F64, target_acc, "0.8", 0, 1, CMP, "A",
	"validation accuracy (test accuracy with --validation 0) whose "
	"first crossing the report times"),
    E("target-auc", T_F64, target_auc, "0", 0, 1, CMP, "A",
	"on 2 classes (a click set): time the first crossing of "
	"validation AUC A instead of --target-acc's accuracy (0: off)"),
    E("baseline", T_STR, baseline, "", 0, 0, CMP, "MODE",
	"the mode (a token of --modes, or its label) every other mode is "
	"compared with seed by seed in the report's paired differences "
	"(default: the first of --modes)"),
    E("lr-grid", T_STR, lr_grid, "", 0, 0, CMP, "LR,LR,...|auto",
	"run each mode at each of these rates over --tune-seeds first (into "
	"DIR/tune), pick each mode's rate by its mean best validation "
	"accuracy (a failed job counts 0), then compare the modes each at "
	"its own rate over --seeds (2 to 8 rates); auto: --lr / 2, --lr and "
	"2 --lr, then a factor of 2 further past whichever end a mode's "
	"best rate is at, until it is inside (at most 8 rates a mode)"),
    E("tune-seeds", T_STR, tune_seeds, "2", 0, 0, CMP, "N|S,S,...",
	"the seeds --lr-grid picks the rates on: N for 1001..1000+N, or a "
	"list; never one of --seeds"),
    E("seeds", T_STR, seeds, "", 0, 0, CMP, "N|S,S,...|auto[:CAP]",
	"run every mode with seeds 1..N, or with the seeds listed; report "
	"mean, sd, min and max over them (default: --seed alone); auto: "
	"seeds 1..3, then one more while a mode's paired interval of "
	"best_val_acc against --baseline holds 0, up to CAP (10)"),
    E("allow-failures", T_BOOL, allow_failures, "0", 0, 1, CMP, "",
	"go on when a job is damaged (a worker lost or restarted, a server "
	"restarted) instead of stopping the comparison"),
    E("report-only", T_BOOL, report_only, "0", 0, 1, CMP, "",
	"run nothing: write the report and plots again from the jobs "
	"already in --out"),
    E("plot-style", T_STR, plot_style, "screen", 0, 0, CMP, "screen|paper",
	"the figures: screen (titles inside, sizes in pixels) or paper "
	"(one-column sizes in inches, 300 dpi PNG, fonts for print, no "
	"titles: plots/captions.md has them); PNG, SVG and PDF either way"),
    // compare's own --resume, a switch: run's (a folder) is not compare's.
    E("resume", T_BOOL, cmp_resume, "0", 0, 1, CMP, "",
	"finish a comparison in --out: its flags are read from "
	"DIR/compare.conf (flags given here win), each job already done is "
	"kept when it ran with the flags this comparison gives it (else "
	"refused, naming the flag), the others run"),
    E("add-seeds", T_U32, add_seeds, "0", 0, 64, CMP, "N",
	"with --resume: run N seeds more than the comparison in --out has, "
	"after its largest"),
};
#undef E

#define N_ENTRIES ((int)(sizeof(config_table) / sizeof(config_table[0])))
// pti_config.given has a bit per entry.
_Static_assert(sizeof(config_table) / sizeof(config_table[0]) <= 128,
    "pti_config.given has room for 128 flags");

int pti_config_count(void)
{
	return N_ENTRIES;
}

const char *pti_mode_name(int mode)
{
	return choice_name(choice_mode, mode);
}

// entry_shadowed tells whether a flag of compare's own has e's name.
static int entry_shadowed(const config_entry *e)
{
	for (int k = 0; k < N_ENTRIES; k++)
		if ((config_table[k].cmds & PT_CMD_COMPARE) &&
		    strcmp(config_table[k].name, e->name) == 0)
			return 1;
	return 0;
}

// cmd_takes: compare takes every flag of run besides its own (and a
// flag of its own stands for run's of the same name: --resume); server,
// worker and node take every flag of run, server and worker, so that
// one command line serves every process of a job.
static int cmd_takes(const config_entry *e, uint32_t cmd)
{
	uint32_t want = cmd;
	if ((cmd & PT_CMD_COMPARE) && !(e->cmds & PT_CMD_COMPARE) &&
	    entry_shadowed(e))
		return 0;
	if (cmd & PT_CMD_COMPARE)
		want |= PT_CMD_RUN;
	if (cmd & (PT_CMD_NODE | PT_CMD_SERVER | PT_CMD_WORKER))
		want |= PT_CMD_RUN | PT_CMD_SERVER | PT_CMD_WORKER;
	return (e->cmds & want) != 0;
}

// A flag whose field lies in pti_config's job is one of the job's
// options (common/jobopt.h): pt_job_set takes it, on a pti_jobopt alone.
#define JOB_OFF offsetof(pti_config, job)

static int entry_is_job(const config_entry *e)
{
	return e->off - JOB_OFF < sizeof(pti_jobopt); // unsigned: below wraps
}

// entry_set sets flag e to v: in job when it is a job option, else in c
// (NULL when only job options may be set).
static int entry_set(pti_jobopt *job, pti_config *c, const config_entry *e,
    const char *v)
{
	char *p = entry_is_job(e) ? (char *)job + (e->off - JOB_OFF)
				  : (char *)c + e->off,
	     *end;
	const config_choice *ch = config_choices(e->type);
	double d;

	if (ch != NULL)
		return choice_set(e, ch, (int *)(void *)p, v);
	switch (e->type) {
	case T_STR:
		if (strlen(v) >= e->size)
			return pti_err_set(PT_EINVAL,
			    "--%s: value longer than %zu characters", e->name,
			    e->size - 1);
		strcpy(p, v);
		// A spec with fields of its own is read once, here, into
		// typed fields that its users take.
		if (e->off == offsetof(pti_config, job.optimizer))
			return pti_optim_parse(&job->optim, v);
		if (e->off == offsetof(pti_config, delay))
			return pti_config_delay(c, &c->delay_spec);
		if (e->off == offsetof(pti_config, job.checkpoint_every))
			return pti_jobopt_ckpt_every(job, &job->ckpt_every,
			    &job->ckpt_seconds);
		return 0;
	case T_LIST:
		if (strlen(v) + strlen(p) + 2 > e->size)
			return pti_err_set(PT_EINVAL, "--%s: too many values",
			    e->name);
		if (*p != '\0')
			strcat(p, ",");
		strcat(p, v);
		return 0;
	case T_BOOL:
		if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
			return pti_err_set(PT_EINVAL, "--%s takes no value",
			    e->name);
		*(uint32_t *)(void *)p = v[0] == '1';
		return 0;
	}
	errno = 0;
	if (e->type == T_F64) {
		d = strtod(v, &end);
	} else if (e->type == T_I64) {
		long long ll = strtoll(v, &end, 10);
		d = (double)ll;
		*(int64_t *)(void *)p = ll;
	} else {
		if (v[0] == '-')
			return pti_err_set(PT_EINVAL,
			    "--%s: '%s' is not a whole number >= 0", e->name,
			    v);
		unsigned long long u = strtoull(v, &end, 10);
		d = (double)u;
		if (e->type == T_U64)
			*(uint64_t *)(void *)p = u;
		else if (u <= UINT32_MAX)
			*(uint32_t *)(void *)p = (uint32_t)u;
	}
	if (end == v || *end != '\0' || errno != 0 || !isfinite(d))
		return pti_err_set(PT_EINVAL, "--%s: '%s' is not a %s", e->name,
		    v, e->type == T_F64 ? "number" : "whole number");
	if (d < e->min || d > e->max)
		return pti_err_set(PT_EINVAL,
		    "--%s: %s is outside [%g, %g]", e->name, v, e->min,
		    e->max);
	if (e->type == T_F64)
		*(double *)(void *)p = d;
	return 0;
}

void pti_config_defaults(pti_config *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < N_ENTRIES; i++) {
		int rv = entry_set(&c->job, c, &config_table[i],
		    config_table[i].def);
		(void)rv; // table defaults are known to parse (config_test)
	}
}

void pti_jobopt_defaults(pti_jobopt *o)
{
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < N_ENTRIES; i++)
		if (entry_is_job(&config_table[i])) {
			int rv = entry_set(o, NULL, &config_table[i],
			    config_table[i].def);
			(void)rv; // known to parse (config_test)
		}
}

int pti_jobopt_set(pti_jobopt *o, const char *name, const char *value)
{
	for (int k = 0; k < N_ENTRIES; k++)
		if (strcmp(config_table[k].name, name) == 0 &&
		    entry_is_job(&config_table[k]))
			return entry_set(o, NULL, &config_table[k], value);
	return pti_err_set(PT_EINVAL, "option %s: not an option of a job "
	    "(see pstrain.h: pt_job_set)", name);
}

int pti_config_set(pti_config *c, const char *name, const char *value)
{
	for (int k = 0; k < N_ENTRIES; k++)
		if (strcmp(config_table[k].name, name) == 0) {
			int rv = entry_set(&c->job, c, &config_table[k], value);
			if (rv == 0)
				c->given[k / 64] |= 1ULL << (k % 64);
			return rv;
		}
	return pti_err_set(PT_EINVAL, "unknown flag --%s", name);
}

// pti_config_file applies the flags of --config FILE: each line 'flag =
// value' (or 'flag value'; a switch's value true or false), '#' a
// comment, as if given on the command line before its own flags.
int pti_config_file(pti_config *c, uint32_t cmd, const char *path)
{
	char line[4096];
	int no = 0, rv = 0;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return pti_err_set(PT_EINVAL, "--config %s: %s", path,
		    strerror(errno));
	while (rv == 0 && fgets(line, sizeof(line), f) != NULL) {
		no++;
		line[strcspn(line, "#\r\n")] = '\0';
		char *key = line + strspn(line, " \t"), *val;
		if (*key == '\0')
			continue;
		size_t kl = strcspn(key, " \t=");
		val = key + kl + strspn(key + kl, " \t");
		if (*val == '=')
			val += 1 + strspn(val + 1, " \t");
		key[kl] = '\0';
		for (char *e = val + strlen(val); e > val && (e[-1] == ' ' ||
		    e[-1] == '\t');)
			*--e = '\0';
		int k;
		for (k = 0; k < N_ENTRIES; k++)
			if (strcmp(config_table[k].name, key) == 0 &&
			    cmd_takes(&config_table[k], cmd))
				break;
		if (k == N_ENTRIES || strcmp(key, "config") == 0) {
			rv = pti_err_set(PT_EINVAL, "--config %s, line %d: %s is "
			    "not a flag of this command", path, no, key);
			break;
		}
		const config_entry *e = &config_table[k];
		if (e->type == T_BOOL && (strcmp(val, "false") == 0 ||
		    strcmp(val, "0") == 0))
			continue;
		if (e->type == T_BOOL && strcmp(val, "true") != 0 &&
		    strcmp(val, "1") != 0 && *val != '\0') {
			rv = pti_err_set(PT_EINVAL, "--config %s, line %d: %s "
			    "is a switch: true or false, not '%s'", path, no,
			    key, val);
			break;
		}
		if ((rv = entry_set(&c->job, c, e, e->type == T_BOOL ? "1" :
		    val)) != 0) {
			char msg[512];
			snprintf(msg, sizeof(msg), "%s", pt_errmsg(rv));
			rv = pti_err_set(rv, "--config %s, line %d: %s", path, no,
			    msg);
			break;
		}
		c->given[k / 64] |= 1ULL << (k % 64);
	}
	fclose(f);
	return rv;
}

int pti_config_parse(pti_config *c, uint32_t cmd, int argc, char **argv,
    int *help)
{
	*help = 0;
	// --config FILE first, so that the command line's flags win.
	for (int i = 0; i < argc; i++) {
		const char *path = strncmp(argv[i], "--config=", 9) == 0 ?
		    argv[i] + 9 : strcmp(argv[i], "--config") == 0 &&
		    i + 1 < argc ? argv[i + 1] : NULL;
		if (path != NULL) {
			int rv = pti_config_file(c, cmd, path);
			if (rv != 0)
				return rv;
			break;
		}
	}
	for (int i = 0; i < argc; i++) {

		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			*help = 1;
			return 0;
		}
		if (strncmp(a, "--", 2) != 0)
			return pti_err_set(PT_EINVAL,
			    "unexpected argument '%s' (flags start with --)",
			    a);
		const char *name = a + 2, *val = strchr(name, '=');
		size_t nl = val ? (size_t)(val - name) : strlen(name);
		int found = -1;
		for (int k = 0; k < N_ENTRIES; k++)
			if (strlen(config_table[k].name) == nl &&
			    strncmp(config_table[k].name, name, nl) == 0 &&
			    cmd_takes(&config_table[k], cmd))
				found = k;
		if (found < 0)
			return pti_err_set(PT_EINVAL,
			    "unknown flag --%.*s (see --help)", (int)nl, name);
		if (config_table[found].type == T_BOOL) {
			if (val != NULL)
				return pti_err_set(PT_EINVAL,
				    "--%s takes no value",
				    config_table[found].name);
			val = "1";
		} else if (val != NULL) {
			val++;
		} else {
			if (i + 1 >= argc)
				return pti_err_set(PT_EINVAL,
				    "--%s needs a value", config_table[found].name);
			val = argv[++i];
		}
		int rv = entry_set(&c->job, c, &config_table[found], val);
		if (rv != 0)
			return rv;
		c->given[found / 64] |= 1ULL << (found % 64);
	}
	return 0;
}

int pti_config_given(const pti_config *c, const char *name)
{
	for (int k = 0; k < N_ENTRIES; k++)
		if (strcmp(config_table[k].name, name) == 0)
			return (c->given[k / 64] >> (k % 64)) & 1;
	return 0;
}

void pti_config_help(FILE *f, uint32_t cmd)
{
	// server and worker list their own flags; run's are one line.
	int own = cmd == PT_CMD_SERVER || cmd == PT_CMD_WORKER;
	for (int k = 0; k < N_ENTRIES; k++) {
		const config_entry *e = &config_table[k];
		if (own ? !(e->cmds & cmd) : !cmd_takes(e, cmd))
			continue;
		char left[64];
		snprintf(left, sizeof(left), "--%s %s", e->name, e->metavar);
		fprintf(f, "  %-26s %s", left, e->help);
		if (e->def[0] != '\0')
			fprintf(f, " [%s]", e->def);
		fprintf(f, "\n");
	}
	if (own)
		fprintf(f, "  and every flag of 'pstrain run --help' and of "
			   "'pstrain %s --help', so that\n  one command line "
			   "serves every process of a job: each uses the flags "
			   "that\n  concern it\n",
		    cmd == PT_CMD_SERVER ? "worker" : "server");
}

static int entry_format(const pti_config *c, const config_entry *e,
    char *buf, size_t n)
{
	const char *p = (const char *)c + e->off;
	const config_choice *ch = config_choices(e->type);
	if (ch != NULL)
		return snprintf(buf, n, "%s",
		    choice_name(ch, *(const int *)(const void *)p));
	switch (e->type) {
	case T_STR:
	case T_LIST:
		return snprintf(buf, n, "%s", p);
	case T_I64:
		return snprintf(buf, n, "%lld",
		    (long long)*(const int64_t *)(const void *)p);
	case T_BOOL:
	case T_U32:
		return snprintf(buf, n, "%u",
		    *(const uint32_t *)(const void *)p);
	case T_U64:
		return snprintf(buf, n, "%llu",
		    (unsigned long long)*(const uint64_t *)(const void *)p);
	default: {
		// The shortest of %.15g and %.17g that reads back exactly.
		double d = *(const double *)(const void *)p;
		int len = snprintf(buf, n, "%.15g", d);
		if (strtod(buf, NULL) != d)
			len = snprintf(buf, n, "%.17g", d);
		return len;
	}
	}
}

int pti_config_to_argv(const pti_config *c, uint32_t from, uint32_t to,
    char **argv, int *argc)
{
	int rv = 0;
	char *val = malloc(PT_URLS_MAX); // the longest value (--connect)
	if (val == NULL)
		return PT_ENOMEM;
	for (int k = 0; k < N_ENTRIES && rv == 0; k++) {
		const config_entry *e = &config_table[k];
		// --config's flags are in c already, as values.
		if (!(e->cmds & from) || !(e->cmds & to) ||
		    strcmp(e->name, "config") == 0)
			continue;
		entry_format(c, e, val, PT_URLS_MAX);
		if ((e->type == T_STR || e->type == T_LIST) && val[0] == '\0')
			continue;
		if (e->type == T_BOOL && val[0] == '0')
			continue;
		char flag[64];
		snprintf(flag, sizeof(flag), "--%s", e->name);
		if ((argv[*argc] = strdup(flag)) == NULL) {
			rv = PT_ENOMEM;
		} else if (e->type == T_BOOL) {
			*argc += 1;
		} else if ((argv[*argc + 1] = strdup(val)) == NULL) {
			free(argv[*argc]);
			rv = PT_ENOMEM;
		} else {
			*argc += 2;
		}
	}
	free(val);
	return rv;
}

int pti_config_save(const pti_config *c, uint32_t cmd,
    const char *const *skip, FILE *f)
{
	char *val = malloc(PT_URLS_MAX); // the longest value (--connect)
	if (val == NULL)
		return PT_ENOMEM;
	int rv = 0;
	for (int k = 0; k < N_ENTRIES && rv == 0; k++) {
		const config_entry *e = &config_table[k];
		int out = cmd_takes(e, cmd) && ((c->given[k / 64] >> (k % 64)) &
		    1) && strcmp(e->name, "config") != 0;
		for (size_t i = 0; out && skip != NULL && skip[i] != NULL; i++)
			out = strcmp(skip[i], e->name) != 0;
		if (!out)
			continue;
		entry_format(c, e, val, PT_URLS_MAX);
		if (strpbrk(val, "#\r\n") != NULL)
			rv = pti_err_set(PT_EINVAL, "--%s: a value with '#' or a "
			    "line break cannot be saved in a flag file", e->name);
		else if (e->type == T_BOOL)
			fprintf(f, "%s = %s\n", e->name, val[0] == '1' ? "true" :
			    "false");
		else
			fprintf(f, "%s = %s\n", e->name, val);
	}
	free(val);
	return rv;
}

int pti_config_cluster(pti_config *c, uint32_t cmd)
{
	FILE *f = fopen(c->cluster, "r");
	char line[PT_PATH_MAX], word[32], arg[PT_PATH_MAX];
	uint32_t ns = 0, nw = 0, lineno = 0;
	size_t used = 0;
	int ar = c->job.mode == PT_MODE_ALLREDUCE;

	if (f == NULL)
		return pti_err_set(PT_EIO, "--cluster %s: %s", c->cluster,
		    strerror(errno));
	c->connect[0] = '\0';
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		int got = sscanf(line, "%31s %1023s", word, arg);
		if (got <= 0)
			continue;
		if (got == 2 && strcmp(word, "server") == 0) {
			size_t al = strlen(arg);
			if (used + al + 2 > sizeof(c->connect)) {
				fclose(f);
				return pti_err_set(PT_EINVAL,
				    "%s:%u: too many servers", c->cluster,
				    lineno);
			}
			if (cmd == PT_CMD_SERVER && ns == c->rank)
				strcpy(c->listen, arg);
			used += (size_t)sprintf(c->connect + used, "%s%s",
			    ns ? "," : "", arg);
			ns++;
		} else if (got == 2 && strcmp(word, "worker") == 0 && ar) {
			// allreduce: a worker's line is its ring address
			size_t al = strlen(arg);
			if (strstr(arg, "://") == NULL ||
			    used + al + 2 > sizeof(c->connect)) {
				fclose(f);
				return pti_err_set(PT_EINVAL, "%s:%u: expected "
				    "'worker URL' (--mode allreduce: the "
				    "address of worker %u's ring), or too many "
				    "workers", c->cluster, lineno, nw);
			}
			used += (size_t)sprintf(c->connect + used, "%s%s",
			    nw ? "," : "", arg);
			nw++;
		} else if (got == 2 && strcmp(word, "worker") == 0) {
			nw++;
		} else {
			fclose(f);
			return pti_err_set(PT_EINVAL,
			    "%s:%u: expected 'server URL' or 'worker HOST'",
			    c->cluster, lineno);
		}
	}
	fclose(f);
	if (ar && ns > 0)
		return pti_err_set(PT_EINVAL, "%s: --mode allreduce runs no "
		    "servers: only 'worker URL' lines", c->cluster);
	if ((!ar && ns == 0) || nw == 0)
		return pti_err_set(PT_EINVAL,
		    "%s: needs at least one server line and one worker line",
		    c->cluster);
	c->job.servers = ns;
	c->job.workers = nw;
	return 0;
}

// link_number reads a number and a unit of units (each with its factor)
// from s; the rest must be empty. -1 when it is not such a number.
static double link_number(const char *s, const char *const *units,
    const double *factors)
{
	char *end;
	errno = 0;
	double x = strtod(s, &end);
	if (errno != 0 || end == s || !(x > 0) || x > 1e15)
		return -1;
	for (int i = 0; units[i] != NULL; i++)
		if (strcasecmp(end, units[i]) == 0)
			return x * factors[i];
	return -1;
}

static const char *const delays[] = {"us", "ms", "s", NULL};
static const double delay_f[] = {1e-6, 1e-3, 1};

int pti_config_send_delay(const pti_config *c, double *s)
{
	*s = 0;
	if (c->send_delay[0] == '\0')
		return 0;
	*s = link_number(c->send_delay, delays, delay_f);
	if (*s < 0 || *s > 10)
		return pti_err_set(PT_EINVAL, "--send-delay %s: expected a "
		    "delay up to 10s in us, ms or s (200us)", c->send_delay);
	return 0;
}

int pti_config_link(const pti_config *c, double *bps, double *delay_s)
{
	static const char *const rates[] = {"bit", "kbit", "mbit", "gbit",
	    "tbit", NULL};
	static const double rate_f[] = {1, 1e3, 1e6, 1e9, 1e12};
	char rate[64];
	const char *comma = strchr(c->link, ',');
	*bps = 0;
	*delay_s = 0;
	if (c->link[0] == '\0')
		return 0;
	snprintf(rate, sizeof(rate), "%.*s",
	    (int)(comma ? comma - c->link : (long)strlen(c->link)), c->link);
	*bps = link_number(rate, rates, rate_f);
	if (comma != NULL)
		*delay_s = link_number(comma + 1, delays, delay_f);
	if (*bps < 1000 || *delay_s < 0 || *delay_s > 10)
		return pti_err_set(PT_EINVAL, "--link %s: expected RATE or "
		    "RATE,DELAY: a rate of at least 1kbit in bit, kbit, mbit, "
		    "gbit or tbit (1gbit, 100mbit), a delay up to 10s in us, "
		    "ms or s (200us)", c->link);
	return 0;
}

int pti_config_straggler(const pti_config *c, uint32_t rank, double *ms)
{
	*ms = 0;
	for (const char *p = c->straggler; *p;) {
		unsigned r, d;
		int used = 0;
		if (sscanf(p, "%u:%u%n", &r, &d, &used) != 2 || r >=
		    c->job.workers || (p[used] != ',' && p[used] != '\0'))
			return pti_err_set(PT_EINVAL,
			    "--straggler %s: expected R:MS with R below "
			    "--workers %u", c->straggler, c->job.workers);
		if (r == rank)
			*ms += d;
		p += used + (p[used] == ',');
	}
	return 0;
}

int pti_config_delay(const pti_config *c, pti_delay *d)
{
	char tail;
	memset(d, 0, sizeof(*d));
	if (c->delay[0] == '\0')
		return 0;
	if (sscanf(c->delay, "exp:%lf%c", &d->a, &tail) == 1 && d->a >= 0)
		d->kind = PT_DELAY_EXP;
	else if (sscanf(c->delay, "uniform:%lf:%lf%c", &d->a, &d->b, &tail) ==
		     2 && d->a >= 0 && d->b >= d->a)
		d->kind = PT_DELAY_UNIFORM;
	else
		return pti_err_set(PT_EINVAL,
		    "--delay %s: expected exp:MEAN_MS or uniform:LO_MS:HI_MS",
		    c->delay);
	return 0;
}

int pti_jobopt_ckpt_every(const pti_jobopt *c, uint64_t *every,
    int *seconds)
{
	unsigned long long n = 0;
	char unit[4] = "";
	*every = 0;
	*seconds = 0;
	if (c->checkpoint_every[0] == '\0')
		return 0;
	if (sscanf(c->checkpoint_every, "%llu%3s", &n, unit) < 1 || n == 0 ||
	    c->checkpoint_every[0] == '-' ||
	    (unit[0] != '\0' && strcmp(unit, "s") != 0))
		return pti_err_set(PT_EINVAL,
		    "--checkpoint-every %s: expected N (steps) or Ns (seconds)",
		    c->checkpoint_every);
	*every = n;
	*seconds = unit[0] == 's';
	return 0;
}

// config_allreduce refuses what --mode allreduce does not do: it has no
// servers, and a worker finds its ring either in --connect (every
// worker's address) or through --ring-dir (its own, --listen, published).
static int config_allreduce(const pti_config *c, uint32_t cmd)
{
	const char *no = c->restart_servers ? "restart-servers" : NULL;
	if (cmd == PT_CMD_SERVER)
		return pti_err_set(PT_EINVAL, "--mode allreduce runs no "
		    "servers: start only its workers");
	if (cmd == PT_CMD_WORKER && c->connect[0] == '\0' &&
	    (c->ring_dir[0] == '\0') != (c->listen[0] == '\0'))
		return pti_err_set(PT_EINVAL, "--%s needs --%s: an allreduce "
		    "worker listens at --listen and publishes that address "
		    "in --ring-dir", c->listen[0] ? "listen" : "ring-dir",
		    c->listen[0] ? "ring-dir" : "listen");
	if (no != NULL)
		return pti_err_set(PT_EINVAL, "--%s: --mode allreduce has no "
		    "servers (--restart-workers restarts its workers)", no);
	return 0;
}

// config_hosts checks --link and --placement against the job: hosts talk
// over tcp or tls, and colocated needs a worker's host for each server.
static int config_hosts(const pti_config *c)
{
	double bps, delay;
	int rv;
	if ((rv = pti_config_link(c, &bps, &delay)) != 0 ||
	    (rv = pti_config_send_delay(c, &delay)) != 0)
		return rv;
	if (c->link[0] == '\0' && c->placement == PT_PLACE_NONE)
		return 0;
	if (c->placement == PT_PLACE_NONE && pti_config_given(c, "placement"))
		return pti_err_set(PT_EINVAL, "--link %s needs emulated hosts: "
		    "--placement dedicated or colocated, not none", c->link);
	if ((c->transport == PT_TRANSPORT_IPC ||
		c->transport == PT_TRANSPORT_SHM) &&
	    pti_config_given(c, "transport"))
		return pti_err_set(PT_EINVAL, "--%s: emulated hosts talk over "
		    "--transport tcp or tls, not %s",
		    c->link[0] ? "link" : "placement",
		    choice_name(choice_transport, c->transport));
	if (c->placement == PT_PLACE_COLOCATED &&
	    c->job.mode != PT_MODE_ALLREDUCE && c->job.servers > c->job.workers)
		return pti_err_set(PT_EINVAL, "--placement colocated puts "
		    "server s on worker s's host: --servers %u is more than "
		    "--workers %u", c->job.servers, c->job.workers);
	return 0;
}

void pti_config_network(const pti_config *c, char *out, size_t n)
{
	if (c->placement == PT_PLACE_NONE && c->link[0] == '\0') {
		snprintf(out, n, "%s", "");
		return;
	}
	snprintf(out, n, ", %s hosts, %s%s",
	    choice_name(choice_place, c->placement == PT_PLACE_NONE
					   ? PT_PLACE_DEDICATED
					   : c->placement),
	    c->link[0] ? "link " : "links not shaped", c->link);
}

void pti_config_hosts_imply(pti_config *c)
{
	if (c->link[0] != '\0' && c->placement == PT_PLACE_NONE)
		c->placement = PT_PLACE_DEDICATED;
	if (c->placement != PT_PLACE_NONE && c->transport == PT_TRANSPORT_IPC)
		c->transport = PT_TRANSPORT_TCP;
	pti_config_transport_pick(c, pti_mode_of(c->job.mode)->servers);
}

void pti_config_transport_pick(pti_config *c, int shared)
{
	if (c->transport != PT_TRANSPORT_AUTO)
		return;
	if (c->link[0] != '\0' || c->placement != PT_PLACE_NONE) {
		c->transport = PT_TRANSPORT_TCP;
		return;
	}
	c->transport = PT_TRANSPORT_IPC;
	c->job.shm |= shared != 0;
}

// all_ipc: whether the comma-separated list has addresses, all ipc://.
static int all_ipc(const char *urls)
{
	uint32_t n, k = pti_transport_urls_count(urls, pti_transport_is_ipc,
			       &n);
	return n > 0 && k == n;
}

void pti_config_shm_auto(pti_config *c, uint32_t cmd)
{
	if (c->transport != PT_TRANSPORT_AUTO ||
	    !pti_mode_of(c->job.mode)->servers)
		return;
	if (cmd == PT_CMD_SERVER && all_ipc(c->listen))
		c->job.shm = 1;
	else if (cmd == PT_CMD_WORKER && !c->job.shm && all_ipc(c->connect))
		c->job.shm = PTI_SHM_TRY;
}

int pti_jobopt_check(const pti_jobopt *o)
{
	if (o->servers == 0 && o->mode != PT_MODE_ALLREDUCE)
		return pti_err_set(PT_EINVAL, "--servers 0: --mode %s needs "
		    "at least one server", pti_mode_name(o->mode));
	if (o->batch % o->workers != 0)
		return pti_err_set(PT_EINVAL,
		    "--batch %u is not divisible by --workers %u: each worker "
		    "takes B/W examples", o->batch, o->workers);
	if (o->mode != PT_MODE_SSP && o->staleness > 0)
		return pti_err_set(PT_EINVAL, "--staleness needs --mode ssp");
	if (o->backup_workers > 0 &&
	    (o->mode != PT_MODE_SYNC || o->backup_workers >= o->workers))
		return pti_err_set(PT_EINVAL,
		    "--backup-workers %u needs --mode sync and fewer than "
		    "--workers %u", o->backup_workers, o->workers);
	// Shared memory is between servers and workers: all-reduce's
	// workers talk to one another.
	if (o->shm && !pti_mode_of(o->mode)->servers)
		return pti_err_set(PT_EINVAL, "--transport shm: --mode %s has "
		    "no servers to share values with; its ring goes over ipc "
		    "or tcp", pti_mode_name(o->mode));
	if (pti_mode_of(o->mode)->lockstep &&
	    (o->staleness_lr || o->max_staleness >= 0 || o->matched_lr))
		return pti_err_set(PT_EINVAL,
		    "--staleness-lr, --max-staleness and --matched-lr need "
		    "--mode async or ssp");
	return 0;
}

int pti_jobopt_check_proc(const pti_jobopt *o, uint32_t cmd, uint32_t rank,
    const char *addrs)
{
	uint32_t of = cmd == PT_CMD_SERVER ? o->servers : o->workers;
	if (rank >= of)
		return pti_err_set(PT_EINVAL, "--rank %u is not below --%s %u",
		    rank, cmd == PT_CMD_SERVER ? "servers" : "workers", of);
	if (addrs[0] == '\0')
		return pti_err_set(PT_EINVAL, cmd == PT_CMD_SERVER
		    ? "server needs --listen URL or --cluster FILE"
		    : "worker needs --connect URL,... or --cluster FILE");
	return pti_transport_check_addrs(o, cmd, addrs);
}

// config_sparse: a sparse model (lr, fm:K) goes with a sparse data set
// (ctr:...) and no other, and trains on servers (its rows live there).
static int config_sparse(const pti_config *c)
{
	int model = pti_layout_sparse(c->model), data = pti_data_sparse(c->data);
	if (model != data)
		return pti_err_set(PT_EINVAL, "--model %s does not go with --data "
		    "%s: the sparse models (lr, fm:K) train on a click set "
		    "(ctr:N,F,V), and the others on features", c->model,
		    c->data);
	if (!model && c->job.mode == PT_MODE_HYBRID)
		return pti_err_set(PT_EINVAL, "--mode hybrid trains embedding "
		    "rows async and variables sync: --model %s has no rows "
		    "(use lr or fm:K)", c->model);
	if (!model)
		return 0;
	if (c->job.mode == PT_MODE_ALLREDUCE)
		return pti_err_set(PT_EINVAL, "--model %s needs parameter "
		    "servers: its embedding rows live there, not in a ring",
		    c->model);
	if (c->layer_push == PT_LP_ON)
		return pti_err_set(PT_EINVAL, "--layer-push on is for the dense "
		    "models; --model %s has no layers", c->model);
	return 0;
}

int pti_config_length_check(const pti_config *c)
{
	// A job's length is one flag's: the other would be ignored.
	if (c->steps > 0 && pti_config_given(c, "steps") &&
	    pti_config_given(c, "epochs"))
		return pti_err_set(PT_EINVAL, "--steps %llu and --epochs %u: "
		    "give one (--steps N runs N global steps, --epochs E that "
		    "many passes over the training set)",
		    (unsigned long long)c->steps, c->epochs);
	return 0;
}

int pti_config_check(const pti_config *c, uint32_t cmd)
{
	if (cmd == PT_CMD_EVAL) {
		if (c->model_file[0] == '\0')
			return pti_err_set(PT_EINVAL,
			    "eval needs --model-file FILE");
		return 0;
	}
	int rv;
	// What --modes gives each job is not compare's own to take.
	if (cmd == PT_CMD_COMPARE && (pti_config_given(c, "mode") ||
	    pti_config_given(c, "staleness")))
		return pti_err_set(PT_EINVAL, "--%s: each job's mode and ssp "
		    "bound come from --modes (sync, async, ssp:S, ...); give "
		    "them there", pti_config_given(c, "mode") ? "mode" :
		    "staleness");
	if ((rv = pti_jobopt_check(&c->job)) != 0)
		return rv;

	if ((cmd & PT_CMD_COMPARE) && strcmp(c->plot_style, "screen") != 0 &&
	    strcmp(c->plot_style, "paper") != 0)
		return pti_err_set(PT_EINVAL, "--plot-style %s: expected "
		    "screen or paper", c->plot_style);
	if ((cmd & (PT_CMD_RUN | PT_CMD_COMPARE | PT_CMD_NODE)) &&
	    (rv = pti_config_length_check(c)) != 0)
		return rv;
	if (c->layer_push == PT_LP_ON && c->job.mode != PT_MODE_SYNC)
		return pti_err_set(PT_EINVAL, "--layer-push on needs --mode "
		    "sync (in async and ssp each layer would be an update of "
		    "its own)");
	if (c->layer_push == PT_LP_ON && c->job.backup_workers > 0)
		return pti_err_set(PT_EINVAL, "--layer-push on does not go "
		    "with --backup-workers %u: which gradients a step takes is "
		    "known only when it closes, so no piece can be applied "
		    "ahead", c->job.backup_workers);
	if (c->job.mode == PT_MODE_ALLREDUCE && (rv = config_allreduce(c, cmd)))
		return rv;
	if ((rv = config_sparse(c)) != 0)
		return rv;
	if (c->job.mode != PT_MODE_ALLREDUCE && cmd == PT_CMD_WORKER &&
	    (c->ring_dir[0] != '\0' || c->listen[0] != '\0'))
		return pti_err_set(PT_EINVAL, "--%s is for an allreduce "
		    "worker's ring%s: a %s worker only dials its servers "
		    "(--connect)", c->listen[0] ? "listen" : "ring-dir",
		    c->listen[0] ? " (and for a server)" : "",
		    pti_mode_name(c->job.mode));
	uint32_t n_val;
	if (pti_config_validation(c, 1000000, &n_val) != 0)
		return pti_err_set(PT_EINVAL,
		    "--validation %s: expected a number of examples N or a "
		    "percentage P%% below 100", c->validation);
	// --delay and --checkpoint-every were read with their flags; the
	// ranks of --straggler need --workers, known only now.
	double straggle;
	if ((rv = pti_config_straggler(c, 0, &straggle)) != 0)
		return rv;
	// (--resume D gives the launcher's servers --checkpoint-dir D.)
	if (c->job.checkpoint_every[0] != '\0' && c->job.checkpoint_dir[0] == '\0' &&
	    c->resume[0] == '\0')
		return pti_err_set(PT_EINVAL,
		    "--checkpoint-every needs --checkpoint-dir D");
	if (c->restart_servers > 0 && c->job.checkpoint_dir[0] == '\0' &&
	    c->resume[0] == '\0')
		return pti_err_set(PT_EINVAL,
		    "--restart-servers needs --checkpoint-dir D");
	if ((cmd == PT_CMD_RUN || cmd == PT_CMD_COMPARE) && c->job.out[0] == '\0')
		return pti_err_set(PT_EINVAL, "run needs --out DIR");
	if ((rv = config_hosts(c)) != 0)
		return rv;
	if (cmd == PT_CMD_SERVER || cmd == PT_CMD_WORKER)
		return pti_jobopt_check_proc(&c->job, cmd, c->rank,
		    cmd == PT_CMD_SERVER || c->connect[0] == '\0' ? c->listen
								 : c->connect);
	return pti_transport_check(c, cmd);
}

int pti_config_validation(const pti_config *c, uint32_t n_train,
    uint32_t *n_val)
{
	char *end;
	const char *v = c->validation;
	if (*v < '0' || *v > '9')
		return pti_err_set(PT_EINVAL, "--validation %s: not a number",
		    v);
	errno = 0;
	double x = strtod(v, &end);
	if (errno != 0 || end == v)
		return pti_err_set(PT_EINVAL, "--validation %s: not a number",
		    v);
	double n;
	if (strcmp(end, "%") == 0) {
		if (x >= 100)
			return pti_err_set(PT_EINVAL,
			    "--validation %s: not below 100%%", v);
		// Rounded down, so that the same percentage of the same set
		// holds out the same examples everywhere.
		n = floor(x / 100.0 * n_train);
	} else if (*end == '\0' && x == floor(x)) {
		n = x;
	} else {
		return pti_err_set(PT_EINVAL,
		    "--validation %s: expected N or P%%", v);
	}
	if (n >= n_train)
		return pti_err_set(PT_EINVAL,
		    "--validation %s holds out %.0f of the %u training "
		    "examples: none would be left to train on", v, n, n_train);
	*n_val = (uint32_t)n;
	return 0;
}

json_t *pti_config_json(const pti_config *c, uint32_t cmd)
{
	char *val = malloc(PT_URLS_MAX); // the longest value (--connect)
	json_t *o = val != NULL ? json_object() : NULL;
	for (int k = 0; o != NULL && k < N_ENTRIES; k++) {
		const config_entry *e = &config_table[k];
		json_t *j;
		if (!cmd_takes(e, cmd))
			continue;
		entry_format(c, e, val, PT_URLS_MAX);
		switch (e->type) {
		case T_U32:
		case T_U64:
		case T_I64:
			j = json_integer(strtoll(val, NULL, 10));
			break;
		case T_F64:
			j = json_real(strtod(val, NULL));
			break;
		case T_BOOL:
			j = json_boolean(val[0] == '1');
			break;
		default:
			j = pti_json_str(val);
		}
		json_object_set_new(o, e->name, j);
	}
	free(val);
	return o;
}

int pti_config_load_data(const pti_config *c, pti_data *d)
{
	pti_data got;
	uint32_t n_val;
	int rv = pti_data_load(&got, c->data, c->job.seed);
	if (rv != 0)
		return rv;
	if ((rv = pti_config_validation(c, got.train.n, &n_val)) != 0 ||
	    (rv = pti_data_holdout(&got, n_val)) != 0) {
		pti_data_fini(&got);
		return rv;
	}
	*d = got;
	return 0;
}
