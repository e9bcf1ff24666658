// ps/rows.c - one server's rows of one embedding table (ps/rows.h).
#include "ps/rows.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/optim.h"
#include "common/rng.h"

#define ROWS_SAMPLE 16         // rows sampled to pick one to evict
#define ROWS_MAX_DIM 65536u
#define SKETCH_DEPTH 4         // count-min: hashes
#define SKETCH_WIDTH (1u << 16) // count-min: counters per hash
#define LFU_SHIFT 40 // LFU meta: touches above, the last touch below
#define LFU_CLOCK ((1ULL << LFU_SHIFT) - 1)
#define LFU_MAX (((1ULL << 24) - 1) << LFU_SHIFT)

// Salts that keep the hashes of one id apart: the index slot, the
// initial values and each row of the sketch (the server's: layout.c).
#define SALT_SLOT 0x736c6f74ULL
#define SALT_INIT 0x696e6974ULL
#define SALT_SKETCH 0x736b6368ULL

struct pti_rows {
	pti_rows_opts o;
	uint32_t stride; // floats per row: values, then each state vector
	uint64_t n, room; // rows, and rows the arrays hold
	uint64_t *ids;    // [k] row k's id
	float *vals;      // [k stride ...] row k's values and state
	uint64_t *t;      // [k] updates row k has had (Adam's count; staleness)
	uint64_t *meta;   // [k] last touch (LRU), or touches and last touch
			  // (LFU); NULL without a capacity
	uint32_t *slot;   // the index: row + 1, 0 empty
	uint64_t mask;    // slots - 1
	uint8_t *sketch;  // [SKETCH_DEPTH][SKETCH_WIDTH], admit > 1 only
	uint64_t clock;   // touches so far
	pti_rng rng;      // samples rows to evict
	uint64_t created, evictions, refusals;
};

static uint64_t slot_of(const pti_rows *r, uint64_t id)
{
	return pti_mix64(id ^ SALT_SLOT) & r->mask;
}

void pti_rows_init_values(const pti_rows_opts *o, uint64_t id, float *out)
{
	uint64_t key = pti_hash3(o->seed, SALT_INIT, o->table);
	for (uint32_t j = 0; j < o->dim; j++) {
		double u = pti_u64_to_unit(pti_hash3(key, id, j));
		out[j] = (float)((2.0 * u - 1.0) * o->bound);
	}
}

// GROW reallocs array a to n items; 0, or -1 (a untouched) when there
// is no memory. tmp is a void * of the caller's.
#define GROW(a, n, tmp) \
	(((tmp) = realloc((a), (n) * sizeof(*(a)))) != NULL ? ((a) = (tmp), 0) \
							    : -1)

// rows_grow makes room for at least `want` rows: the arrays by 1/8 more
// (a store stays within 1.3x of its rows' ids, values, state and update
// counts), the index doubled while it would be over 3/4 full. PT_ENOMEM leaves r's rows as they
// were (some arrays may be longer).
static int rows_grow(pti_rows *r, uint64_t want)
{
	if (want > r->room) {
		uint64_t room = r->room + r->room / 8;
		room = room < want ? want : room;
		if (room < 64)
			room = 64;
		if (r->o.capacity > 0 && room > r->o.capacity)
			room = r->o.capacity;
		void *tmp;
		if (GROW(r->ids, room, tmp) != 0 ||
		    GROW(r->vals, room * r->stride, tmp) != 0 ||
		    GROW(r->t, room, tmp) != 0 ||
		    (r->o.capacity > 0 && GROW(r->meta, room, tmp) != 0))
			return pti_err_set(PT_ENOMEM, "rows of table %llu",
			    (unsigned long long)r->o.table);
		r->room = room;
	}
	uint64_t slots = r->mask + 1;
	if (want * 4 <= slots * 3 && r->slot != NULL)
		return 0;
	while (want * 4 > slots * 3)
		slots *= 2;
	uint32_t *slot = calloc(slots, sizeof(*slot));
	if (slot == NULL || slots > UINT32_MAX) {
		free(slot);
		return pti_err_set(PT_ENOMEM, "index of table %llu",
		    (unsigned long long)r->o.table);
	}
	free(r->slot);
	r->slot = slot;
	r->mask = slots - 1;
	for (uint64_t k = 0; k < r->n; k++) {
		uint64_t i = slot_of(r, r->ids[k]);
		while (r->slot[i] != 0)
			i = (i + 1) & r->mask;
		r->slot[i] = (uint32_t)(k + 1);
	}
	return 0;
}

int pti_rows_new(pti_rows **out, const pti_rows_opts *o)
{
	*out = NULL;
	if (o->dim == 0 || o->dim > ROWS_MAX_DIM)
		return pti_err_set(PT_EINVAL, "table %llu: dim %u (1 to %u)",
		    (unsigned long long)o->table, o->dim, ROWS_MAX_DIM);
	if (o->n_state > 2)
		return pti_err_set(PT_EINVAL, "table %llu: %u state vectors "
		    "(at most 2)", (unsigned long long)o->table, o->n_state);
	if (o->capacity > 0 && o->evict != PTI_EVICT_LRU &&
	    o->evict != PTI_EVICT_LFU)
		return pti_err_set(PT_EINVAL, "table %llu: a capacity needs "
		    "LRU or LFU eviction", (unsigned long long)o->table);
	if (o->capacity >= UINT32_MAX / 2)
		return pti_err_set(PT_EINVAL, "table %llu: capacity %llu "
		    "(below 2^31)", (unsigned long long)o->table,
		    (unsigned long long)o->capacity);
	pti_rows *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return pti_err_set(PT_ENOMEM, "table %llu",
		    (unsigned long long)o->table);
	r->o = *o;
	r->stride = o->dim * (1 + o->n_state);
	r->mask = 63;
	pti_rng_seed(&r->rng, o->seed, pti_hash3(o->table, SALT_SLOT, 0));
	int rv = rows_grow(r, o->capacity > 0 ? o->capacity : 64);
	if (rv == 0 && o->admit > 1 &&
	    (r->sketch = calloc(SKETCH_DEPTH, SKETCH_WIDTH)) == NULL)
		rv = pti_err_set(PT_ENOMEM, "table %llu: admission sketch",
		    (unsigned long long)o->table);
	if (rv != 0) {
		pti_rows_free(r);
		return rv;
	}
	*out = r;
	return 0;
}

void pti_rows_free(pti_rows *r)
{
	if (r == NULL)
		return;
	free(r->ids);
	free(r->vals);
	free(r->t);
	free(r->meta);
	free(r->slot);
	free(r->sketch);
	free(r);
}

// rows_find returns id's row, or -1; *at is its slot, or the empty slot
// where it would go.
static int64_t rows_find(const pti_rows *r, uint64_t id, uint64_t *at)
{
	uint64_t i = slot_of(r, id);
	while (r->slot[i] != 0) {
		uint64_t k = r->slot[i] - 1;
		if (r->ids[k] == id) {
			*at = i;
			return (int64_t)k;
		}
		i = (i + 1) & r->mask;
	}
	*at = i;
	return -1;
}

uint64_t pti_rows_read(const pti_rows *r, uint64_t id, float *out)
{
	uint64_t at;
	int64_t k = rows_find(r, id, &at);
	if (k < 0) {
		pti_rows_init_values(&r->o, id, out);
		return 0;
	}
	memcpy(out, r->vals + (uint64_t)k * r->stride,
	    r->o.dim * sizeof(float));
	return r->t[k];
}

void pti_rows_prefetch(const pti_rows *r, uint64_t id, int stage)
{
	uint64_t i = slot_of(r, id);
	if (stage == 0) {
		__builtin_prefetch(&r->slot[i]);
		return;
	}
	uint64_t k = r->slot[i]; // the run's first row: usually id's
	if (k-- == 0)
		return;
	__builtin_prefetch(&r->ids[k]);
	__builtin_prefetch(&r->t[k]);
	__builtin_prefetch(r->vals + k * r->stride);
}

// rows_unslot empties slot i with a backward shift: each following entry
// of the run moves back into the hole unless its home slot lies after
// the hole (cyclically), so every id stays reachable from its home.
static void rows_unslot(pti_rows *r, uint64_t i)
{
	for (uint64_t j = (i + 1) & r->mask; r->slot[j] != 0;
	     j = (j + 1) & r->mask) {
		uint64_t home = slot_of(r, r->ids[r->slot[j] - 1]);
		// Move j's entry to i when its home is not in (i, j].
		int between = i <= j ? (home > i && home <= j)
				     : (home > i || home <= j);
		if (!between) {
			r->slot[i] = r->slot[j];
			i = j;
		}
	}
	r->slot[i] = 0;
}

// rows_evict removes the least recently (LRU) or least often (LFU)
// touched of ROWS_SAMPLE sampled rows; the last row takes its place.
static void rows_evict(pti_rows *r)
{
	uint64_t victim = pti_rng_below(&r->rng, (uint32_t)r->n);
	for (int s = 1; s < ROWS_SAMPLE; s++) {
		uint64_t k = pti_rng_below(&r->rng, (uint32_t)r->n);
		if (r->meta[k] < r->meta[victim] ||
		    (r->meta[k] == r->meta[victim] && k < victim))
			victim = k;
	}
	uint64_t at, last = r->n - 1;
	rows_find(r, r->ids[victim], &at);
	rows_unslot(r, at);
	if (victim != last) {
		rows_find(r, r->ids[last], &at);
		r->slot[at] = (uint32_t)(victim + 1);
		r->ids[victim] = r->ids[last];
		memcpy(r->vals + victim * r->stride, r->vals + last * r->stride,
		    r->stride * sizeof(float));
		r->t[victim] = r->t[last];
		r->meta[victim] = r->meta[last];
	}
	r->n--;
	r->evictions++;
}

// rows_admit counts a touch of id in the sketch (conservative update:
// only its smallest counters rise) and says whether id is now admitted.
static int rows_admit(pti_rows *r, uint64_t id)
{
	if (r->sketch == NULL)
		return 1;
	uint8_t *c[SKETCH_DEPTH], least = UINT8_MAX;
	for (int d = 0; d < SKETCH_DEPTH; d++) {
		uint64_t h = pti_hash3(SALT_SKETCH, (uint64_t)d, id);
		c[d] = r->sketch + (size_t)d * SKETCH_WIDTH +
		       (h & (SKETCH_WIDTH - 1));
		least = *c[d] < least ? *c[d] : least;
	}
	for (int d = 0; d < SKETCH_DEPTH; d++)
		if (*c[d] == least && least < UINT8_MAX)
			(*c[d])++;
	return (uint32_t)least + 1 >= r->o.admit;
}

static void rows_fill(pti_rows *r, uint64_t k, pti_row *row)
{
	float *v = r->vals + k * r->stride;
	row->v = v;
	row->s1 = r->o.n_state > 0 ? v + r->o.dim : NULL;
	row->s2 = r->o.n_state > 1 ? v + 2 * (uint64_t)r->o.dim : NULL;
	row->t = &r->t[k];
}

int pti_rows_touch(pti_rows *r, uint64_t id, pti_row *row)
{
	uint64_t at;
	int64_t k = rows_find(r, id, &at);
	r->clock++;
	if (k < 0) {
		if (!rows_admit(r, id)) {
			r->refusals++;
			return PTI_ROWS_REFUSED;
		}
		if (r->o.capacity > 0 && r->n == r->o.capacity)
			rows_evict(r);
		int rv = rows_grow(r, r->n + 1);
		if (rv != 0)
			return rv;
		rows_find(r, id, &at); // the slots may have moved
		k = (int64_t)r->n++;
		r->slot[at] = (uint32_t)(k + 1);
		r->ids[k] = id;
		float *v = r->vals + (uint64_t)k * r->stride;
		pti_rows_init_values(&r->o, id, v);
		memset(v + r->o.dim, 0,
		    (size_t)(r->stride - r->o.dim) * sizeof(float));
		r->t[k] = 0;
		if (r->meta != NULL)
			r->meta[k] = 0;
		r->created++;
	}
	// LRU: the last touch. LFU: the touches (saturating), then the last
	// touch, so that of rows touched as often the older goes first.
	if (r->meta != NULL)
		r->meta[k] = r->o.evict == PTI_EVICT_LRU ? r->clock :
			     (((r->meta[k] >> LFU_SHIFT) + (r->meta[k] <
			     LFU_MAX)) << LFU_SHIFT) | (r->clock & LFU_CLOCK);
	rows_fill(r, (uint64_t)k, row);
	return 0;
}

int pti_rows_apply(pti_rows *r, const pti_optim *o, uint64_t id,
    const float *g, double gdiv, double lr, uint64_t *before)
{
	pti_row row;
	if (before != NULL)
		*before = 0;
	if ((uint32_t)o->n_state != r->o.n_state)
		return pti_err_set(PT_EINVAL, "table %llu: the optimizer keeps "
		    "%d state vectors, the rows %u",
		    (unsigned long long)r->o.table, o->n_state, r->o.n_state);
	int rv = pti_rows_touch(r, id, &row);
	if (rv != 0)
		return rv;
	if (before != NULL)
		*before = *row.t;
	pti_optim_apply(o, row.v, row.s1, row.s2, g, r->o.dim, gdiv, lr,
	    ++*row.t);
	return 0;
}

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void rows_sort(uint64_t *ids, uint64_t n)
{
	qsort(ids, n, sizeof(*ids), id_cmp);
}

void pti_rows_ids(const pti_rows *r, uint64_t *ids)
{
	memcpy(ids, r->ids, r->n * sizeof(*ids));
	rows_sort(ids, r->n);
}

// A store's bytes (pti_rows_dump): its counters, then its arrays.
typedef struct dump_head {
	uint64_t n, clock, created, evictions, refusals, rng;
	uint32_t meta, sketch; // whether those arrays follow
} dump_head;

int pti_rows_dump(const pti_rows *r, void **out, uint64_t *len)
{
	dump_head h = {r->n, r->clock, r->created, r->evictions, r->refusals,
	    r->rng.s, r->meta != NULL, r->sketch != NULL};
	uint64_t vals = r->n * r->stride * sizeof(float);
	uint64_t size = sizeof(h) + r->n * 8 * (2 + h.meta) + vals +
			(h.sketch ? (uint64_t)SKETCH_DEPTH * SKETCH_WIDTH : 0);
	uint8_t *b = malloc(size), *p = b;
	if (b == NULL)
		return pti_err_set(PT_ENOMEM, "a dump of table %llu",
		    (unsigned long long)r->o.table);
#define PUT(src, n) (memcpy(p, (src), (n)), p += (n))
	PUT(&h, sizeof(h));
	PUT(r->ids, r->n * 8);
	PUT(r->t, r->n * 8);
	if (h.meta)
		PUT(r->meta, r->n * 8);
	PUT(r->vals, vals);
	if (h.sketch)
		PUT(r->sketch, (size_t)SKETCH_DEPTH * SKETCH_WIDTH);
#undef PUT
	*out = b;
	*len = size;
	return 0;
}

int pti_rows_undump(pti_rows *r, const void *buf, uint64_t len)
{
	dump_head h;
	const uint8_t *p = buf;
	if (r->n != 0)
		return pti_err_set(PT_EINVAL, "table %llu: undump into a store "
		    "that has rows", (unsigned long long)r->o.table);
	if (len < sizeof(h))
		return pti_err_set(PT_ECORRUPT, "table %llu: a dump of %llu "
		    "bytes", (unsigned long long)r->o.table,
		    (unsigned long long)len);
	memcpy(&h, p, sizeof(h));
	p += sizeof(h);
	uint64_t vals = h.n * r->stride * sizeof(float);
	if (h.meta != (r->meta != NULL) || h.sketch != (r->sketch != NULL) ||
	    h.n > (1ULL << 31) || (r->o.capacity > 0 && h.n > r->o.capacity) ||
	    len != sizeof(h) + h.n * 8 * (2 + h.meta) + vals +
		       (h.sketch ? (uint64_t)SKETCH_DEPTH * SKETCH_WIDTH : 0))
		return pti_err_set(PT_ECORRUPT, "table %llu: a dump of %llu "
		    "rows does not fit this table's dim, capacity or "
		    "admission", (unsigned long long)r->o.table,
		    (unsigned long long)h.n);
	int rv = rows_grow(r, h.n);
	if (rv != 0)
		return rv;
#define GET(dst, n) (memcpy((dst), p, (n)), p += (n))
	GET(r->ids, h.n * 8);
	GET(r->t, h.n * 8);
	if (h.meta)
		GET(r->meta, h.n * 8);
	GET(r->vals, vals);
	if (h.sketch)
		GET(r->sketch, (size_t)SKETCH_DEPTH * SKETCH_WIDTH);
#undef GET
	r->n = h.n;
	r->clock = h.clock;
	r->created = h.created;
	r->evictions = h.evictions;
	r->refusals = h.refusals;
	r->rng.s = h.rng;
	// The index, again: each row where a lookup finds it.
	memset(r->slot, 0, (r->mask + 1) * sizeof(*r->slot));
	for (uint64_t k = 0; k < r->n; k++) {
		uint64_t at;
		if (rows_find(r, r->ids[k], &at) >= 0)
			return pti_err_set(PT_ECORRUPT, "table %llu: row %llu "
			    "twice in a dump", (unsigned long long)r->o.table,
			    (unsigned long long)r->ids[k]);
		r->slot[at] = (uint32_t)(k + 1);
	}
	return 0;
}

void pti_rows_stats_of(const pti_rows *r, pti_rows_stats *s)
{
	s->rows = r->n;
	s->created = r->created;
	s->evictions = r->evictions;
	s->refusals = r->refusals;
	s->bytes = sizeof(*r) + r->room * (sizeof(uint64_t) +
	    r->stride * sizeof(float) + sizeof(uint64_t) +
	    (r->meta != NULL ? sizeof(uint64_t) : 0)) +
	    (r->mask + 1) * sizeof(uint32_t) +
	    (r->sketch != NULL ? (uint64_t)SKETCH_DEPTH * SKETCH_WIDTH : 0);
}
