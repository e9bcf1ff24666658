// tests/proc_tlsdial.c - for tests/tls_test.sh: dial a pstrain server's
// tls+tcp:// address once, as a client that may show no certificate at
// all (which pstrain's own flags never allow), and say whether the TLS
// handshake and nng's connection set-up went through.
//   proc_tlsdial URL CA [CERT KEY]
// CA: the certificate authority the server's certificate must chain to;
// CERT KEY: the client's certificate and key, all PEM. Exits 0 and prints
// "connected" when the connection is up, 1 and prints "refused: WHY" when
// it is not, 2 on a usage or set-up error.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

// slurp returns path's contents, NUL-terminated, or NULL.
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	char *buf = calloc(1, 1 << 16);
	size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
	fclose(f);
	if (buf != NULL && n == 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int main(int argc, char **argv)
{
	nng_socket s;
	nng_dialer d;
	nng_tls_config *cfg;
	nng_url *u;
	char *cert = NULL, *key = NULL;
	int rv;
	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: %s URL CA [CERT KEY]\n", argv[0]);
		return 2;
	}
	if (argc == 5 && ((cert = slurp(argv[3])) == NULL ||
			     (key = slurp(argv[4])) == NULL)) {
		fprintf(stderr, "tlsdial: cannot read %s or %s\n", argv[3],
		    argv[4]);
		return 2;
	}
	if ((rv = nng_url_parse(&u, argv[1])) != 0 ||
	    (rv = nng_req0_open(&s)) != 0 ||
	    (rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT)) != 0 ||
	    (rv = nng_tls_config_ca_file(cfg, argv[2])) != 0 ||
	    (rv = nng_tls_config_server_name(cfg, u->u_hostname)) != 0 ||
	    (cert != NULL &&
		(rv = nng_tls_config_own_cert(cfg, cert, key, NULL)) != 0) ||
	    (rv = nng_dialer_create(&d, s, argv[1])) != 0 ||
	    (rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg)) != 0) {
		fprintf(stderr, "tlsdial: set-up: %s\n", nng_strerror(rv));
		return 2;
	}
	nng_url_free(u);
	nng_tls_config_free(cfg);
	free(cert);
	free(key);
	// Blocking: nng returns once the handshake and the exchange of
	// protocol headers are done, or with what stopped them.
	rv = nng_dialer_start(d, 0);
	nng_close(s);
	if (rv != 0) {
		printf("refused: %s\n", nng_strerror(rv));
		return 1;
	}
	printf("connected\n");
	return 0;
}
