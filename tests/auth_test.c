// tests/auth_test.c - the job secret's files and the hello's HMAC, and the
// nonce and mac header fields on the wire.
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/proto.h"
#include "tests/test.h"

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

// test_auth_secret_files: a saved secret loads back; a file open to
// others, short, not hex, missing, or a FIFO is refused naming the
// problem; an
// existing file is not overwritten; without a file the environment is
// read.
static void test_auth_secret_files(void)
{
	char dir[] = "/tmp/pt-auth-XXXXXX", path[64], bad[64];
	pti_secret a, b;
	PT_TEST_TRUE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/s", dir);
	PT_TEST_OK(pti_secret_make(&a));
	PT_TEST_OK(pti_secret_save(&a, path));
	struct stat st;
	PT_TEST_TRUE(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	PT_TEST_OK(pti_secret_load(&b, path));
	PT_TEST_TRUE(b.len == 32 && memcmp(a.key, b.key, 32) == 0);
	PT_TEST_ERR(pti_secret_save(&a, path), PT_EIO);
	chmod(path, 0640);
	PT_TEST_ERR(pti_secret_load(&b, path), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "readable by others");
	snprintf(bad, sizeof(bad), "%s/short", dir);
	write_file(bad, "00112233\n", 0600);
	PT_TEST_ERR(pti_secret_load(&b, bad), PT_EINVAL);
	write_file(bad, "zz112233445566778899aabbccddeeff\n", 0600);
	PT_TEST_ERR(pti_secret_load(&b, bad), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "not hex");
	PT_TEST_ERR(pti_secret_load(&b, "/nonexistent/secret"), PT_EINVAL);
	// A FIFO is refused at once (opening it to read would wait for a
	// writer for ever).
	char fifo[64];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	PT_TEST_TRUE(mkfifo(fifo, 0600) == 0);
	PT_TEST_ERR(pti_secret_load(&b, fifo), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "not a regular file");
	unlink(fifo);
	setenv(PT_SECRET_ENV, "00112233445566778899aabbccddeeff", 1);
	PT_TEST_OK(pti_secret_load(&b, NULL));
	PT_TEST_TRUE(b.len == 16 && b.key[15] == 0xff);
	unsetenv(PT_SECRET_ENV);
	PT_TEST_ERR(pti_secret_load(&b, ""), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "no job secret");
	unlink(path);
	unlink(bad);
	rmdir(dir);
}

// test_auth_mac_vector: the proof is HMAC-SHA256 over the documented
// bytes (docs/PROTOCOL.md), checked against a value computed apart
// (Python's hmac); any change of nonce, role, rank or hash changes it.
static void test_auth_mac_vector(void)
{
	pti_secret k;
	uint8_t nonce[PT_NONCE_LEN], mac[PT_MAC_LEN], other[PT_MAC_LEN];
	static const char want[] = "3247c29d1a7123688ae2f3a2346023211cab29a7"
				   "32905e5fa8aafc89715c9d7c";
	char hex[2 * PT_MAC_LEN + 1];
	k.len = 32;
	for (int i = 0; i < 32; i++)
		k.key[i] = (uint8_t)i;
	memset(nonce, 0xaa, sizeof(nonce));
	pti_auth_mac(&k, nonce, 1, 2, 3, 0x0102030405060708ull, mac);
	for (int i = 0; i < PT_MAC_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	PT_TEST_TRUE(strcmp(hex, want) == 0);
	pti_auth_mac(&k, nonce, 1, 1, 3, 0x0102030405060708ull, other);
	PT_TEST_TRUE(!pti_auth_equal(mac, other, PT_MAC_LEN));
	nonce[15] ^= 1;
	pti_auth_mac(&k, nonce, 1, 2, 3, 0x0102030405060708ull, other);
	PT_TEST_TRUE(!pti_auth_equal(mac, other, PT_MAC_LEN));
	PT_TEST_TRUE(pti_auth_equal(mac, mac, PT_MAC_LEN));
}

// test_auth_fields_roundtrip: nonce and mac survive encode and decode;
// a mac of the wrong length is refused.
static void test_auth_fields_roundtrip(void)
{
	pti_hdr h, g;
	nng_msg *m;
	const void *pay;
	pti_hdr_init(&h, PT_OP_HELLO, PT_ROLE_WORKER, 3);
	h.has |= PTI_H_MAC | PTI_H_NONCE;
	for (int i = 0; i < PT_MAC_LEN; i++)
		h.mac[i] = (uint8_t)(i * 7);
	for (int i = 0; i < PT_NONCE_LEN; i++)
		h.nonce[i] = (uint8_t)(255 - i);
	PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
	PT_TEST_OK(pti_msg_decode(&g, &pay, m));
	PT_TEST_TRUE((g.has & (PTI_H_MAC | PTI_H_NONCE)) ==
		     (PTI_H_MAC | PTI_H_NONCE));
	PT_TEST_TRUE(memcmp(g.mac, h.mac, PT_MAC_LEN) == 0 &&
		     memcmp(g.nonce, h.nonce, PT_NONCE_LEN) == 0);
	nng_msg_free(m);
	// {"pv": 2, "op": 1, "mac": bin of 3 bytes}
	static const uint8_t bad[] = {18, 0, 0, 0, 0x83, 0xa2, 'p', 'v', 2,
	    0xa2, 'o', 'p', 1, 0xa3, 'm', 'a', 'c', 0xc4, 3, 1, 2, 3, 0, 0};
	nng_msg_alloc(&m, 0);
	nng_msg_append(m, bad, sizeof(bad));
	PT_TEST_ERR(pti_msg_decode(&g, &pay, m), PT_EPROTO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EPROTO), "\"mac\" must be 32 bytes");
	nng_msg_free(m);
}

static const pti_test_case cases[] = {
    {"test_auth_secret_files", test_auth_secret_files},
    {"test_auth_mac_vector", test_auth_mac_vector},
    {"test_auth_fields_roundtrip", test_auth_fields_roundtrip},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
