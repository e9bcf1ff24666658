// ps/pieces.c - what the consistency policies share (pieces.h).
#include "ps/pieces.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/err.h"

uint64_t pti_first_nonfinite(const void *pay, uint64_t n)
{
	const unsigned char *b = pay;
	// Blocks of bits tested together (the loop vectorizes; the bytes
	// may be unaligned), then the first bad value found in its block.
	for (uint64_t lo = 0; lo < n; lo += 1024) {
		uint64_t hi = n - lo < 1024 ? n : lo + 1024;
		uint32_t bad = 0;
		for (uint64_t j = lo; j < hi; j++) {
			uint32_t u;
			memcpy(&u, b + j * 4, 4);
			bad |= (u & 0x7f800000u) == 0x7f800000u;
		}
		for (uint64_t j = lo; bad && j < hi; j++) {
			float v;
			memcpy(&v, b + j * sizeof(float), sizeof(float));
			if (!isfinite(v))
				return j + 1;
		}
	}
	return 0;
}

const float *pti_aligned(const void *pay)
{
	return (uintptr_t)pay % _Alignof(float) == 0 ? pay : NULL;
}

void pti_shard_apply(ps_server *s, uint64_t off, const float *g,
    uint64_t n, double gdiv, double lr)
{
	if (s->shm_ctl != NULL && !s->shm_writing) {
		pti_shm_write_begin(s->shm_ctl);
		s->shm_writing = 1;
	}
	pti_optim_apply(&s->opt, s->params + off,
	    s->state1 ? s->state1 + off : NULL,
	    s->state2 ? s->state2 + off : NULL, g, n, gdiv, lr,
	    s->updates + 1);
}

// let_go drops the server's view of worker r's pages over [lo, hi) of
// the shard (pti_shard_let_go), the pages at either end whole: any page
// may map back in, so one let go early costs a fault, never a value.
static void let_go(ps_server *s, uint32_t r, uint64_t lo, uint64_t hi)
{
	const pti_shm_seg *g = &s->shm_of[r];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (r == 0 || g->p == NULL)
		return; // worker 0's stays mapped: the reads it saves
	// In bytes from the mapping's start (page-aligned; p is skip in).
	size_t a = (g->skip + (size_t)lo * sizeof(float)) / page * page;
	size_t b = g->skip + (size_t)hi * sizeof(float);
	size_t end = (g->bytes + page - 1) / page * page;
	b = (b + page - 1) / page * page;
	if (b > end)
		b = end;
	if (a < b)
		(void)madvise((char *)g->p - g->skip + a, b - a,
		    MADV_DONTNEED);
}

void pti_shard_let_go(ps_server *s, const uint8_t *use, uint32_t cur,
    uint64_t *from, uint64_t to, uint64_t hi)
{
	if (s->shm_of == NULL || s->job->workers <= PS_KEEP_WORKERS ||
	    (to - *from < PS_LET_GO && to < hi))
		return;
	for (uint32_t r = 0; r < s->job->workers; r++)
		if (r == cur || (use != NULL && use[r]))
			let_go(s, r, *from, to);
	*from = to;
}

int pti_shm_unchanged(ps_server *s, const uint8_t *use, uint32_t cur,
    uint64_t off, const float *g, size_t len)
{
	if (s->shm_of == NULL || pti_first_nonfinite(g, len) == 0)
		return 1;
	int named = 0;
	s->nonfinite++;
	for (uint32_t r = 0; r < s->job->workers; r++) {
		const float *x = s->shm_of[r].p;
		if ((r != cur && (use == NULL || !use[r])) || x == NULL ||
		    pti_first_nonfinite(x + off, len) == 0)
			continue;
		named = 1;
		if (pti_note_due(s->nonfinite))
			pti_log(PT_LOG_WARN, "server %u: worker %u's gradient "
			    "in shared memory at [%llu, +%zu) turned non-finite "
			    "after its checks; not applied there; %llu refused "
			    "so far", s->rank, r,
			    (unsigned long long)(s->lo + off), len,
			    (unsigned long long)s->nonfinite);
	}
	if (!named && pti_note_due(s->nonfinite))
		pti_log(PT_LOG_WARN, "server %u: the gradients' sum at [%llu, "
		    "+%zu) is not finite; not applied there", s->rank,
		    (unsigned long long)(s->lo + off), len);
	return 0;
}

void pti_fill_set(ps_take *t, nng_msg *m, float *pay, uint64_t off,
    uint64_t n, int64_t ver)
{
	t->fill.m = m;
	t->fill.pay = pay;
	t->fill.off = off;
	t->fill.n = n;
	t->fill.ver = ver;
}

int pti_min_clock(ps_server *s)
{
	int64_t min = INT64_MAX;
	for (uint32_t r = 0; r < s->job->workers; r++)
		if (!s->m[r].lost && s->m[r].clock < min)
			min = s->m[r].clock;
	if (min == INT64_MAX)
		return 0;
	s->min_clock = min;
	return 1;
}

// ---------------------------------------------------------------- bits

// bits_mask: the mask of bits [i, *e) in the word of bit i, where *e is
// the end of that word or hi, whichever comes first.
static uint64_t bits_mask(uint64_t i, uint64_t hi, uint64_t *e)
{
	uint64_t end = (i / 64 + 1) * 64;
	*e = end < hi ? end : hi;
	return (*e - i == 64 ? ~0ULL : ((1ULL << (*e - i)) - 1)) << (i % 64);
}

int pti_bits_any(const uint64_t *b, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo, e; i < hi; i = e)
		if (b[i / 64] & bits_mask(i, hi, &e))
			return 1;
	return 0;
}

int pti_bits_all(const uint64_t *b, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo, e; i < hi; i = e) {
		uint64_t m = bits_mask(i, hi, &e);
		if ((b[i / 64] & m) != m)
			return 0;
	}
	return 1;
}

void pti_bits_set(uint64_t *b, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo, e; i < hi; i = e)
		b[i / 64] |= bits_mask(i, hi, &e);
}

// Whole words are skipped at once.
int pti_bits_gap(const uint64_t *b, uint64_t from, uint64_t n,
    uint64_t *lo, uint64_t *hi)
{
	uint64_t i = from;
	while (i < n && (b[i / 64] >> (i % 64) & 1))
		i = i % 64 == 0 && b[i / 64] == ~0ULL ? i + 64 : i + 1;
	if (i >= n)
		return 0;
	*lo = i;
	while (i < n && !(b[i / 64] >> (i % 64) & 1))
		i = i % 64 == 0 && b[i / 64] == 0 ? i + 64 : i + 1;
	*hi = i < n ? i : n;
	return 1;
}

// ---------------------------------------------------------------- pieces

// A worker's gradient for a step may come in pieces (a program that
// pushes one variable at a time), in any order, each range once.

int pti_got_init(ps_got *g, const ps_server *s)
{
	uint32_t w = s->job->workers;
	memset(g, 0, sizeof(*g));
	g->words = (s->n + 63) / 64;
	g->bits = malloc((size_t)w * g->words * sizeof(uint64_t));
	g->step = calloc(w, sizeof(*g->step));
	g->n = calloc(w, sizeof(*g->n));
	if (g->bits == NULL || g->step == NULL || g->n == NULL)
		return pti_err_set(PT_ENOMEM, "server %u: marks of %u "
		    "workers' pieces", s->rank, w);
	return 0;
}

void pti_got_fini(ps_got *g)
{
	free(g->bits);
	free(g->step);
	free(g->n);
}

int pti_got_take(ps_got *g, const ps_server *s, uint32_t r, int64_t step,
    uint64_t off, uint64_t n)
{
	uint64_t *bits = g->bits + (size_t)r * g->words;
	if (g->step[r] != step) {
		g->step[r] = step;
		g->n[r] = 0;
	}
	if (g->n[r] == 0 && n == s->n) {
		g->n[r] = n; // the common case: the whole shard at once
		return 1;
	}
	if (g->n[r] == 0)
		memset(bits, 0, g->words * sizeof(uint64_t));
	if (g->n[r] == s->n || pti_bits_any(bits, off, off + n)) {
		pti_err_set(PT_ESTATE, "worker %u already pushed part of "
		    "[%llu, +%llu) for step %lld", r,
		    (unsigned long long)(s->lo + off), (unsigned long long)n,
		    (long long)step);
		return -1;
	}
	pti_bits_set(bits, off, off + n);
	g->n[r] += n;
	return g->n[r] == s->n;
}

int pti_got_covers(const ps_got *g, const ps_server *s, uint32_t r,
    int64_t step, uint64_t off, uint64_t n)
{
	if (g->step[r] != step || g->n[r] == 0)
		return 0;
	if (g->n[r] == s->n)
		return 1;
	return pti_bits_all(g->bits + (size_t)r * g->words, off, off + n);
}
