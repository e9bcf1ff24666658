// cli/procs.c - the server, worker and eval subcommands.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "cli.h"
#include "config.h"
#include "data.h"
#include "err.h"
#include "job.h"
#include "model.h"
#include "modelfile.h"
#include "optim.h"
#include "server.h"
#include "transport.h"
#include "worker.h"

int pti_cli_config(pt_config *c, unsigned cmd, const char *name,
    const char *usage, int argc, char **argv)
{
	int help, rv;
	pt_config_defaults(c);
	if ((rv = pt_config_parse(c, cmd, argc, argv, &help)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", name, pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	if (help) {
		printf("usage: pstrain %s [flags]\n\n%s\n\nflags:\n", name,
		    usage);
		pt_config_help(stdout, cmd);
		return 0;
	}
	if (c->cluster[0] != '\0' && (rv = pt_config_cluster(c, cmd)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", name, pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	if ((rv = pt_config_check(c, cmd)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", name, pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	if (c->lr == 0)
		c->lr = pti_optim_default_lr(&c->optim);
	// Bad TLS files are a bad flag, said before anything starts.
	if ((rv = pti_transport_tls_load(c)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", name, pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	return -1;
}

static void server_on_signal(int sig)
{
	pti_server_signal = sig;
}

int pti_cmd_server(int argc, char **argv)
{
	pt_config c;
	int rv = pti_cli_config(&c, PT_CMD_SERVER, "server",
	    "Serve one shard of the model's parameters. Every server and "
	    "worker of a job\nmust be given the same --mode, --servers, "
	    "--workers, --model, --data and\n--seed. It serves only processes "
	    "that prove the job secret (--secret-file,\nor PSTRAIN_SECRET). "
	    "It stops on a shutdown request (sent by the finishing\nworker "
	    "when training ends) or on SIGINT or SIGTERM, and writes "
	    "DIR/server-R.json\nwhen --out is set. A server restarted after a "
	    "failure takes --resume-version V\n(its checkpoint in "
	    "--checkpoint-dir) and --gone-workers (workers that had left);\n"
	    "its workers reconnect.",
	    argc, argv);
	if (rv >= 0)
		return rv;
	// The server of the library, with this process's signals: SIGINT
	// and SIGTERM end the serving loop, and the statistics are written.
	pt_job *job;
	pt_server *s = NULL;
	if ((rv = pti_job_from_config(&job, &c)) == 0) {
		rv = pt_server_open(&s, job, c.rank, c.listen);
		pt_job_free(job);
	}
	if (rv != 0) {
		fprintf(stderr, "pstrain server %u: %s\n", c.rank,
		    pt_errmsg(rv));
		return 1;
	}
	signal(SIGINT, server_on_signal);
	signal(SIGTERM, server_on_signal);
	pti_server_exit_on_hang = 1;
	pt_server_serve(s);
	pt_server_close(s);
	return 0;
}

int pti_cmd_worker(int argc, char **argv)
{
	pt_config c;
	int rv = pti_cli_config(&c, PT_CMD_WORKER, "worker",
	    "Train on this worker's slice of every global batch, pushing "
	    "gradients to the\nservers listed by --connect (or --cluster) "
	    "and pulling parameters back.\nWrites DIR/worker-R.csv; worker 0 "
	    "also writes eval.csv. At the end the lowest-\nranked worker not "
	    "lost (worker 0 unless it died) writes final.csv, saves\n"
	    "--save-model and shuts the servers down. A worker whose server "
	    "goes away waits\nfor it (at most --rpc-timeout seconds) and "
	    "reconnects. --out is required.\nThe job secret comes from "
	    "--secret-file or PSTRAIN_SECRET.",
	    argc, argv);
	if (rv >= 0)
		return rv;
	if (c.out[0] == '\0') {
		fprintf(stderr, "pstrain worker: needs --out DIR\n");
		return PTI_EXIT_USAGE;
	}
	if ((rv = pt_worker_run(&c)) != 0) {
		fprintf(stderr, "pstrain worker %u: %s\n", c.rank,
		    pt_errmsg(rv));
		return rv == PT_EDIVERGED ? PTI_EXIT_DIVERGED : PTI_EXIT_FAIL;
	}
	return 0;
}

int pti_cmd_secret(int argc, char **argv)
{
	pt_secret k;
	int rv;
	if (argc != 1 || argv[0][0] == '-') {
		FILE *f = argc == 1 && strcmp(argv[0], "--help") == 0 ? stdout
								   : stderr;
		fprintf(f, "usage: pstrain secret FILE\n\nWrite a new random "
			   "job secret to FILE (created with mode 0600; an "
			   "existing\nfile is not overwritten), for servers and "
			   "workers started by hand with\n--secret-file FILE. "
			   "'pstrain run' makes its own.\n");
		return f == stdout ? 0 : 2;
	}
	if ((rv = pt_secret_make(&k)) != 0 ||
	    (rv = pt_secret_save(&k, argv[0])) != 0) {
		fprintf(stderr, "pstrain secret: %s\n", pt_errmsg(rv));
		return 1;
	}
	return 0;
}

int pti_cmd_eval(int argc, char **argv)
{
	pt_config c;
	pt_layout l;
	pt_data d;
	float *params = NULL;
	struct pt_model *m = NULL;
	memset(&d, 0, sizeof(d));
	int rv = pti_cli_config(&c, PT_CMD_EVAL, "eval",
	    "Print the test loss and accuracy of a model saved with "
	    "--save-model, on the\ntest set of --data.", argc, argv);
	if (rv >= 0)
		return rv;
	const uint32_t rows = 500;
	float *x = NULL;
	uint8_t *y = NULL;
	uint32_t *idx = NULL;
	double loss, acc;
	if ((rv = pt_modelfile_load(c.model_file, &l, &params)) != 0 ||
	    (rv = pt_data_load(&d, c.data, c.seed)) != 0)
		goto out;
	if (d.test.dim != l.width[0] || d.test.classes != l.width[l.n_layers]) {
		rv = pti_err_set(PT_EINVAL,
		    "%s takes %u features and %u classes; --data %s has %u "
		    "and %u", c.model_file, l.width[0], l.width[l.n_layers],
		    c.data, d.test.dim, d.test.classes);
		goto out;
	}
	x = malloc((size_t)rows * l.width[0] * sizeof(float));
	y = malloc(rows);
	idx = malloc(rows * sizeof(uint32_t));
	if (x == NULL || y == NULL || idx == NULL) {
		rv = pti_err_set(PT_ENOMEM, "eval buffers");
		goto out;
	}
	if ((rv = pt_model_alloc(&m, &l, rows)) != 0 ||
	    (rv = pt_worker_evaluate(m, params, &d.test, rows, x, y, idx,
		 &loss, &acc)) != 0)
		goto out;
	printf("model %s (%s, %llu parameters) on %s: %u test examples\n"
	       "test_loss %.6f\ntest_acc %.4f\n", c.model_file, l.spec,
	    (unsigned long long)l.n_params, c.data, d.test.n, loss, acc);
out:
	if (rv != 0)
		fprintf(stderr, "pstrain eval: %s\n", pt_errmsg(rv));
	free(x);
	free(y);
	free(idx);
	free(params);
	pt_model_free(m);
	pt_data_fini(&d);
	return rv != 0 ? 1 : 0;
}
