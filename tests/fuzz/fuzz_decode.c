// tests/fuzz/fuzz_decode.c - libFuzzer over the message decoder: any bytes
// are refused or decoded, never read out of bounds; what decodes encodes
// again.
#include <stdint.h>
#include <stdlib.h>

#include <nng/nng.h>

#include "common/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nng_msg *m, *again;
	pti_hdr h;
	const void *pay;
	if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, data, size) != 0)
		abort();
	if (pti_msg_decode(&h, &pay, m) == 0) {
		uint64_t n = (h.has & PTI_H_RANGE) ? h.n : 0;
		if (pay != NULL && pti_msg_encode(&again, &h, pay, n) == 0)
			nng_msg_free(again);
	}
	nng_msg_free(m);
	return 0;
}
