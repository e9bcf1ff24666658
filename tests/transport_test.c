// tests/transport_test.c - the TLS flags against the addresses they go
// with, the launcher's hand-on of them, files that cannot be read, and
// a TLS address with no files loaded. Real handshakes, with certificates
// from scripts/certs.sh, are in tests/tls_test.sh.
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/config.h"
#include "common/transport.h"
#include "tests/test.h"

static int parse(pti_config *c, uint32_t cmd, int argc, char **argv)
{
	int help;
	pti_config_defaults(c);
	return pti_config_parse(c, cmd, argc, argv, &help);
}

static void test_transport_is_tls(void)
{
	PT_TEST_TRUE(pti_transport_is_tls("tls+tcp://127.0.0.1:7000"));
	PT_TEST_TRUE(pti_transport_is_tls("tls+tcp6://[::1]:7000"));
	PT_TEST_TRUE(!pti_transport_is_tls("tcp://127.0.0.1:7000"));
	PT_TEST_TRUE(!pti_transport_is_tls("ipc:///tmp/tls+tcp://"));
}

static void test_transport_tls_address_needs_every_flag(void)
{
	pti_config c;
	char *a1[] = {"--listen", "tls+tcp://127.0.0.1:0", "--tls-cert", "c",
	    "--tls-key", "k"};
	PT_TEST_OK(parse(&c, PT_CMD_SERVER, 6, a1));
	PT_TEST_ERR(pti_config_check(&c, PT_CMD_SERVER), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "needs --tls-ca FILE");
	// One TLS address among a worker's servers is enough to need them.
	char *a2[] = {"--servers", "2", "--out", "o", "--connect",
	    "tcp://127.0.0.1:1,tls+tcp://127.0.0.1:2"};
	PT_TEST_OK(parse(&c, PT_CMD_WORKER, 6, a2));
	PT_TEST_ERR(pti_config_check(&c, PT_CMD_WORKER), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "needs --tls-cert FILE");
	char *a3[] = {"--transport", "tls", "--out", "o", "--tls-cert", "c",
	    "--tls-ca", "a"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 8, a3));
	PT_TEST_ERR(pti_config_check(&c, PT_CMD_RUN), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL),
	    "--transport tls needs --tls-key");
	char *a4[] = {"--transport", "tls", "--out", "o", "--tls-cert", "c",
	    "--tls-key", "k", "--tls-ca", "a"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 10, a4));
	PT_TEST_OK(pti_config_check(&c, PT_CMD_RUN));
}

static void test_transport_tls_flags_need_tls_address(void)
{
	pti_config c;
	char *a1[] = {"--listen", "tcp://127.0.0.1:0", "--tls-ca", "a"};
	PT_TEST_OK(parse(&c, PT_CMD_SERVER, 4, a1));
	PT_TEST_ERR(pti_config_check(&c, PT_CMD_SERVER), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--tls-ca is only for TLS");
	char *a2[] = {"--out", "o", "--tls-key", "k"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 4, a2));
	PT_TEST_ERR(pti_config_check(&c, PT_CMD_RUN), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--transport tls");
}

static void test_transport_run_hands_flags_on(void)
{
	pti_config c, d;
	char *argv[] = {"--transport", "tls", "--out", "o", "--tls-cert",
	    "c.crt", "--tls-key", "c.key", "--tls-ca", "ca.crt"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 10, argv));
	PT_TEST_TRUE(c.transport == PT_TRANSPORT_TLS);
	for (uint32_t cmd = PT_CMD_SERVER; cmd <= PT_CMD_WORKER; cmd <<= 1) {
		char *out[128];
		int n = 0;
		PT_TEST_OK(pti_config_to_argv(&c, PT_CMD_RUN, cmd, out, &n));
		PT_TEST_OK(parse(&d, cmd, n, out));
		PT_TEST_TRUE(strcmp(d.job.tls_cert, "c.crt") == 0);
		PT_TEST_TRUE(strcmp(d.job.tls_key, "c.key") == 0);
		PT_TEST_TRUE(strcmp(d.job.tls_ca, "ca.crt") == 0);
		for (int i = 0; i < n; i++)
			free(out[i]);
	}
}

static void test_transport_load_names_the_file(void)
{
	pti_config c;
	char *argv[] = {"--listen", "tls+tcp://127.0.0.1:0", "--tls-cert",
	    "/nonexistent/c.crt", "--tls-key", "k", "--tls-ca", "a"};
	PT_TEST_OK(parse(&c, PT_CMD_SERVER, 8, argv));
	PT_TEST_ERR(pti_transport_tls_load(&c.job), PT_EIO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EIO), "--tls-cert /nonexistent/c.crt");
	// Without --tls-cert there is nothing to load.
	pti_config_defaults(&c);
	PT_TEST_OK(pti_transport_tls_load(&c.job));
}

static void test_transport_tls_without_files_refused(void)
{
	nng_socket s;
	nng_listener l;
	pti_config c;
	pti_config_defaults(&c);
	PT_TEST_OK(pti_transport_tls_load(&c.job)); // forget any files
	PT_TEST_OK(nng_rep0_open(&s));
	PT_TEST_ERR(pti_transport_listen(&l, s, "tls+tcp://127.0.0.1:0"),
	    NNG_EINVAL);
	PT_TEST_ERR(pti_transport_dial(s, "tls+tcp://127.0.0.1:1", NULL,
			NNG_FLAG_NONBLOCK), NNG_EINVAL);
	// Plain addresses need no files.
	PT_TEST_OK(pti_transport_listen(&l, s, "tcp://127.0.0.1:0"));
	nng_close(s);
}

// ---------------------------------------------------------------- buffers

static int widened_rep, widened_req; // what the pipe callbacks widened

static void widen_rep_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)ev, (void)arg;
	widened_rep += pti_transport_widen(p);
}

static void widen_req_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)ev, (void)arg;
	widened_req += pti_transport_widen(p);
}

// unix_bufs counts this process's Unix stream sockets whose send buffer
// is `size` bytes as the kernel reports it.
static int unix_bufs(int size)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
		int fd = atoi(e->d_name), v = 0, t = 0;
		socklen_t len = sizeof(v);
		if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 ||
		    v != AF_UNIX)
			continue;
		len = sizeof(t);
		getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &len);
		len = sizeof(v);
		if (t == SOCK_STREAM &&
		    getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &len) == 0 &&
		    v == size)
			n++;
	}
	if (d != NULL)
		closedir(d);
	return n;
}

// pair_up connects a REQ socket to a REP socket at url (":0" ports are
// resolved) with the widening callbacks, and makes one round trip so
// that both ends have their pipe.
static void pair_up(nng_socket *rep, nng_socket *req, const char *url)
{
	nng_listener l;
	nng_sockaddr sa;
	char at[256];
	nng_msg *m;
	widened_rep = widened_req = 0;
	PT_TEST_OK(nng_rep0_open(rep));
	PT_TEST_OK(nng_req0_open(req));
	PT_TEST_OK(nng_pipe_notify(*rep, NNG_PIPE_EV_ADD_PRE, widen_rep_cb,
	    NULL));
	PT_TEST_OK(nng_pipe_notify(*req, NNG_PIPE_EV_ADD_POST, widen_req_cb,
	    NULL));
	PT_TEST_OK(pti_transport_listen(&l, *rep, url));
	snprintf(at, sizeof(at), "%s", url);
	if (nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) == 0 &&
	    sa.s_family == NNG_AF_INET)
		snprintf(at, sizeof(at), "tcp://127.0.0.1:%u",
		    (unsigned)ntohs(sa.s_in.sa_port));
	PT_TEST_OK(pti_transport_dial(*req, at, NULL, 0));
	PT_TEST_OK(nng_msg_alloc(&m, 8));
	PT_TEST_OK(nng_sendmsg(*req, m, 0));
	PT_TEST_OK(nng_recvmsg(*rep, &m, 0));
	PT_TEST_OK(nng_sendmsg(*rep, m, 0));
	PT_TEST_OK(nng_recvmsg(*req, &m, 0));
	nng_msg_free(m);
}

// test_transport_ipc_buffers_widened: both ends of an ipc connection get
// the larger buffers (as far as net.core.wmem_max lets them), a tcp
// connection is left to the kernel's own tuning.
static void test_transport_ipc_buffers_widened(void)
{
	char dir[256], url[300];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/pt-widen-XXXXXX",
	    tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
	nng_socket rep, req;
	long max = 0;
	FILE *f = fopen("/proc/sys/net/core/wmem_max", "r");
	if (f != NULL) {
		if (fscanf(f, "%ld", &max) != 1)
			max = 0;
		fclose(f);
	}
	PT_TEST_TRUE(mkdtemp(dir) != NULL);
	snprintf(url, sizeof(url), "ipc://%s/s", dir);
	pair_up(&rep, &req, url);
	// Both ends live in this process: the first callback finds them
	// all (and the listener), the second finds them widened already.
	PT_TEST_TRUE(widened_rep + widened_req >= 2);
	// The kernel keeps twice what was asked, capped at wmem_max first.
	int want = 2 * (int)(max > 0 && max < PTI_IPC_SOCKBUF ? max
							   : PTI_IPC_SOCKBUF);
	PT_TEST_TRUE(unix_bufs(want) >= 2); // the dialed and the accepted
	nng_close(req);
	nng_close(rep);
	snprintf(url, sizeof(url), "%s/s", dir);
	unlink(url);
	rmdir(dir);

	pair_up(&rep, &req, "tcp://127.0.0.1:0");
	PT_TEST_TRUE(widened_rep == 0 && widened_req == 0);
	nng_close(req);
	nng_close(rep);
}

static const pti_test_case cases[] = {
    {"test_transport_is_tls", test_transport_is_tls},
    {"test_transport_tls_address_needs_every_flag",
	test_transport_tls_address_needs_every_flag},
    {"test_transport_tls_flags_need_tls_address",
	test_transport_tls_flags_need_tls_address},
    {"test_transport_run_hands_flags_on", test_transport_run_hands_flags_on},
    {"test_transport_load_names_the_file",
	test_transport_load_names_the_file},
    {"test_transport_tls_without_files_refused",
	test_transport_tls_without_files_refused},
    {"test_transport_ipc_buffers_widened",
	test_transport_ipc_buffers_widened},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
