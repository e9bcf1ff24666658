// tests/transport_test.c - the TLS flags against the addresses they go
// with, the launcher's hand-on of them, files that cannot be read, and
// a TLS address with no files loaded. Real handshakes, with certificates
// from scripts/certs.sh, are in tests/tls_test.sh.
#include <stdlib.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "config.h"
#include "test.h"
#include "transport.h"

static int parse(pt_config *c, uint32_t cmd, int argc, char **argv)
{
	int help;
	pt_config_defaults(c);
	return pt_config_parse(c, cmd, argc, argv, &help);
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
	pt_config c;
	char *a1[] = {"--listen", "tls+tcp://127.0.0.1:0", "--tls-cert", "c",
	    "--tls-key", "k"};
	PT_TEST_OK(parse(&c, PT_CMD_SERVER, 6, a1));
	PT_TEST_ERR(pt_config_check(&c, PT_CMD_SERVER), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "needs --tls-ca FILE");
	// One TLS address among a worker's servers is enough to need them.
	char *a2[] = {"--servers", "2", "--out", "o", "--connect",
	    "tcp://127.0.0.1:1,tls+tcp://127.0.0.1:2"};
	PT_TEST_OK(parse(&c, PT_CMD_WORKER, 6, a2));
	PT_TEST_ERR(pt_config_check(&c, PT_CMD_WORKER), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "needs --tls-cert FILE");
	char *a3[] = {"--transport", "tls", "--out", "o", "--tls-cert", "c",
	    "--tls-ca", "a"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 8, a3));
	PT_TEST_ERR(pt_config_check(&c, PT_CMD_RUN), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL),
	    "--transport tls needs --tls-key");
	char *a4[] = {"--transport", "tls", "--out", "o", "--tls-cert", "c",
	    "--tls-key", "k", "--tls-ca", "a"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 10, a4));
	PT_TEST_OK(pt_config_check(&c, PT_CMD_RUN));
}

static void test_transport_tls_flags_need_tls_address(void)
{
	pt_config c;
	char *a1[] = {"--listen", "tcp://127.0.0.1:0", "--tls-ca", "a"};
	PT_TEST_OK(parse(&c, PT_CMD_SERVER, 4, a1));
	PT_TEST_ERR(pt_config_check(&c, PT_CMD_SERVER), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--tls-ca is only for TLS");
	char *a2[] = {"--out", "o", "--tls-key", "k"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 4, a2));
	PT_TEST_ERR(pt_config_check(&c, PT_CMD_RUN), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--transport tls");
}

static void test_transport_run_hands_flags_on(void)
{
	pt_config c, d;
	char *argv[] = {"--transport", "tls", "--out", "o", "--tls-cert",
	    "c.crt", "--tls-key", "c.key", "--tls-ca", "ca.crt"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 10, argv));
	PT_TEST_TRUE(c.transport == PT_TRANSPORT_TLS);
	for (uint32_t cmd = PT_CMD_SERVER; cmd <= PT_CMD_WORKER; cmd <<= 1) {
		char *out[128];
		int n = 0;
		PT_TEST_OK(pt_config_to_argv(&c, PT_CMD_RUN, cmd, out, &n));
		PT_TEST_OK(parse(&d, cmd, n, out));
		PT_TEST_TRUE(strcmp(d.tls_cert, "c.crt") == 0);
		PT_TEST_TRUE(strcmp(d.tls_key, "c.key") == 0);
		PT_TEST_TRUE(strcmp(d.tls_ca, "ca.crt") == 0);
		for (int i = 0; i < n; i++)
			free(out[i]);
	}
}

static void test_transport_load_names_the_file(void)
{
	pt_config c;
	char *argv[] = {"--listen", "tls+tcp://127.0.0.1:0", "--tls-cert",
	    "/nonexistent/c.crt", "--tls-key", "k", "--tls-ca", "a"};
	PT_TEST_OK(parse(&c, PT_CMD_SERVER, 8, argv));
	PT_TEST_ERR(pti_transport_tls_load(&c), PT_EIO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EIO), "--tls-cert /nonexistent/c.crt");
	// Without --tls-cert there is nothing to load.
	pt_config_defaults(&c);
	PT_TEST_OK(pti_transport_tls_load(&c));
}

static void test_transport_tls_without_files_refused(void)
{
	nng_socket s;
	nng_listener l;
	pt_config c;
	pt_config_defaults(&c);
	PT_TEST_OK(pti_transport_tls_load(&c)); // forget any files
	PT_TEST_OK(nng_rep0_open(&s));
	PT_TEST_ERR(pti_transport_listen(&l, s, "tls+tcp://127.0.0.1:0"),
	    NNG_EINVAL);
	PT_TEST_ERR(pti_transport_dial(s, "tls+tcp://127.0.0.1:1", NULL,
			NNG_FLAG_NONBLOCK), NNG_EINVAL);
	// Plain addresses need no files.
	PT_TEST_OK(pti_transport_listen(&l, s, "tcp://127.0.0.1:0"));
	nng_close(s);
}

static const pt_test_case cases[] = {
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
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pt_test_main(argc, argv, cases);
}
