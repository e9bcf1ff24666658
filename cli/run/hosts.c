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
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run/sockdir.h"
#include "cli/self.h"
#include "common/err.h"
#include "common/mode.h"

#define HOSTS_PREFIX "pstrain-"
#define HOSTS_NETNS "/run/netns"

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

// hosts_add makes network namespace name, as `ip netns add` does (a
// new namespace bound on HOSTS_NETNS/name) but in a child, so that this
// process need not return to its own namespace: in a user namespace it
// may not (cli/run/hosts.h). PT_EIO naming what failed.
static int hosts_add(const char *name)
{
	char path[160];
	int fds[2];
	snprintf(path, sizeof(path), HOSTS_NETNS "/%s", name);
	if (mkdir(HOSTS_NETNS, 0755) != 0 && errno != EEXIST)
		return pti_err_set(PT_EIO, "emulated hosts: %s: %s",
		    HOSTS_NETNS, strerror(errno));
	int fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0)
		return pti_err_set(PT_EIO, "emulated hosts: %s: %s", path,
		    strerror(errno));
	close(fd);
	if (pipe2(fds, O_CLOEXEC) != 0)
		return pti_err_set(PT_EIO, "pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		int e = 0;
		if (unshare(CLONE_NEWNET) != 0 ||
		    mount("/proc/self/ns/net", path, "none", MS_BIND, NULL) != 0)
			e = errno;
		(void)!write(fds[1], &e, sizeof(e));
		_exit(0);
	}
	close(fds[1]);
	int e = EIO, st;
	if (pid < 0 || read(fds[0], &e, sizeof(e)) != sizeof(e))
		e = pid < 0 ? errno : EIO;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	if (e != 0) {
		unlink(path);
		return pti_err_set(PT_EIO, "emulated hosts: cannot make network "
		    "namespace %s: %s", name, strerror(e));
	}
	return 0;
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
// pass; a queue of 200 ms), then, when delay is set, its delay (netem)
// under it: only on a host's own eth0, so that a message meets it once
// on its way. A kernel without netem leaves the delay to the processes
// (h->netem 0).
static int hosts_shape(pti_hosts *h, const char *ns, const char *dev,
    int delay)
{
	double burst = fmax(h->bps / 8 * 0.005, 131072);
	int rv = 0;
	if (h->bps > 0)
		rv = hosts_cmd("tc -n %s qdisc add dev %s root handle 1: tbf "
		    "rate %.0fbit burst %.0f latency 200ms", ns, dev, h->bps,
		    burst);
	if (rv == 0 && delay && h->delay_s > 0 && h->netem) {
		rv = hosts_cmd("tc -n %s qdisc add dev %s %s netem delay "
		    "%.0fus limit 100000", ns, dev, h->bps > 0 ? "parent 1:1"
		    : "root", h->delay_s * 1e6);
		if (rv != 0 && strstr(pt_errmsg(rv), "kind is unknown") != NULL)
			h->netem = rv = 0;
	}
	return rv;
}

// hosts_write writes text to file path. Returns 0 or an errno.
static int hosts_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t n = strlen(text);
	int rv = write(fd, text, n) == (ssize_t)n ? 0 : errno;
	close(fd);
	return rv;
}

// hosts_in_userns tells whether this process runs in a user namespace
// other than the first (its uid_map is not the identity of all ids).
static int hosts_in_userns(void)
{
	char line[128] = "";
	FILE *f = fopen("/proc/self/uid_map", "r");
	if (f == NULL)
		return 0;
	if (fgets(line, sizeof(line), f) == NULL)
		line[0] = '\0';
	fclose(f);
	unsigned long long in, out, n;
	return !(sscanf(line, "%llu %llu %llu", &in, &out, &n) == 3 &&
	    in == 0 && out == 0 && n == 4294967295ULL);
}

// hosts_userns_enter makes this (single-threaded) process root of a new
// user namespace of its own, mapping its own user and group, with a
// mount namespace of its own whose /run/netns is an empty tmpfs (the
// whole of /run where there is no /run/netns to cover), so that `ip
// netns` names live and die with the job. Returns 0, or writes why not
// into err.
static int hosts_userns_enter(char *err, size_t n)
{
	char map[64];
	unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid();
	struct stat sb;
	int e;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
		snprintf(err, n, "emulated hosts are network namespaces, which "
		    "need root or unprivileged user namespaces, and this "
		    "system refuses the latter (unshare: %s; see the sysctls "
		    "user.max_user_namespaces, kernel.unprivileged_userns_clone "
		    "and kernel.apparmor_restrict_unprivileged_userns); run as "
		    "root, or without --link and --placement", strerror(errno));
		return -1;
	}
	snprintf(map, sizeof(map), "0 %u 1\n", uid);
	if ((e = hosts_write("/proc/self/setgroups", "deny")) != 0 ||
	    (e = hosts_write("/proc/self/uid_map", map)) != 0 ||
	    (snprintf(map, sizeof(map), "0 %u 1\n", gid),
		e = hosts_write("/proc/self/gid_map", map)) != 0) {
		snprintf(err, n, "user namespace: cannot map user %u: %s", uid,
		    strerror(e));
		return -1;
	}
	const char *at = stat(HOSTS_NETNS, &sb) == 0 && S_ISDIR(sb.st_mode) ?
	    HOSTS_NETNS : "/run";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("pstrain", at, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") !=
		0) {
		snprintf(err, n, "user namespace: cannot mount a tmpfs on %s: "
		    "%s", at, strerror(errno));
		return -1;
	}
	return 0;
}

// hosts_argv reads this process's command line from /proc into a
// NULL-terminated array of its words (both allocated, freed by the
// exec or the exit that follows). NULL when it cannot.
static char **hosts_argv(void)
{
	static char buf[1 << 16];
	FILE *f = fopen("/proc/self/cmdline", "r");
	if (f == NULL)
		return NULL;
	size_t len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	size_t words = 0;
	for (size_t i = 0; i < len; i++)
		words += buf[i] == '\0';
	char **argv = calloc(words + 1, sizeof(*argv));
	if (argv == NULL || len == sizeof(buf) - 1)
		return free(argv), NULL;
	for (size_t i = 0, k = 0; i < len && k < words; i += strlen(buf + i) + 1)
		argv[k++] = buf + i;
	return argv;
}

static volatile sig_atomic_t userns_child;

static void hosts_forward(int sig)
{
	if (userns_child > 0)
		kill((pid_t)userns_child, sig);
}

int pti_hosts_userns(const pti_config *c, int *status)
{
	*status = -1;
	if (pti_hosts_count(c) == 0 || geteuid() == 0)
		return 0;
	char **argv = hosts_argv();
	int fds[2];
	if (argv == NULL || pipe2(fds, O_CLOEXEC) != 0)
		return pti_err_set(PT_EIO, "user namespace: cannot read this "
		    "process's command line");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		// A fork is single-threaded, as unshare(CLONE_NEWUSER) wants
		// (OpenBLAS may have started threads here). It dies with this
		// process, even on kill -9, and so does its job.
		char err[512];
		close(fds[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (hosts_userns_enter(err, sizeof(err)) == 0) {
			execv(pti_self_exe(), argv);
			snprintf(err, sizeof(err), "cannot execute itself: %s",
			    strerror(errno));
		}
		(void)!write(fds[1], err, strlen(err));
		_exit(PTI_EXIT_USAGE);
	}
	close(fds[1]);
	free(argv);
	if (pid < 0) {
		close(fds[0]);
		return pti_err_set(PT_EIO, "fork: %s", strerror(errno));
	}
	// The job runs in the child: this process passes it the signals
	// meant for the launcher (a terminal's Ctrl-C reaches both).
	userns_child = pid;
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, hosts_forward);
	signal(SIGHUP, hosts_forward);
	char err[512];
	ssize_t got = read(fds[0], err, sizeof(err) - 1);
	close(fds[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got > 0) {
		err[got] = '\0';
		return pti_err_set(PT_EINVAL, "--%s: %s", c->link[0] ? "link" :
		    "placement", err);
	}
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
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
		    "CAP_NET_ADMIN)", c->link[0] ? "link" : "placement");
	h->userns = hosts_in_userns();
	if ((rv = pti_config_link(c, &h->bps, &h->delay_s)) != 0)
		return rv;
	h->netem = h->delay_s > 0;
	if (pti_proc_start((long)getpid(), &start) != 0)
		return pti_err_set(PT_EIO, "emulated hosts: cannot read this "
		    "process's start time");
	hosts_sweep();
	snprintf(h->prefix, sizeof(h->prefix), HOSTS_PREFIX "%ld-%llu",
	    (long)getpid(), start);
	const char *p = h->prefix;
	char hub[96];
	snprintf(hub, sizeof(hub), "%s-hub", p);
	if ((rv = hosts_add(hub)) != 0)
		return rv;
	h->hub = 1;
	if ((rv = hosts_cmd("ip -n %s-hub link set lo up", p)) != 0) {
		if (strstr(pt_errmsg(rv), "ip: No such file") != NULL)
			rv = pti_err_set(PT_EINVAL, "emulated hosts need "
			    "iproute2's ip and tc (Debian: iproute2)");
		goto fail;
	}
	if ((rv = hosts_cmd("ip -n %s-hub link add br0 type bridge", p)) != 0 ||
	    (rv = hosts_cmd("ip -n %s-hub link set br0 up", p)) != 0)
		goto fail;
	for (uint32_t k = 0; k < n; k++) {
		char ns[96], port[16], addr[32];
		snprintf(ns, sizeof(ns), "%s-h%u", p, k);
		snprintf(port, sizeof(port), "p%u", k);
		pti_hosts_addr(k, addr, sizeof(addr));
		if ((rv = hosts_add(ns)) != 0)
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
		    (rv = hosts_shape(h, ns, "eth0", 1)) != 0 ||
		    (rv = hosts_shape(h, hub, port, 0)) != 0)
			goto fail;
	}
	return 0;
fail:
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
