// common/auth.h - the job secret, and the proof of it a hello carries.
//
// Every process of a job holds the same secret: `pstrain run` makes one
// and hands it to its children in the environment (PSTRAIN_SECRET, hex);
// a process started by hand reads --secret-file. The secret never goes on
// the wire: a server gives each new connection a random nonce (the
// challenge op), and the hello answers with an HMAC-SHA256 over that
// nonce and who the sender says it is. The server then binds that role
// and rank to the connection (docs/PROTOCOL.md, "Authentication").
#ifndef PT_COMMON_AUTH_H
#define PT_COMMON_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define PT_SECRET_MIN 16   // bytes of secret, at least
#define PT_SECRET_MAX 64   // and at most
#define PT_NONCE_LEN 16
#define PT_MAC_LEN 32      // HMAC-SHA256
#define PT_SECRET_ENV "PSTRAIN_SECRET"

typedef struct pti_secret {
	uint8_t key[PT_SECRET_MAX];
	size_t len;
} pti_secret;

// pti_secret_make fills s with 32 random bytes (getrandom). PT_EIO if the
// kernel has none to give.
int pti_secret_make(pti_secret *s);

// pti_secret_hex writes s as lowercase hex into buf (2 * len + 1 bytes).
void pti_secret_hex(const pti_secret *s, char *buf, size_t size);

// pti_secret_load reads the job secret: from file when it is not empty
// (hex text, whitespace around it ignored; the file must not be readable
// by group or others), else from the PSTRAIN_SECRET environment variable.
// PT_EINVAL naming the file or variable when it is missing, malformed,
// shorter than PT_SECRET_MIN bytes or open to others.
int pti_secret_load(pti_secret *s, const char *file);

// pti_secret_save writes s as hex to path, created 0600 (refusing to
// overwrite a file that exists). PT_EIO naming the file.
int pti_secret_save(const pti_secret *s, const char *path);

// pti_auth_mac computes the hello's proof: HMAC-SHA256 under the secret
// over a fixed label, the server's nonce, and the role, rank, server rank
// and layout hash the hello claims.
void pti_auth_mac(const pti_secret *s, const uint8_t nonce[PT_NONCE_LEN],
    uint32_t role, uint32_t rank, uint32_t server_rank, uint64_t layout_hash,
    uint8_t mac[PT_MAC_LEN]);

// pti_auth_mac_shm is the proof of the shared-memory handshake
// (common/shm.h): the same HMAC under a label of its own, so that no
// proof of one can stand for the other.
void pti_auth_mac_shm(const pti_secret *s, const uint8_t nonce[PT_NONCE_LEN],
    uint32_t role, uint32_t rank, uint32_t server_rank,
    uint8_t mac[PT_MAC_LEN]);

// pti_auth_equal compares two macs in constant time: 1 when equal.
int pti_auth_equal(const uint8_t *a, const uint8_t *b, size_t n);

// pti_random fills buf with n bytes from the kernel's generator. PT_EIO.
int pti_random(void *buf, size_t n);

#endif // PT_COMMON_AUTH_H
