// common/transport.c - listeners and dialers with TLS applied to
// tls+tcp:// addresses (see transport.h). The three PEM files are read
// once into memory; every endpoint gets a TLS configuration of its own
// built from them, since a dialer's must name the host it dials.
#include "common/transport.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <nng/supplemental/tls/tls.h>

#include "common/config.h"
#include "common/err.h"

#define TLS_FILE_MAX (1 << 20) // PEM files are a few kB

// What pti_transport_tls_load read: NUL-terminated PEM text, or NULL.
static struct {
	char *cert, *key, *ca;
} tls_pem;

int pti_transport_is_tls(const char *url)
{
	return strncmp(url, "tls+tcp://", 10) == 0 ||
	       strncmp(url, "tls+tcp4://", 11) == 0 ||
	       strncmp(url, "tls+tcp6://", 11) == 0;
}

int pti_transport_is_ipc(const char *url)
{
	return strncmp(url, "ipc://", 6) == 0;
}

uint32_t pti_transport_urls_count(const char *urls, int (*is)(const char *),
    uint32_t *n_urls)
{
	uint32_t k = 0, n = 0;
	for (const char *p = urls; *p != '\0';) {
		n++;
		k += is(p) != 0;
		const char *e = strchr(p, ',');
		if (e == NULL)
			break;
		p = e + 1;
	}
	*n_urls = n;
	return k;
}

// ============================================================
// Flags
// ============================================================

// check_urls tells whether any of the comma-separated urls is TLS.
static int check_urls(const char *urls)
{
	uint32_t n;
	return pti_transport_urls_count(urls, pti_transport_is_tls, &n) > 0;
}

// check_files: the three TLS files of o against whether the addresses
// (`what`) of cmd are TLS.
static int check_files(const pti_jobopt *o, uint32_t cmd, int tls,
    const char *what)
{
	const struct {
		const char *flag, *val;
	} files[] = {{"--tls-cert", o->tls_cert}, {"--tls-key", o->tls_key},
	    {"--tls-ca", o->tls_ca}};
	for (int i = 0; i < 3; i++) {
		if (tls && files[i].val[0] == '\0')
			return pti_err_set(PT_EINVAL,
			    "%s needs %s FILE (with --tls-cert, --tls-key and "
			    "--tls-ca; scripts/certs.sh makes them)", what,
			    files[i].flag);
		// Refused rather than ignored: whoever gives certificates
		// means the job to use them, and a plain address would
		// quietly send everything in the clear.
		if (!tls && files[i].val[0] != '\0')
			return pti_err_set(PT_EINVAL,
			    "%s is only for TLS: give %s", files[i].flag,
			    cmd == PT_CMD_SERVER ? "--listen tls+tcp://HOST:PORT"
			    : cmd == PT_CMD_WORKER
				? "tls+tcp:// addresses to --connect"
				: "--transport tls");
	}
	return 0;
}

int pti_transport_check_addrs(const pti_jobopt *o, uint32_t cmd,
    const char *addrs)
{
	if (cmd == PT_CMD_SERVER)
		return check_files(o, cmd, pti_transport_is_tls(addrs),
		    "--listen tls+tcp://...");
	return check_files(o, cmd, check_urls(addrs),
	    "a tls+tcp:// address in --connect");
}

int pti_transport_check(const pti_config *c, uint32_t cmd)
{
	if (cmd == PT_CMD_SERVER || cmd == PT_CMD_WORKER)
		return pti_transport_check_addrs(&c->job, cmd,
		    cmd == PT_CMD_SERVER ? c->listen : c->connect);
	if (cmd == PT_CMD_RUN || cmd == PT_CMD_COMPARE)
		return check_files(&c->job, cmd,
		    c->transport == PT_TRANSPORT_TLS, "--transport tls");
	return 0;
}

// ============================================================
// Loading the files
// ============================================================

// tls_read reads path, given as flag, into *out (NUL-terminated).
static int tls_read(const char *flag, const char *path, char **out)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return pti_err_set(PT_EIO, "%s %s: %s", flag, path,
		    strerror(errno));
	char *buf = malloc(TLS_FILE_MAX + 1);
	if (buf == NULL) {
		fclose(f);
		return pti_err_set(PT_ENOMEM, "%s %s", flag, path);
	}
	size_t n = fread(buf, 1, TLS_FILE_MAX + 1, f);
	int bad = ferror(f);
	fclose(f);
	if (bad || n > TLS_FILE_MAX) {
		free(buf);
		return pti_err_set(PT_EIO, "%s %s: %s", flag, path,
		    bad ? "cannot be read" : "larger than 1 MiB");
	}
	buf[n] = '\0';
	// mbedTLS takes PEM text up to its NUL: a NUL inside would cut it.
	if (strlen(buf) != n) {
		free(buf);
		return pti_err_set(PT_EINVAL, "%s %s: not a PEM file", flag,
		    path);
	}
	*out = buf;
	return 0;
}

static void tls_forget(void)
{
	free(tls_pem.cert);
	free(tls_pem.key);
	free(tls_pem.ca);
	memset(&tls_pem, 0, sizeof(tls_pem));
}

// tls_try parses the files into a throw-away configuration, one at a
// time, so that an error names the file nng's TLS could not read.
static int tls_try(const pti_jobopt *o)
{
	nng_tls_config *cfg;
	int rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT);
	if (rv == NNG_ENOTSUP)
		return pti_err_set(PT_ETRANSPORT,
		    "tls+tcp://: this nng library was built without TLS");
	if (rv != 0)
		return pti_err_set(PT_ENOMEM, "TLS configuration: %s",
		    nng_strerror(rv));
	if (nng_tls_config_ca_chain(cfg, tls_pem.ca, NULL) != 0)
		rv = pti_err_set(PT_EINVAL, "--tls-ca %s: holds no PEM "
		    "certificate that nng's TLS can read", o->tls_ca);
	// The CA list of a scratch configuration parses --tls-cert alone,
	// before its key is tried with it.
	else if (nng_tls_config_ca_chain(cfg, tls_pem.cert, NULL) != 0)
		rv = pti_err_set(PT_EINVAL, "--tls-cert %s: holds no PEM "
		    "certificate that nng's TLS can read", o->tls_cert);
	else if (nng_tls_config_own_cert(cfg, tls_pem.cert, tls_pem.key,
		     NULL) != 0)
		rv = pti_err_set(PT_EINVAL, "--tls-key %s: holds no PEM "
		    "private key that nng's TLS can read (unencrypted; the "
		    "key of --tls-cert %s)", o->tls_key, o->tls_cert);
	nng_tls_config_free(cfg);
	return rv;
}

int pti_transport_tls_load(const pti_jobopt *o)
{
	int rv;
	tls_forget();
	if (o->tls_cert[0] == '\0')
		return 0;
	if ((rv = tls_read("--tls-cert", o->tls_cert, &tls_pem.cert)) != 0 ||
	    (rv = tls_read("--tls-key", o->tls_key, &tls_pem.key)) != 0 ||
	    (rv = tls_read("--tls-ca", o->tls_ca, &tls_pem.ca)) != 0 ||
	    (rv = tls_try(o)) != 0) {
		tls_forget();
		return rv;
	}
	return 0;
}

// ============================================================
// Endpoints
// ============================================================

// tls_config builds a configuration from the loaded files: the peer must
// show a certificate signed by the CA, both ways (nng's servers ask for
// none by default). host: the name the server's certificate must carry,
// for dialers; NULL for listeners. Returns an nng error code.
static int tls_config(nng_tls_config **out, nng_tls_mode mode,
    const char *host)
{
	nng_tls_config *cfg;
	int rv;
	if (tls_pem.cert == NULL)
		return NNG_EINVAL;
	if ((rv = nng_tls_config_alloc(&cfg, mode)) != 0)
		return rv;
	if ((rv = nng_tls_config_auth_mode(cfg,
		 NNG_TLS_AUTH_MODE_REQUIRED)) != 0 ||
	    (rv = nng_tls_config_ca_chain(cfg, tls_pem.ca, NULL)) != 0 ||
	    (rv = nng_tls_config_own_cert(cfg, tls_pem.cert, tls_pem.key,
		 NULL)) != 0 ||
	    (host != NULL &&
		(rv = nng_tls_config_server_name(cfg, host)) != 0)) {
		nng_tls_config_free(cfg);
		return rv;
	}
	*out = cfg;
	return 0;
}

int pti_transport_listen(nng_listener *out, nng_socket s, const char *url)
{
	nng_listener l;
	nng_tls_config *cfg = NULL;
	int rv;
	if ((rv = nng_listener_create(&l, s, url)) != 0)
		return rv;
	if (pti_transport_is_tls(url) &&
	    ((rv = tls_config(&cfg, NNG_TLS_MODE_SERVER, NULL)) != 0 ||
		(rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg)) != 0))
		goto fail;
	// The listener holds the configuration now.
	if (cfg != NULL)
		nng_tls_config_free(cfg);
	cfg = NULL;
	if ((rv = nng_listener_start(l, 0)) != 0)
		goto fail;
	*out = l;
	return 0;
fail:
	if (cfg != NULL)
		nng_tls_config_free(cfg);
	nng_listener_close(l);
	return rv;
}

void pti_transport_bound_url(nng_listener l, const char *url, char *out,
    size_t n)
{
	nng_sockaddr sa;
	const char *tls = pti_transport_is_tls(url) ? "tls+" : "";
	snprintf(out, n, "%s", url);
	if (strncmp(url + strlen(tls), "tcp://", 6) == 0 &&
	    nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) == 0 &&
	    sa.s_family == NNG_AF_INET) {
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sa.s_in.sa_addr, ip, sizeof(ip));
		snprintf(out, n, "%stcp://%s:%u", tls, ip,
		    ntohs(sa.s_in.sa_port));
	}
}

int pti_transport_dial(nng_socket s, const char *url, nng_dialer *out,
    int flags)
{
	nng_dialer d;
	nng_tls_config *cfg = NULL;
	nng_url *u;
	int rv;
	if (!pti_transport_is_tls(url))
		return nng_dial(s, url, out, flags);
	if ((rv = nng_url_parse(&u, url)) != 0)
		return rv;
	rv = tls_config(&cfg, NNG_TLS_MODE_CLIENT, u->u_hostname);
	nng_url_free(u);
	if (rv != 0)
		return rv;
	if ((rv = nng_dialer_create(&d, s, url)) != 0) {
		nng_tls_config_free(cfg);
		return rv;
	}
	rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
	nng_tls_config_free(cfg); // the dialer holds its own reference
	if (rv != 0 || (rv = nng_dialer_start(d, flags)) != 0) {
		nng_dialer_close(d);
		return rv;
	}
	if (out != NULL)
		*out = d;
	return 0;
}

// ============================================================
// Socket buffers of ipc connections
// ============================================================

// sock_at tells whether fd is a Unix stream socket whose own or peer
// address is path.
static int sock_at(int fd, const char *path)
{
	struct stat st;
	int v = 0;
	socklen_t len = sizeof(v);
	if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 ||
	    v != AF_UNIX)
		return 0;
	len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) != 0 ||
	    v != SOCK_STREAM)
		return 0;
	for (int peer = 0; peer < 2; peer++) {
		struct sockaddr_un a;
		len = sizeof(a);
		memset(&a, 0, sizeof(a));
		int rv = peer ? getpeername(fd, (struct sockaddr *)&a, &len)
			      : getsockname(fd, (struct sockaddr *)&a, &len);
		if (rv == 0 && len > offsetof(struct sockaddr_un, sun_path) &&
		    strncmp(a.sun_path, path, sizeof(a.sun_path)) == 0)
			return 1;
	}
	return 0;
}

int pti_transport_widen(nng_pipe p)
{
	nng_sockaddr sa;
	if (nng_pipe_get_addr(p, NNG_OPT_LOCADDR, &sa) != 0 ||
	    sa.s_family != NNG_AF_IPC || sa.s_ipc.sa_path[0] == '\0') {
		if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0 ||
		    sa.s_family != NNG_AF_IPC || sa.s_ipc.sa_path[0] == '\0')
			return 0;
	}
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return 0;
	int widened = 0, fd_dir = dirfd(d);
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end != '\0' || end == e->d_name || fd == fd_dir ||
		    !sock_at((int)fd, sa.s_ipc.sa_path))
			continue;
		int want = PTI_IPC_SOCKBUF, have = 0;
		socklen_t len = sizeof(have);
		// The kernel reports twice what was asked (its bookkeeping):
		// a socket widened already is left alone.
		if (getsockopt((int)fd, SOL_SOCKET, SO_SNDBUF, &have, &len) ==
			0 && have >= want)
			continue;
		if (setsockopt((int)fd, SOL_SOCKET, SO_SNDBUF, &want,
			sizeof(want)) == 0)
			widened++;
		(void)setsockopt((int)fd, SOL_SOCKET, SO_RCVBUF, &want,
		    sizeof(want));
	}
	closedir(d);
	return widened;
}
