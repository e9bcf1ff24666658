// tests/fuzz/fuzz_server.c - libFuzzer over the server's request handler:
// sequences of requests on proven and unproven connections (fuzz.h) run
// against a server without sockets. No input may crash it, leak, or
// reach undefined behaviour (the build has ASan and UBSan). Non-finite
// parameters are not checked: a proven worker may push huge finite
// gradients, whose sum overflows as a diverging job's would.
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "common/auth.h"
#include "common/layout.h"
#include "common/proto.h"
#include "ps/server.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	// The server logs every refusal, which a fuzzer makes by the
	// million: run with -close_fd_mask=2 (make fuzz does), which
	// silences the target's stderr and keeps libFuzzer's reports.
	setenv(PT_SECRET_ENV, FUZZ_SECRET, 1);
	return 0;
}

static nng_msg *ask(pti_local_server *s, uint32_t pipe, const pti_hdr *h,
    const float *pay, uint64_t n, pti_hdr *r)
{
	nng_msg *m, *rep;
	const void *p;
	if (pti_msg_encode(&m, h, pay, n) != 0)
		abort();
	rep = pti_local_request(s, pipe, m);
	nng_msg_free(m);
	if (rep != NULL && r != NULL && pti_msg_decode(r, &p, rep) != 0)
		abort(); // the server's replies always decode
	return rep;
}

// prove says hello on pipe as role/rank with a good proof of the secret;
// the reply's status goes to *status, or any but 0 aborts when status
// is NULL.
static void prove(pti_local_server *s, uint32_t pipe, uint32_t role,
    uint32_t rank, uint64_t lhash, uint64_t n_params, uint32_t *status)
{
	pti_hdr h, r;
	pti_secret key;
	if (pti_secret_load(&key, NULL) != 0)
		abort();
	pti_hdr_init(&h, PT_OP_CHALLENGE, role, rank);
	nng_msg_free(ask(s, pipe, &h, NULL, 0, &r));
	pti_hdr_init(&h, PT_OP_HELLO, role, rank);
	if (lhash != 0) {
		h.has |= PTI_H_LAYOUT;
		h.layout_hash = lhash;
		h.n_params = n_params;
	}
	h.has |= PTI_H_MAC;
	pti_auth_mac(&key, r.nonce, role, rank, 0, lhash, h.mac);
	nng_msg *rep = ask(s, pipe, &h, NULL, 0, &r);
	if (rep == NULL || (status == NULL && r.status != 0))
		abort();
	if (status != NULL)
		*status = r.status;
	nng_msg_free(rep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pti_config c;
	pti_layout l;
	pti_local_server *s;
	if (size < 1)
		return 0;
	fuzz_config(&c, 1 + data[0] % 3);
	if (fuzz_layout(&l) != 0 || pti_local_open(&s, &c, &l) != 0)
		abort();
	for (uint32_t p = 1; p <= 4; p++)
		pti_local_connect(s, p);
	uint64_t lh = pti_layout_hash(&l);
	prove(s, 1, PT_ROLE_WORKER, 0, lh, l.n_params, NULL);
	prove(s, 2, PT_ROLE_WORKER, 1, lh, l.n_params, NULL);
	prove(s, 3, PT_ROLE_CONTROL, 0, 0, 0, NULL);
	uint32_t w[2] = {1, 2}, next = 5, status;
	size_t at = 1;
	while (at + 3 <= size) {
		uint32_t conn = data[at] % 9;
		size_t len = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
		at += 3;
		// The connection events (fuzz.h): no message follows.
		if (conn == 5 || conn == 8) {
			uint32_t *p = &w[conn == 5];
			pti_local_disconnect(s, *p);
			*p = next++;
			pti_local_connect(s, *p);
			continue;
		}
		if (conn == 6) {
			for (size_t i = 0; i < len % 300; i++)
				pti_local_connect(s, next++);
			continue;
		}
		if (conn == 7) {
			uint32_t r = len & 1;
			prove(s, w[r], PT_ROLE_WORKER, r, lh, l.n_params,
			    &status);
			continue;
		}
		if (len > size - at)
			len = size - at;
		uint32_t pipe = conn == 1 || conn == 2 ? w[conn - 1] :
				conn == 0 ? 4 : conn;
		nng_msg *m;
		if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, data + at,
						      len) != 0)
			abort();
		nng_msg_free(pti_local_request(s, pipe, m));
		nng_msg_free(m);
		at += len;
	}
	pti_local_close(s);
	return 0;
}
