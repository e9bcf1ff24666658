// tests/rows_test.c - a server's rows of an embedding table (ps/rows.h):
// initial values that depend only on (seed, table, id), an index that
// finds every row through growth and evictions, LRU and LFU eviction,
// the admission threshold, ids in order, memory within 1.3x of the rows'
// bytes, ids spread over servers, and each row's optimizer state moving
// only when that row is updated.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/layout.h"
#include "common/optim.h"
#include "common/rng.h"
#include "ps/rows.h"
#include "tests/test.h"

static pti_rows_opts opts(uint32_t dim, uint32_t n_state)
{
	pti_rows_opts o;
	memset(&o, 0, sizeof(o));
	o.dim = dim;
	o.n_state = n_state;
	o.seed = 7;
	o.table = 1;
	o.bound = 0.5f;
	return o;
}

// touch_mark writes id into a row's first value, so a lookup shows whose row
// it found.
static void touch_mark(pti_rows *r, uint64_t id)
{
	pti_row row;
	PT_TEST_TRUE(pti_rows_touch(r, id, &row) == 0);
	row.v[0] = (float)id;
}

// holds says whether id's row carries its mark.
static int holds(const pti_rows *r, uint64_t id, uint32_t dim)
{
	float v[64];
	PT_TEST_TRUE(dim <= 64);
	pti_rows_read(r, id, v);
	return v[0] == (float)id;
}

static void test_rows_init_depends_on_id_only(void)
{
	// Two stores fed the same ids in opposite orders hold the same
	// values; a row read before any touch reads the same; another table
	// or seed starts elsewhere; values lie within the bound.
	pti_rows_opts o = opts(8, 1);
	pti_rows *a, *b;
	PT_TEST_OK(pti_rows_new(&a, &o));
	PT_TEST_OK(pti_rows_new(&b, &o));
	float before[8], va[8], vb[8], other[8];
	pti_rows_read(a, 123456789, before);
	for (uint64_t i = 0; i < 1000; i++) {
		pti_row ra, rb;
		PT_TEST_TRUE(pti_rows_touch(a, i * 7919, &ra) == 0);
		PT_TEST_TRUE(pti_rows_touch(b, (999 - i) * 7919, &rb) == 0);
		for (uint32_t j = 0; j < 8; j++)
			PT_TEST_TRUE(ra.s1[j] == 0); // state starts at 0
		PT_TEST_TRUE(ra.s2 == NULL && ra.t != NULL && *ra.t == 0);
	}
	PT_TEST_TRUE(pti_rows_touch(a, 123456789, &(pti_row){0}) == 0);
	for (uint64_t i = 0; i < 1000; i++) {
		pti_rows_read(a, i * 7919, va);
		pti_rows_read(b, i * 7919, vb);
		PT_TEST_TRUE(memcmp(va, vb, sizeof(va)) == 0);
		for (uint32_t j = 0; j < 8; j++)
			PT_TEST_TRUE(fabsf(va[j]) <= 0.5f);
	}
	pti_rows_read(a, 123456789, va);
	PT_TEST_TRUE(memcmp(va, before, sizeof(va)) == 0);
	o.table = 2;
	pti_rows_init_values(&o, 123456789, other);
	PT_TEST_TRUE(memcmp(other, before, sizeof(other)) != 0);
	o.table = 1;
	o.seed = 8;
	pti_rows_init_values(&o, 123456789, other);
	PT_TEST_TRUE(memcmp(other, before, sizeof(other)) != 0);
	pti_rows_free(a);
	pti_rows_free(b);
}

static void test_rows_find_every_row(void)
{
	// 100k rows through many growths of the arrays and the index; each
	// keeps its own values and state, ids come out ascending.
	pti_rows_opts o = opts(4, 2);
	pti_rows *r;
	PT_TEST_OK(pti_rows_new(&r, &o));
	uint64_t n = 100000;
	for (uint64_t i = 0; i < n; i++) {
		pti_row row;
		uint64_t id = pti_mix64(i);
		PT_TEST_TRUE(pti_rows_touch(r, id, &row) == 0);
		row.v[0] = (float)(i % 65536);
		row.s2[3] = 1.0f;
		(*row.t)++;
	}
	pti_rows_stats s;
	pti_rows_stats_of(r, &s);
	PT_TEST_TRUE(s.rows == n && s.created == n && s.evictions == 0);
	for (uint64_t i = 0; i < n; i++) {
		pti_row row;
		PT_TEST_TRUE(pti_rows_touch(r, pti_mix64(i), &row) == 0);
		PT_TEST_TRUE(row.v[0] == (float)(i % 65536));
		PT_TEST_TRUE(row.s2[3] == 1.0f && *row.t == 1);
	}
	pti_rows_stats_of(r, &s);
	PT_TEST_TRUE(s.rows == n && s.created == n);
	uint64_t *ids = malloc(n * sizeof(*ids));
	pti_rows_ids(r, ids);
	for (uint64_t i = 1; i < n; i++)
		PT_TEST_TRUE(ids[i - 1] < ids[i]);
	free(ids);
	pti_rows_free(r);
}

// evict_run fills a store of capacity 100 with ids 0..99, touches the
// hot half (0..49) 5 more times each, then adds ids 100..149; counts how
// many of the hot half, the cold half (50..99) and the new ids are still
// rows. Every row left is found with its own values.
static void evict_run(int how, int kept[3], pti_rows_stats *s)
{
	pti_rows_opts o = opts(2, 0);
	o.capacity = 100;
	o.evict = how;
	pti_rows *r;
	PT_TEST_OK(pti_rows_new(&r, &o));
	for (uint64_t id = 0; id < 100; id++)
		touch_mark(r, id);
	for (int k = 0; k < 5; k++)
		for (uint64_t id = 0; id < 50; id++)
			touch_mark(r, id);
	for (uint64_t id = 100; id < 150; id++)
		touch_mark(r, id);
	pti_rows_stats_of(r, s);
	uint64_t ids[100];
	PT_TEST_TRUE(s->rows == 100);
	pti_rows_ids(r, ids);
	kept[0] = kept[1] = kept[2] = 0;
	for (int i = 0; i < 100; i++) {
		PT_TEST_TRUE(holds(r, ids[i], 2));
		kept[ids[i] < 50 ? 0 : ids[i] < 100 ? 1 : 2]++;
	}
	pti_rows_free(r);
}

static void test_rows_evict(void)
{
	// Eviction samples 16 rows, so it is approximate: most of the hot
	// half and of the new rows stay, most of the cold half goes.
	int kept[3];
	pti_rows_stats s;
	for (int how = PTI_EVICT_LRU; how <= PTI_EVICT_LFU; how++) {
		evict_run(how, kept, &s);
		fprintf(stderr, "  %s: kept %d of 50 hot, %d of 50 cold, %d of "
		    "50 new rows\n", how == PTI_EVICT_LRU ? "LRU" : "LFU",
		    kept[0], kept[1], kept[2]);
		PT_TEST_TRUE(s.evictions == 50 && s.created == 150);
		PT_TEST_TRUE(kept[0] >= 40 && kept[1] <= 10 && kept[2] >= 40);
	}
	// Many evictions through long probe runs: every listed row is found
	// with its mark, and no id that is not a row is (the index holds no
	// stale entry).
	pti_rows_opts o = opts(2, 0);
	pti_rows *r;
	o.capacity = 1000;
	o.evict = PTI_EVICT_LRU;
	PT_TEST_OK(pti_rows_new(&r, &o));
	for (uint64_t i = 0; i < 50000; i++)
		touch_mark(r, 1 + pti_mix64(i) % 5000);
	static uint64_t ids[1000];
	static unsigned char row[5001];
	pti_rows_stats_of(r, &s);
	PT_TEST_TRUE(s.rows == 1000 && s.evictions == s.created - 1000);
	pti_rows_ids(r, ids);
	for (int i = 0; i < 1000; i++) {
		PT_TEST_TRUE(holds(r, ids[i], 2));
		row[ids[i]] = 1;
	}
	for (uint64_t id = 1; id <= 5000; id++)
		if (!row[id])
			PT_TEST_TRUE(!holds(r, id, 2));
	pti_rows_free(r);
	// Without a capacity nothing is evicted.
	o = opts(2, 0);
	PT_TEST_OK(pti_rows_new(&r, &o));
	for (uint64_t id = 0; id < 1000; id++)
		touch_mark(r, id);
	pti_rows_stats_of(r, &s);
	PT_TEST_TRUE(s.rows == 1000 && s.evictions == 0);
	pti_rows_free(r);
}

static void test_rows_admission(void)
{
	// With admit 3 an id becomes a row at its third touch; before, it
	// is refused (counted) and reads as its initial values.
	pti_rows_opts o = opts(4, 0);
	o.admit = 3;
	pti_rows *r;
	pti_row row;
	float init[4], v[4];
	PT_TEST_OK(pti_rows_new(&r, &o));
	pti_rows_init_values(&o, 42, init);
	PT_TEST_TRUE(pti_rows_touch(r, 42, &row) == PTI_ROWS_REFUSED);
	PT_TEST_TRUE(pti_rows_touch(r, 42, &row) == PTI_ROWS_REFUSED);
	pti_rows_read(r, 42, v);
	PT_TEST_TRUE(memcmp(v, init, sizeof(v)) == 0);
	PT_TEST_TRUE(pti_rows_touch(r, 42, &row) == 0);
	PT_TEST_TRUE(memcmp(row.v, init, sizeof(v)) == 0);
	row.v[0] = 9;
	PT_TEST_TRUE(pti_rows_touch(r, 42, &row) == 0 && row.v[0] == 9);
	pti_rows_stats s;
	pti_rows_stats_of(r, &s);
	PT_TEST_TRUE(s.rows == 1 && s.refusals == 2 && s.created == 1);
	pti_rows_free(r);
}

static void test_rows_memory(void)
{
	// Growing one row at a time, a store never holds more than 1.3x
	// its rows' ids, values and state (the optimizer's vectors and the
	// row's update count), index included.
	uint32_t dims[] = {16, 64};
	for (int d = 0; d < 2; d++)
		for (uint32_t st = 0; st <= 2; st++) {
			pti_rows_opts o = opts(dims[d], st);
			pti_rows *r;
			PT_TEST_OK(pti_rows_new(&r, &o));
			double worst = 0;
			for (uint64_t id = 0; id < 300000; id++) {
				pti_row row;
				PT_TEST_TRUE(pti_rows_touch(r, id, &row) == 0);
				if (id < 10000 || id % 997 != 0)
					continue;
				pti_rows_stats s;
				pti_rows_stats_of(r, &s);
				double need = (double)s.rows * (8.0 + 8.0 +
				    4.0 * dims[d] * (1 + st));
				worst = fmax(worst, s.bytes / need);
			}
			fprintf(stderr, "  dim %u, %u state: at most %.3fx\n",
			    dims[d], st, worst);
			PT_TEST_TRUE(worst <= 1.3);
			pti_rows_free(r);
		}
}

static void test_rows_servers(void)
{
	// Ids spread evenly over servers, the same each time.
	uint32_t count[4] = {0};
	for (uint64_t id = 0; id < 40000; id++) {
		uint32_t s = pti_layout_row_server(id, 4);
		PT_TEST_TRUE(s < 4 && s == pti_layout_row_server(id, 4));
		count[s]++;
	}
	for (int s = 0; s < 4; s++)
		PT_TEST_TRUE(count[s] > 9500 && count[s] < 10500);
	PT_TEST_TRUE(pti_layout_row_server(12345, 1) == 0);
}

static void test_rows_lazy_optimizer(void)
{
	// Adam on rows: row 1 updated three times, row 2 once. Each row's
	// own count drives its bias correction, so row 2 after one update
	// equals one Adam step from its initial values, whatever row 1 did;
	// an id below the admission threshold takes no update.
	pti_optim adam, sgd;
	PT_TEST_OK(pti_optim_parse(&adam, "adam"));
	PT_TEST_OK(pti_optim_parse(&sgd, "sgd"));
	pti_rows_opts o = opts(4, 2);
	o.admit = 2;
	pti_rows *r;
	PT_TEST_OK(pti_rows_new(&r, &o));
	float g[4] = {0.5f, -1, 2, 0}, want[4], m[4] = {0}, v[4] = {0};
	PT_TEST_ERR(pti_rows_apply(r, &sgd, 1, g, 1, 0.1, NULL), PT_EINVAL);
	PT_TEST_TRUE(pti_rows_apply(r, &adam, 1, g, 1, 0.01, NULL) ==
	    PTI_ROWS_REFUSED);
	uint64_t before = 9;
	for (uint64_t k = 0; k < 3; k++) { // the count each update found
		PT_TEST_OK(pti_rows_apply(r, &adam, 1, g, 1, 0.01, &before));
		PT_TEST_TRUE(before == k);
	}
	before = 9;
	PT_TEST_TRUE(pti_rows_apply(r, &adam, 2, g, 1, 0.01, &before) ==
	    PTI_ROWS_REFUSED);
	PT_TEST_TRUE(before == 0);
	PT_TEST_OK(pti_rows_apply(r, &adam, 2, g, 2, 0.01, NULL));
	pti_row row;
	PT_TEST_OK(pti_rows_touch(r, 1, &row));
	PT_TEST_TRUE(*row.t == 3);
	PT_TEST_OK(pti_rows_touch(r, 2, &row));
	PT_TEST_TRUE(*row.t == 1);
	pti_rows_init_values(&o, 2, want);
	pti_optim_apply(&adam, want, m, v, g, 4, 2, 0.01, 1);
	PT_TEST_TRUE(memcmp(row.v, want, sizeof(want)) == 0);
	PT_TEST_TRUE(memcmp(row.s1, m, sizeof(m)) == 0);
	pti_rows_free(r);
	// SGD keeps no state: the row moves by lr times the mean gradient.
	pti_rows_opts p = opts(4, 0);
	PT_TEST_OK(pti_rows_new(&r, &p));
	PT_TEST_OK(pti_rows_apply(r, &sgd, 9, g, 2, 0.1, NULL));
	pti_rows_init_values(&p, 9, want);
	float got[4];
	pti_rows_read(r, 9, got);
	for (int j = 0; j < 4; j++)
		PT_TEST_TRUE(got[j] == want[j] - (float)(0.1 / 2) * g[j]);
	pti_rows_free(r);
}

static void test_rows_bad_options(void)
{
	pti_rows *r;
	pti_rows_opts o = opts(0, 0);
	PT_TEST_ERR(pti_rows_new(&r, &o), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "dim 0");
	o = opts(4, 3);
	PT_TEST_ERR(pti_rows_new(&r, &o), PT_EINVAL);
	o = opts(4, 0);
	o.capacity = 10;
	PT_TEST_ERR(pti_rows_new(&r, &o), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "LRU or LFU");
	PT_TEST_TRUE(r == NULL);
}

// A dump restores a store whose future is the same: after it, the same
// updates evict, admit and move the same rows as in the store it came
// from.
static void test_rows_dump(void)
{
	pti_rows_opts o = opts(4, 1);
	o.capacity = 50;
	o.evict = PTI_EVICT_LFU;
	o.admit = 2;
	pti_optim ada = {.kind = PT_OPT_ADAGRAD, .n_state = 1};
	pti_rows *a, *b;
	float g[4] = {1, -1, 0.5f, 2}, va[4], vb[4];
	PT_TEST_OK(pti_rows_new(&a, &o));
	PT_TEST_OK(pti_rows_new(&b, &o));
	pti_rng r;
	pti_rng_seed(&r, 9, 1);
	for (int i = 0; i < 400; i++)
		PT_TEST_TRUE(pti_rows_apply(a, &ada, pti_rng_below(&r, 120), g,
				 1, 0.1, NULL) <= 0);
	void *blob;
	uint64_t len;
	PT_TEST_OK(pti_rows_dump(a, &blob, &len));
	PT_TEST_ERR(pti_rows_undump(b, blob, len - 1), PT_ECORRUPT);
	PT_TEST_OK(pti_rows_undump(b, blob, len));
	PT_TEST_ERR(pti_rows_undump(b, blob, len), PT_EINVAL);
	free(blob);
	for (int i = 0; i < 400; i++) {
		uint64_t id = pti_rng_below(&r, 120);
		int ra = pti_rows_apply(a, &ada, id, g, 1, 0.1, NULL);
		PT_TEST_TRUE(ra == pti_rows_apply(b, &ada, id, g, 1, 0.1, NULL));
	}
	for (uint64_t id = 0; id < 120; id++) {
		PT_TEST_TRUE(pti_rows_read(a, id, va) == pti_rows_read(b, id, vb));
		PT_TEST_TRUE(memcmp(va, vb, sizeof(va)) == 0);
	}
	pti_rows_stats sa, sb;
	pti_rows_stats_of(a, &sa);
	pti_rows_stats_of(b, &sb);
	PT_TEST_TRUE(sa.rows == sb.rows && sa.evictions == sb.evictions &&
		     sa.refusals == sb.refusals && sa.created == sb.created &&
		     sa.evictions > 0 && sa.refusals > 0);
	pti_rows_free(a);
	pti_rows_free(b);
}

static const pti_test_case cases[] = {
    {"test_rows_init_depends_on_id_only", test_rows_init_depends_on_id_only},
    {"test_rows_find_every_row", test_rows_find_every_row},
    {"test_rows_evict", test_rows_evict},
    {"test_rows_admission", test_rows_admission},
    {"test_rows_memory", test_rows_memory},
    {"test_rows_servers", test_rows_servers},
    {"test_rows_lazy_optimizer", test_rows_lazy_optimizer},
    {"test_rows_bad_options", test_rows_bad_options},
    {"test_rows_dump", test_rows_dump},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
