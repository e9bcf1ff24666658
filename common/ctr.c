// common/ctr.c - the synthetic click set (ctr.h).
#include "common/ctr.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/rng.h"

#define CTR_MAX_N (1u << 26)
#define CTR_MAX_FIELDS 256u
#define CTR_MAX_IDS (1ull << 40) // fields x vocab
#define CTR_BIAS (-1.5)          // the planted logit's bias: ~25% clicks

// Streams of the planted model, apart from the examples' streams.
#define CTR_W 0x6374727700000001ull // an id's weight
#define CTR_V 0x6374727700000002ull // an id's factors
#define CTR_EX 0x6374727700000003ull // examples of a stream

int pti_ctr_parse(const char *spec, pti_ctr_spec *out)
{
	pti_ctr_spec s = {0, 0, 0, 1, 1.1, PTI_CTR_K};
	double v[6];
	int n = 0;
	const char *p = spec + 4;
	if (strncmp(spec, "ctr:", 4) != 0)
		return pti_err_set(PT_EINVAL, "--data %s: not ctr:...", spec);
	for (;;) {
		char *end;
		errno = 0;
		if (n == 6)
			goto bad; // a seventh value
		v[n] = strtod(p, &end);
		if (end == p || errno != 0 || *p == '-' || *p == '+' ||
		    (*end != ',' && *end != '\0'))
			goto bad;
		n++;
		if (*end == '\0')
			break;
		p = end + 1;
	}
	if (n < 3)
		goto bad;
	for (int i = 0; i < n; i++) // all but SKEW: whole
		if (i != 4 && v[i] != floor(v[i]))
			goto bad;
	if (v[0] < 1 || v[0] > CTR_MAX_N || v[1] < 1 ||
	    v[1] > CTR_MAX_FIELDS || v[2] < 1 ||
	    v[2] * v[1] > (double)CTR_MAX_IDS)
		goto bad;
	s.n = (uint32_t)v[0];
	s.fields = (uint32_t)v[1];
	s.vocab = (uint64_t)v[2];
	if (n > 3) {
		if (v[3] >= 18446744073709551616.0)
			goto bad;
		s.seed = (uint64_t)v[3];
	}
	if (n > 4) {
		if (!(v[4] >= 0 && v[4] <= 4))
			goto bad;
		s.skew = v[4];
	}
	if (n > 5) {
		if (v[5] > PTI_CTR_K_MAX)
			goto bad;
		s.k = (uint32_t)v[5];
	}
	*out = s;
	return 0;
bad:
	return pti_err_set(PT_EINVAL, "--data %s: expected ctr:N,F,V[,SEED"
	    "[,SKEW[,K]]]: N examples (1 to %u) of F fields (1 to %u) of V "
	    "ids each (F x V at most 2^40), the data's SEED (a whole number, "
	    "1 unless given), the Zipf exponent SKEW of the ids (0 to 4, 1.1 "
	    "unless given) and the planted model's factors K (0 to %d, 0 "
	    "linear; %d unless given), as in ctr:100000,26,1000000", spec,
	    CTR_MAX_N, CTR_MAX_FIELDS, PTI_CTR_K_MAX, PTI_CTR_K);
}

// Hörmann and Derflinger (1996), "Rejection-inversion to generate
// variates from monotone discrete distributions", for h(x) = x^-skew on
// [1, v]. helper1(x) = log1p(x) / x and helper2(x) = expm1(x) / x, by
// series near 0.
static double helper1(double x)
{
	return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 -
	    0.25 * x));
}

static double helper2(double x)
{
	return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 *
	    (1 + 0.25 * x));
}

static double zh(double x, double s)
{
	return exp(-s * log(x));
}

static double zH(double x, double s) // the integral of h from 1 to x
{
	double lx = log(x);
	return helper2((1 - s) * lx) * lx;
}

static double zHinv(double x, double s)
{
	double t = x * (1 - s);
	if (t < -1)
		t = -1;
	return exp(helper1(t) * x);
}

uint64_t pti_zipf(uint64_t v, double skew, pti_rng *r)
{
	if (v == 1)
		return 1;
	double hx1 = zH(1.5, skew) - 1, hn = zH((double)v + 0.5, skew);
	double sv = 2 - zHinv(zH(2.5, skew) - zh(2, skew), skew);
	for (;;) {
		double w = hn + pti_rng_unit(r) * (hx1 - hn);
		double x = zHinv(w, skew);
		double k = floor(x + 0.5);
		if (k < 1)
			k = 1;
		else if (k > (double)v)
			k = (double)v;
		if (k - x <= sv || w >= zH(k + 0.5, skew) - zh(k, skew))
			return (uint64_t)k;
	}
}

// normal is a standard normal deviate of its own for (key, id, j): the
// first of a stream named by them, so no state is kept.
static double normal(uint64_t key, uint64_t id, uint64_t j)
{
	pti_rng r;
	pti_rng_seed(&r, pti_hash3(key, id, j), 0);
	return pti_rng_normal(&r);
}

double pti_ctr_logit(const pti_ctr_spec *s, const uint64_t *ids)
{
	// Each term's scale makes the weights and the pairs each add
	// variance about 1 to the logit, whatever F.
	double pairs = s->fields > 1 ? s->fields * (s->fields - 1) / 2.0 : 1;
	double sw = 1.0 / sqrt((double)s->fields);
	double sv = s->k > 0 ? pow(pairs * s->k, -0.25) : 0;
	uint64_t kw = pti_hash3(s->seed, CTR_W, 0);
	uint64_t kv = pti_hash3(s->seed, CTR_V, 0);
	double f[CTR_MAX_FIELDS][PTI_CTR_K_MAX], z = CTR_BIAS;
	for (uint32_t i = 0; i < s->fields; i++) {
		z += sw * normal(kw, ids[i], 0);
		for (uint32_t k = 0; k < s->k; k++)
			f[i][k] = sv * normal(kv, ids[i], (uint64_t)k);
	}
	// sum over pairs of <f_i, f_j> = (|sum f|^2 - sum |f|^2) / 2
	for (uint32_t k = 0; k < s->k; k++) {
		double all = 0, sq = 0;
		for (uint32_t i = 0; i < s->fields; i++) {
			all += f[i][k];
			sq += f[i][k] * f[i][k];
		}
		z += (all * all - sq) / 2;
	}
	return z;
}

int pti_ctr_make(pti_ctr *d, const pti_ctr_spec *s, uint32_t n,
    uint64_t stream)
{
	memset(d, 0, sizeof(*d));
	d->ids = malloc((size_t)n * s->fields * sizeof(*d->ids));
	d->y = malloc(n > 0 ? n : 1);
	d->p = malloc((size_t)(n > 0 ? n : 1) * sizeof(*d->p));
	if (d->ids == NULL || d->y == NULL || d->p == NULL) {
		pti_ctr_free(d);
		return pti_err_set(PT_ENOMEM, "ctr: %u examples of %u fields",
		    n, s->fields);
	}
	d->n = n;
	d->fields = s->fields;
	pti_rng r;
	pti_rng_seed(&r, s->seed, CTR_EX ^ (stream << 8));
	for (uint32_t e = 0; e < n; e++) {
		uint64_t *ids = d->ids + (size_t)e * s->fields;
		for (uint32_t f = 0; f < s->fields; f++)
			ids[f] = f * s->vocab +
				 pti_zipf(s->vocab, s->skew, &r) - 1;
		double p = 1 / (1 + exp(-pti_ctr_logit(s, ids)));
		d->p[e] = (float)p;
		d->y[e] = pti_rng_unit(&r) < p;
	}
	return 0;
}

void pti_ctr_free(pti_ctr *d)
{
	free(d->ids);
	free(d->y);
	free(d->p);
	memset(d, 0, sizeof(*d));
}
