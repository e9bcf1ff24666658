// ps/bound.c - the checks on a gradient's values before any is applied:
// finite, and under the gradient norm bound (--grad-bound K), in one pass
// (pti_push_check; rows: pti_push_finite). Under the bound: a push whose
// gradient, as root mean square over its range, is more than K times the
// median of the last PS_BOUND_WINDOW pushes the server accepted for the
// same range (or than K x PS_BOUND_FLOOR, when that is larger) is refused, counted and logged, so that one poisoned push
// (3e38, or a worker gone wrong) changes no parameter and cannot leave
// the job "ok". Each range (its offset in the shard; pieces of
// --layer-push have one each) keeps its own window: the layers of a
// model differ by orders of magnitude. Ranges share a window only once
// more than PS_BOUND_SLOTS are in use. The bound applies once a range's
// window is full; a refused push does not enter it.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/blas.h"
#include "common/err.h"
#include "ps/pieces.h"
#include "ps/server_impl.h"

struct ps_bound {
	uint64_t off; // the range this slot's window belongs to (first one)
	uint32_t count, next;
	float rms[PS_BOUND_WINDOW];
};

// bound_sumsq is the sum of squares of the n floats at pay (which need
// not be aligned).
static double bound_sumsq(const void *pay, uint64_t n)
{
	const float *a = pti_aligned(pay);
	double sum = 0;
	if (a != NULL) {
		sum = pti_blas_sumsq(a, n);
	} else {
		float buf[1024];
		for (uint64_t i = 0; i < n; i += 1024) {
			size_t len = n - i < 1024 ? n - i : 1024;
			memcpy(buf, (const char *)pay + i * 4, len * 4);
			sum += pti_blas_sumsq(buf, len);
		}
	}
	return sum;
}

static int bound_cmp(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static double bound_median(const ps_bound *b)
{
	float v[PS_BOUND_WINDOW];
	memcpy(v, b->rms, sizeof(v));
	qsort(v, PS_BOUND_WINDOW, sizeof(float), bound_cmp);
	return 0.5 * ((double)v[PS_BOUND_WINDOW / 2 - 1] +
			 (double)v[PS_BOUND_WINDOW / 2]);
}

// bound_check refuses a push of [off, off + n) of the shard whose
// gradient's root mean square is rms, under --grad-bound, or else
// enters it in the range's window.
static int bound_check(ps_server *s, const pti_hdr *h, uint64_t off,
    uint64_t n, double rms)
{
	double k = s->job->grad_bound;
	if (k <= 0 || n == 0)
		return 0;
	if (s->bound == NULL &&
	    (s->bound = calloc(PS_BOUND_SLOTS, sizeof(ps_bound))) == NULL)
		return pti_err_set(PT_ENOMEM, "gradient bound windows");
	// The range's slot: open addressing from its hash; once every slot
	// is taken, the hashed one is shared.
	uint32_t i0 = (uint32_t)((off * 0x9E3779B97F4A7C15ull) >> 40) %
		      PS_BOUND_SLOTS;
	ps_bound *b = &s->bound[i0];
	for (uint32_t i = 0; i < PS_BOUND_SLOTS; i++) {
		ps_bound *c = &s->bound[(i0 + i) % PS_BOUND_SLOTS];
		if (c->count == 0 || c->off == off) {
			b = c;
			break;
		}
	}
	if (b->count == 0)
		b->off = off;
	if (b->count >= PS_BOUND_WINDOW) {
		// The floor keeps a window of zeros (a layer whose units
		// all died) from refusing the next small gradient.
		double med = bound_median(b);
		double ratio = rms / (med > PS_BOUND_FLOOR ? med : PS_BOUND_FLOOR);
		if (ratio > s->grad_ratio_max)
			s->grad_ratio_max = ratio;
		if (ratio > k) {
			s->grad_refused++;
			if (pti_note_due(s->grad_refused))
				pti_log(PT_LOG_WARN, "server %u: refused a push "
				    "of worker %u at step %lld on [%llu, +%llu): "
				    "gradient RMS %g is %g times the median %g "
				    "of the last %d pushes there (floor %g), "
				    "more than --grad-bound %g; %llu so far",
				    s->rank,
				    h->rank, (long long)h->step,
				    (unsigned long long)(s->lo + off),
				    (unsigned long long)n, rms, ratio, med,
				    PS_BOUND_WINDOW, PS_BOUND_FLOOR, k,
				    (unsigned long long)s->grad_refused);
			return pti_err_set(PT_ERANGE, "worker %u pushed a "
			    "gradient of RMS %g, %g times the median of the "
			    "last %d pushes of that range (--grad-bound %g)",
			    h->rank, rms, ratio, PS_BOUND_WINDOW, k);
		}
	}
	b->rms[b->next] = (float)rms;
	b->next = (b->next + 1) % PS_BOUND_WINDOW;
	b->count += b->count < PS_BOUND_WINDOW;
	return 0;
}

// push_finite refuses a gradient with a NaN or infinite value: one would
// make every parameter it touches non-finite for good. The refusals are
// counted, and logged (the first ten, then every thousandth). pay holds
// the push's values from its at-th on.
static int push_finite(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t at, uint64_t n)
{
	const unsigned char *b = pay;
	uint64_t i = pti_first_nonfinite(pay, n);
	if (i-- == 0)
		return 0;
	float v;
	memcpy(&v, b + i * sizeof(float), sizeof(float));
	s->nonfinite++;
	if (pti_note_due(s->nonfinite))
		pti_log(PT_LOG_WARN, "server %u: refused a push of worker %u with a "
		    "non-finite value (%g at offset %llu); %llu so far",
		    s->rank, h->rank, (double)v,
		    (unsigned long long)(h->off + at + i),
		    (unsigned long long)s->nonfinite);
	return pti_err_set(PT_EINVAL, "worker %u pushed a non-finite "
	    "gradient value at offset %llu", h->rank,
	    (unsigned long long)(h->off + at + i));
}

int pti_push_finite(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t n)
{
	return push_finite(s, h, pay, 0, n);
}

int pti_push_check(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t off, uint64_t n)
{
	uint64_t read = off; // pages let go up to here
	double sum = 0;
	int rv;
	for (uint64_t i = 0; i < n; i += PS_LET_GO) {
		uint64_t len = n - i < PS_LET_GO ? n - i : PS_LET_GO;
		const char *p = (const char *)pay + i * sizeof(float);
		if ((rv = push_finite(s, h, p, i, len)) != 0)
			return rv;
		if (s->job->grad_bound > 0)
			sum += bound_sumsq(p, len);
		if (s->policy->keeps)
			pti_shard_let_go(s, NULL, h->rank, &read,
			    off + i + len, off + n);
	}
	return bound_check(s, h, off, n, n > 0 ? sqrt(sum / (double)n) : 0);
}
