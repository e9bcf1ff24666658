// bench/ctrdump.c - the training examples of `--data ctr:...` written to
// a file, for bench/torch_sparse.py to train PyTorch on pstrain's own
// click set: N x F ids (uint64, little-endian as on this machine), then
// N labels (uint8), N and F being the spec's.
//
//   ctrdump ctr:N,F,V[,SEED[,SKEW[,K]]] FILE
#include <stdio.h>

#include "common/ctr.h"
#include "common/err.h"

int main(int argc, char **argv)
{
	pti_ctr_spec s;
	pti_ctr d;
	int rv;
	if (argc != 3) {
		fprintf(stderr, "usage: ctrdump ctr:N,F,V[,SEED[,SKEW[,K]]] "
				"FILE\n");
		return 2;
	}
	if ((rv = pti_ctr_parse(argv[1], &s)) != 0 ||
	    (rv = pti_ctr_make(&d, &s, s.n, 0)) != 0) { // the train stream
		fprintf(stderr, "ctrdump: %s\n", pt_errmsg(rv));
		return 1;
	}
	FILE *f = fopen(argv[2], "wb");
	size_t n = (size_t)d.n * d.fields;
	int ok = f != NULL && fwrite(d.ids, sizeof(*d.ids), n, f) == n &&
		 fwrite(d.y, 1, d.n, f) == d.n;
	if (f != NULL && fclose(f) != 0)
		ok = 0;
	pti_ctr_free(&d);
	if (!ok) {
		perror(argv[2]);
		return 1;
	}
	return 0;
}
