// cli/run/hosts.c - emulated hosts (see hosts.h).
#include "cli/run/hosts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/run/sockdir.h"
#include "common/err.h"
#include "common/mode.h"

#define HOSTS_PREFIX "pstrain-"
#define HOSTS_NETNS "/run/netns"

uint32_t pti_hosts_count(const pti_config *c)
{
	uint32_t s = pti_mode_of(c->job.mode)->servers ? c->job.servers : 0;
	switch (c->placement) {
	case PT_PLACE_DEDICATED:
		return s + c->job.workers;
	case PT_PLACE_COLOCATED:
		return c->job.workers;
	}
	return 0;
}

uint32_t pti_hosts_of(const pti_config *c, int server, uint32_t rank)
{
	if (c->placement == PT_PLACE_COLOCATED || server)
		return rank;
	return (pti_mode_of(c->job.mode)->servers ? c->job.servers : 0) + rank;
}

void pti_hosts_addr(uint32_t k, char *out, size_t n)
{
	snprintf(out, n, "10.250.0.%u", k + 1);
}

// hosts_run runs argv (a NULL-terminated program and its words), its
// output kept in out (size n) for an error. Returns its exit status, or
// 127 when it could not start.
static int hosts_run(char *const argv[], char *out, size_t n)
{
	int fds[2];
	if (pipe(fds) != 0)
		return 127;
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[1]);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: %s", argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	size_t used = 0;
	ssize_t got;
	char sink[256];
	while ((got = read(fds[0], used + 1 < n ? out + used : sink,
		    used + 1 < n ? n - 1 - used : sizeof(sink))) > 0)
		if (used + 1 < n)
			used += (size_t)got;
	close(fds[0]);
	if (n > 0)
		out[used] = '\0';
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 127;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 127;
}

// hosts_cmd runs the command of fmt: words split at spaces (names and
// numbers only). PT_EIO naming it and what it said, on failure.
static int hosts_cmd(const char *fmt, ...)
{
	char line[512], out[512], *argv[32];
	int argc = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	char copy[512];
	memcpy(copy, line, sizeof(copy));
	for (char *w = strtok(copy, " "); w != NULL && argc < 31;
	     w = strtok(NULL, " "))
		argv[argc++] = w;
	argv[argc] = NULL;
	if (hosts_run(argv, out, sizeof(out)) == 0)
		return 0;
	out[strcspn(out, "\n")] = '\0';
	return pti_err_set(PT_EIO, "emulated hosts: '%s' failed: %s", line,
	    out);
}

// hosts_del deletes namespace name, first killing what runs in it.
static void hosts_del(const char *name)
{
	char out[4096];
	char *pids[] = {"ip", "netns", "pids", (char *)name, NULL};
	if (hosts_run(pids, out, sizeof(out)) == 0)
		for (char *p = strtok(out, "\n"); p != NULL;
		     p = strtok(NULL, "\n"))
			if (atol(p) > 1)
				kill((pid_t)atol(p), SIGKILL);
	char *del[] = {"ip", "netns", "del", (char *)name, NULL};
	(void)hosts_run(del, out, sizeof(out));
}

// hosts_sweep deletes the namespaces of launchers that no longer exist.
static void hosts_sweep(void)
{
	DIR *d = opendir(HOSTS_NETNS);
	struct dirent *e;
	static char names[64][256];
	int n = 0;
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL && n < 64) {
		long pid;
		unsigned long long start;
		if (sscanf(e->d_name, HOSTS_PREFIX "%ld-%llu-", &pid,
			&start) == 2 && pid > 0 && pti_proc_gone(pid, start))
			memcpy(names[n++], e->d_name, sizeof(names[0]));
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		fprintf(stderr, "pstrain run: deleting namespace %s of a "
		    "launcher that is gone\n", names[i]);
		hosts_del(names[i]);
	}
}

// hosts_shape shapes dev of namespace ns at h's rate (tbf: a burst of
// 5 ms at that rate, at least 128 KiB so that a veth's 64 KiB segments
// pass; a queue of 200 ms), then its delay (netem) under it.
static int hosts_shape(const pti_hosts *h, const char *ns, const char *dev)
{
	double burst = fmax(h->bps / 8 * 0.005, 131072);
	int rv = 0;
	if (h->bps > 0)
		rv = hosts_cmd("tc -n %s qdisc add dev %s root handle 1: tbf "
		    "rate %.0fbit burst %.0f latency 200ms", ns, dev, h->bps,
		    burst);
	if (rv == 0 && h->delay_s > 0)
		rv = hosts_cmd("tc -n %s qdisc add dev %s %s netem delay "
		    "%.0fus limit 100000", ns, dev, h->bps > 0 ? "parent 1:1"
		    : "root", h->delay_s * 1e6);
	return rv;
}

int pti_hosts_up(pti_hosts *h, const pti_config *c)
{
	unsigned long long start;
	uint32_t n = pti_hosts_count(c);
	int rv;
	memset(h, 0, sizeof(*h));
	if (n == 0)
		return 0;
	if (n > PTI_HOSTS_MAX)
		return pti_err_set(PT_EINVAL, "--placement: %u hosts, at most "
		    "%d", n, PTI_HOSTS_MAX);
	if (geteuid() != 0)
		return pti_err_set(PT_EINVAL, "--%s: emulated hosts are "
		    "network namespaces, which need root (CAP_SYS_ADMIN and "
		    "CAP_NET_ADMIN); run as root, or without --link and "
		    "--placement", c->link[0] ? "link" : "placement");
	if ((rv = pti_config_link(c, &h->bps, &h->delay_s)) != 0)
		return rv;
	if (pti_proc_start((long)getpid(), &start) != 0)
		return pti_err_set(PT_EIO, "emulated hosts: cannot read this "
		    "process's start time");
	hosts_sweep();
	snprintf(h->prefix, sizeof(h->prefix), HOSTS_PREFIX "%ld-%llu",
	    (long)getpid(), start);
	const char *p = h->prefix;
	if ((rv = hosts_cmd("ip netns add %s-hub", p)) != 0) {
		if (strstr(pt_errmsg(rv), "ip: No such file") != NULL)
			return pti_err_set(PT_EINVAL, "emulated hosts need "
			    "iproute2's ip and tc (Debian: iproute2)");
		return rv;
	}
	h->hub = 1;
	if ((rv = hosts_cmd("ip -n %s-hub link set lo up", p)) != 0 ||
	    (rv = hosts_cmd("ip -n %s-hub link add br0 type bridge", p)) != 0 ||
	    (rv = hosts_cmd("ip -n %s-hub link set br0 up", p)) != 0)
		goto fail;
	char hub[96];
	snprintf(hub, sizeof(hub), "%s-hub", p);
	for (uint32_t k = 0; k < n; k++) {
		char ns[96], port[16], addr[32];
		snprintf(ns, sizeof(ns), "%s-h%u", p, k);
		snprintf(port, sizeof(port), "p%u", k);
		pti_hosts_addr(k, addr, sizeof(addr));
		if ((rv = hosts_cmd("ip netns add %s", ns)) != 0)
			goto fail;
		h->n = k + 1;
		if ((rv = hosts_cmd("ip -n %s link set lo up", ns)) != 0 ||
		    (rv = hosts_cmd("ip -n %s-hub link add %s type veth peer "
			 "name eth0 netns %s", p, port, ns)) != 0 ||
		    (rv = hosts_cmd("ip -n %s-hub link set %s master br0", p,
			 port)) != 0 ||
		    (rv = hosts_cmd("ip -n %s-hub link set %s up", p, port)) !=
			0 ||
		    (rv = hosts_cmd("ip -n %s addr add %s/24 dev eth0", ns,
			 addr)) != 0 ||
		    (rv = hosts_cmd("ip -n %s link set eth0 up", ns)) != 0 ||
		    (rv = hosts_shape(h, ns, "eth0")) != 0 ||
		    (rv = hosts_shape(h, hub, port)) != 0)
			goto fail;
	}
	return 0;
fail:
	if (h->delay_s > 0 && strstr(pt_errmsg(rv), "netem") != NULL)
		rv = pti_err_set(PT_EINVAL, "--link %s: this kernel cannot add "
		    "a delay (no netem qdisc, sch_netem); give a RATE alone",
		    c->link);
	pti_hosts_down(h);
	return rv;
}

int pti_hosts_enter(const pti_hosts *h, uint32_t k)
{
	char path[160];
	snprintf(path, sizeof(path), HOSTS_NETNS "/%s-h%u", h->prefix, k);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int rv = setns(fd, CLONE_NEWNET) == 0 ? 0 : errno;
	close(fd);
	return rv;
}

void pti_hosts_down(pti_hosts *h)
{
	char ns[96];
	for (uint32_t k = 0; k < h->n; k++) {
		snprintf(ns, sizeof(ns), "%s-h%u", h->prefix, k);
		hosts_del(ns);
	}
	if (h->hub) {
		snprintf(ns, sizeof(ns), "%s-hub", h->prefix);
		hosts_del(ns);
	}
	h->n = 0;
	h->hub = 0;
}
