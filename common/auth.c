// common/auth.c - the job secret and the hello's HMAC (see auth.h).
#include "common/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mbedtls/md.h>

#include "common/err.h"

#define AUTH_LABEL "pstrain hello 2"
#define AUTH_SHM_LABEL "pstrain shm 1" // common/shm.h's handshake

int pti_random(void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t got = getrandom(p, n, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return pti_err_set(PT_EIO, "getrandom: %s",
			    strerror(errno));
		p += got;
		n -= (size_t)got;
	}
	return 0;
}

int pti_secret_make(pti_secret *s)
{
	s->len = 32;
	return pti_random(s->key, s->len);
}

void pti_secret_hex(const pti_secret *s, char *buf, size_t size)
{
	size_t i;
	for (i = 0; i < s->len && 2 * i + 2 < size; i++)
		snprintf(buf + 2 * i, 3, "%02x", s->key[i]);
	buf[2 * i < size ? 2 * i : 0] = '\0';
}

static int hex_val(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

// secret_parse reads hex text with whitespace around it into s.
static int secret_parse(pti_secret *s, const char *text, size_t len,
    const char *from)
{
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' ' ||
			      text[len - 1] == '\r' || text[len - 1] == '\t'))
		len--;
	while (len > 0 && (*text == ' ' || *text == '\t' || *text == '\n')) {
		text++;
		len--;
	}
	if (len % 2 != 0 || len / 2 < PT_SECRET_MIN || len / 2 > PT_SECRET_MAX)
		return pti_err_set(PT_EINVAL,
		    "%s: a job secret is %d to %d bytes written as hex (make "
		    "one with 'pstrain secret FILE'); this has %zu characters",
		    from, PT_SECRET_MIN, PT_SECRET_MAX, len);
	for (size_t i = 0; i < len / 2; i++) {
		int hi = hex_val(text[2 * i]), lo = hex_val(text[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return pti_err_set(PT_EINVAL,
			    "%s: not hex at character %zu", from, 2 * i + 1);
		s->key[i] = (uint8_t)(hi << 4 | lo);
	}
	s->len = len / 2;
	return 0;
}

int pti_secret_load(pti_secret *s, const char *file)
{
	char buf[2 * PT_SECRET_MAX + 64];
	memset(s, 0, sizeof(*s));
	if (file == NULL || file[0] == '\0') {
		const char *e = getenv(PT_SECRET_ENV);
		if (e == NULL || e[0] == '\0')
			return pti_err_set(PT_EINVAL,
			    "no job secret: give --secret-file FILE (make one "
			    "with 'pstrain secret FILE') or set %s; "
			    "'pstrain run' makes one for its processes",
			    PT_SECRET_ENV);
		return secret_parse(s, e, strlen(e), PT_SECRET_ENV);
	}
	// O_NONBLOCK: a FIFO (or a device) must not hold start-up; it is
	// refused below as not a regular file.
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0)
		return pti_err_set(PT_EINVAL, "--secret-file %s: %s", file,
		    strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return pti_err_set(PT_EINVAL, "--secret-file %s: not a regular "
		    "file", file);
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		close(fd);
		return pti_err_set(PT_EINVAL, "--secret-file %s: readable by "
		    "others (mode %03o); chmod 600 it", file,
		    (unsigned)(st.st_mode & 0777));
	}
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return pti_err_set(PT_EINVAL, "--secret-file %s: %s", file,
		    strerror(errno));
	char from[64 + 16];
	snprintf(from, sizeof(from), "--secret-file %.60s", file);
	return secret_parse(s, buf, (size_t)n, from);
}

int pti_secret_save(const pti_secret *s, const char *path)
{
	char hex[2 * PT_SECRET_MAX + 2];
	pti_secret_hex(s, hex, sizeof(hex));
	size_t len = strlen(hex);
	hex[len++] = '\n';
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return pti_err_set(PT_EIO, "%s: %s", path, strerror(errno));
	if (write(fd, hex, len) != (ssize_t)len || close(fd) != 0) {
		int e = errno;
		unlink(path);
		return pti_err_set(PT_EIO, "%s: %s", path, strerror(e));
	}
	return 0;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

// auth_mac is pti_auth_mac's HMAC under a label of its own.
static void auth_mac(const char *label, const pti_secret *s,
    const uint8_t nonce[PT_NONCE_LEN], uint32_t role, uint32_t rank,
    uint32_t server_rank, uint64_t layout_hash, uint8_t mac[PT_MAC_LEN])
{
	uint8_t msg[64 + PT_NONCE_LEN + 20];
	size_t at = strlen(label) + 1; // the label and its NUL
	memcpy(msg, label, at);
	memcpy(msg + at, nonce, PT_NONCE_LEN);
	at += PT_NONCE_LEN;
	put_le(msg + at, role, 4);
	put_le(msg + at + 4, rank, 4);
	put_le(msg + at + 8, server_rank, 4);
	put_le(msg + at + 12, layout_hash, 8);
	at += 20;
	mbedtls_md_hmac(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256), s->key,
	    s->len, msg, at, mac);
}

void pti_auth_mac(const pti_secret *s, const uint8_t nonce[PT_NONCE_LEN],
    uint32_t role, uint32_t rank, uint32_t server_rank, uint64_t layout_hash,
    uint8_t mac[PT_MAC_LEN])
{
	auth_mac(AUTH_LABEL, s, nonce, role, rank, server_rank, layout_hash,
	    mac);
}

void pti_auth_mac_shm(const pti_secret *s, const uint8_t nonce[PT_NONCE_LEN],
    uint32_t role, uint32_t rank, uint32_t server_rank,
    uint8_t mac[PT_MAC_LEN])
{
	auth_mac(AUTH_SHM_LABEL, s, nonce, role, rank, server_rank, 0, mac);
}

int pti_auth_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t d = 0;
	for (size_t i = 0; i < n; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}
