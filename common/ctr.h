// common/ctr.h - a seeded synthetic click set for sparse models (issue
// 35): N examples of F categorical fields, each field's id drawn from V
// ids with Zipf frequencies (exponent SKEW: id 1 the most frequent), and
// each label drawn from a planted factorization machine over those ids,
// so that the best AUC any model can reach on the set is known: the AUC
// of the planted probabilities themselves.
//
// The planted model needs no memory: each (field, id)'s weight and
// factors are hashes of (data seed, field, id). Pure functions, no state
// beyond the caller's arrays.
#ifndef PT_COMMON_CTR_H
#define PT_COMMON_CTR_H

#include <stdint.h>

#include "common/rng.h"

#define PTI_CTR_K 4     // the planted model's factors per id, unless given
#define PTI_CTR_K_MAX 16

typedef struct pti_ctr_spec {
	uint32_t n, fields; // examples, fields per example
	uint64_t vocab;     // ids per field
	uint64_t seed;      // the data's own seed (not the job's)
	double skew;        // Zipf exponent of each field's ids
	uint32_t k;         // the planted model's factors (0: linear)
} pti_ctr_spec;

// One set: ids (n, fields) global ids, field f's j-th id (1-based rank in
// frequency) being f * vocab + j - 1; y the clicks (0 or 1); p the
// planted model's click probability of each example.
typedef struct pti_ctr {
	uint32_t n, fields;
	uint64_t *ids;
	uint8_t *y;
	float *p;
} pti_ctr;

// pti_ctr_parse reads "ctr:N,F,V[,SEED[,SKEW[,K]]]" (SEED 1, SKEW 1.1
// and K PTI_CTR_K unless given; N 1 to 2^26, F 1 to 256, V 1 to 2^40 /
// F, SKEW 0 to 4, K 0 to PTI_CTR_K_MAX: 0 plants a linear model, which
// logistic regression can reach).
// 0, or PT_EINVAL with a detail naming the spec and what is wrong.
int pti_ctr_parse(const char *spec, pti_ctr_spec *out);

// pti_ctr_make draws n examples of stream `stream` (train, test and
// validation sets are streams of one spec) into *d. 0 or PT_ENOMEM.
int pti_ctr_make(pti_ctr *d, const pti_ctr_spec *s, uint32_t n,
    uint64_t stream);
void pti_ctr_free(pti_ctr *d);

// pti_ctr_logit is the planted model's logit for one example's ids
// (fields of them): a bias, each id's weight, and the dot products of
// the factors of every pair of fields.
double pti_ctr_logit(const pti_ctr_spec *s, const uint64_t *ids);

// pti_zipf draws a rank in [1, v] with probability proportional to
// rank^-skew (Hörmann and Derflinger's rejection-inversion: O(1) memory
// and time for any v) from r's stream.
uint64_t pti_zipf(uint64_t v, double skew, pti_rng *r);

#endif // PT_COMMON_CTR_H
