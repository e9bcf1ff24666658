// tests/proc_modeldiff.c - compare two saved models for the multi-process
// tests: prints the relative L2 distance ||a - b|| / ||a|| and the largest
// absolute difference, and exits 0 when the relative distance is at most
// TOL (third argument; 0 means bit-identical), 1 when it is not, 2 on
// error.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/layout.h"
#include "common/modelfile.h"

int main(int argc, char **argv)
{
	pti_layout la, lb;
	float *a, *b;
	int rv;
	if (argc != 4) {
		fprintf(stderr, "usage: %s A B TOL\n", argv[0]);
		return 2;
	}
	if ((rv = pti_modelfile_load(argv[1], &la, &a)) != 0 ||
	    (rv = pti_modelfile_load(argv[2], &lb, &b)) != 0) {
		fprintf(stderr, "modeldiff: %s\n", pt_errmsg(rv));
		return 2;
	}
	if (la.n_params != lb.n_params || pti_layout_hash(&la) !=
	    pti_layout_hash(&lb)) {
		fprintf(stderr, "modeldiff: different models\n");
		return 1;
	}
	double d2 = 0, a2 = 0, maxd = 0;
	for (uint64_t i = 0; i < la.n_params; i++) {
		double d = (double)a[i] - b[i];
		d2 += d * d;
		a2 += (double)a[i] * a[i];
		maxd = fabs(d) > maxd ? fabs(d) : maxd;
	}
	double rel = sqrt(d2) / (sqrt(a2) > 0 ? sqrt(a2) : 1);
	double tol = atof(argv[3]);
	int same = memcmp(a, b, la.n_params * sizeof(float)) == 0;
	printf("relative distance %.3g, max abs difference %.3g, %s\n", rel,
	    maxd, same ? "bit-identical" : "different bits");
	free(a);
	free(b);
	return tol == 0 ? !same : !(rel <= tol);
}
