// cli/flags.c - a subcommand's flags and its command line (flags.h).
#include "cli/flags.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/config.h"
#include "common/err.h"
#include "common/transport.h"

int pti_cli_config(pti_config *c, unsigned cmd, const char *name,
    const char *usage, int argc, char **argv)
{
	int help, rv;
	pti_config_defaults(c);
	if ((rv = pti_config_parse(c, cmd, argc, argv, &help)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", name, pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	if (help) {
		printf("usage: pstrain %s [flags]\n\n%s\n\nflags:\n", name,
		    usage);
		pti_config_help(stdout, cmd);
		return 0;
	}
	return pti_cli_finish(c, cmd, name);
}

int pti_cli_finish(pti_config *c, unsigned cmd, const char *name)
{
	int rv;
	// --transport shm: ipc, with the dense values in shared memory.
	if (c->transport == PT_TRANSPORT_SHM) {
		c->transport = PT_TRANSPORT_IPC;
		c->job.shm = 1;
	}
	if (c->cluster[0] != '\0' && (rv = pti_config_cluster(c, cmd)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", name, pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	if (cmd == PT_CMD_SERVER || cmd == PT_CMD_WORKER)
		pti_config_shm_auto(c, cmd);
	if ((rv = pti_config_check(c, cmd)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", name, pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	if (c->job.lr == 0)
		c->job.lr = pti_optim_default_lr(&c->job.optim);
	// Bad TLS files are a bad flag, said before anything starts.
	if ((rv = pti_transport_tls_load(&c->job)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", name, pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	return -1;
}

void pti_cmdline(char *out, size_t n, const char *cmd, int argc,
    char **argv)
{
	size_t used = (size_t)snprintf(out, n, "pstrain %s", cmd);
	for (int i = 0; i < argc && used < n; i++) {
		const char *a = argv[i];
		int plain = a[0] != '\0' &&
			    strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
				      "OPQRSTUVWXYZ0123456789-_=.,:/+%@") ==
				strlen(a);
		used += (size_t)snprintf(out + used, n - used, " %s", plain
								     ? a
								     : "'");
		for (const char *p = a; !plain && *p && used < n; p++)
			used += (size_t)snprintf(out + used, n - used,
			    *p == '\'' ? "'\\''" : "%c", *p);
		if (!plain && used < n)
			used += (size_t)snprintf(out + used, n - used, "'");
	}
}
