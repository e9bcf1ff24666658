// tests/checkpoint_test.c - shard checkpoints on the real file system:
// what is saved comes back bit for bit (values, optimizer state, the
// workers' clocks), a damaged or mismatched file is refused naming the
// file and the reason, and old files and leftovers are cleaned up; files
// are their owner's only, and a failed write removes nothing.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checkpoint.h"
#include "common/config.h"
#include "common/err.h"
#include "tests/test.h"

#define N 37 // floats in the shard
#define W 3  // workers

static pti_ckpt_meta ckpt_meta(int64_t version)
{
	pti_ckpt_meta m = {1, 2, 0xabcdef12345ULL, 100, 100 + N, version, 41,
	    5, 2, W, NULL, 0};
	return m;
}

static void fill(float *v, int seed)
{
	for (int i = 0; i < N; i++)
		v[i] = (float)(seed * 1000 + i) / 7.0f;
}

static void test_checkpoint_round_trip(void)
{
	char dir[256], path[512];
	float a[N], b[N], c[N], ra[N], rb[N], rc[N];
	int64_t clocks[W] = {12, 9, 14}, got_clocks[W] = {0};
	PT_TEST_OK(pti_test_tmpdir(dir, sizeof(dir), "pt-ckpt"));
	fill(a, 1), fill(b, 2), fill(c, 3);
	pti_ckpt_meta m = ckpt_meta(30), got;
	const float *vecs[3] = {a, b, c};
	float *out[3] = {ra, rb, rc};
	PT_TEST_OK(pti_ckpt_save(dir, &m, clocks, vecs));
	pti_ckpt_path(path, sizeof(path), dir, 1, 30);
	PT_TEST_OK(pti_ckpt_load(path, &m, got_clocks, out, &got));
	PT_TEST_TRUE(memcmp(a, ra, sizeof(a)) == 0);
	PT_TEST_TRUE(memcmp(b, rb, sizeof(b)) == 0);
	PT_TEST_TRUE(memcmp(c, rc, sizeof(c)) == 0);
	PT_TEST_TRUE(memcmp(clocks, got_clocks, sizeof(clocks)) == 0);
	PT_TEST_TRUE(got.version == 30 && got.updates == 41 &&
	    got.n_workers == W);
	// Another worker count: the values load, the clocks are left alone.
	pti_ckpt_meta other = m;
	int64_t untouched[W + 1] = {-1, -1, -1, -1};
	other.n_workers = W + 1;
	PT_TEST_OK(pti_ckpt_load(path, &other, untouched, out, &got));
	PT_TEST_TRUE(got.n_workers == W && untouched[0] == -1);
	PT_TEST_TRUE(got.extra == NULL && got.extra_len == 0);
	unlink(path);
	// The tables' bytes come back as written, in the checksum: one
	// byte short is refused.
	char tables[] = "rows of the tables";
	m.extra = tables;
	m.extra_len = sizeof(tables);
	PT_TEST_OK(pti_ckpt_save(dir, &m, clocks, vecs));
	PT_TEST_OK(pti_ckpt_load(path, &m, NULL, out, &got));
	PT_TEST_TRUE(got.extra_len == sizeof(tables) &&
		     memcmp(got.extra, tables, sizeof(tables)) == 0);
	free(got.extra);
	struct stat st;
	PT_TEST_OK(stat(path, &st));
	PT_TEST_OK(truncate(path, st.st_size - 5));
	PT_TEST_ERR(pti_ckpt_load(path, &m, NULL, out, &got), PT_ECORRUPT);
	unlink(path);
	rmdir(dir);
}

static void test_checkpoint_refusals(void)
{
	char dir[256], path[512];
	float a[N], b[N], c[N];
	int64_t clocks[W] = {1, 2, 3};
	PT_TEST_OK(pti_test_tmpdir(dir, sizeof(dir), "pt-ckpt"));
	fill(a, 1), fill(b, 2), fill(c, 3);
	pti_ckpt_meta m = ckpt_meta(10);
	const float *vecs[3] = {a, b, c};
	float *out[3] = {a, b, c};
	PT_TEST_OK(pti_ckpt_save(dir, &m, clocks, vecs));
	pti_ckpt_path(path, sizeof(path), dir, 1, 10);

	pti_ckpt_meta want = m;
	want.n_servers = 3;
	PT_TEST_ERR(pti_ckpt_load(path, &want, NULL, out, NULL), PT_ECORRUPT);
	PT_TEST_STR_HAS(pt_errmsg(PT_ECORRUPT), "written by server 1 of 2");
	want = m;
	want.layout_hash++;
	PT_TEST_ERR(pti_ckpt_load(path, &want, NULL, out, NULL), PT_ECORRUPT);
	PT_TEST_STR_HAS(pt_errmsg(PT_ECORRUPT), "another model");

	// One flipped byte in the values: the checksum says so.
	FILE *f = fopen(path, "r+b");
	PT_TEST_TRUE(f != NULL);
	fseek(f, -40, SEEK_END);
	int ch = fgetc(f);
	fseek(f, -40, SEEK_END);
	fputc(ch ^ 0x10, f);
	fclose(f);
	PT_TEST_ERR(pti_ckpt_load(path, &m, NULL, out, NULL), PT_ECORRUPT);
	PT_TEST_STR_HAS(pt_errmsg(PT_ECORRUPT), "checksum mismatch");
	PT_TEST_STR_HAS(pt_errmsg(PT_ECORRUPT), path);

	PT_TEST_TRUE(truncate(path, 90) == 0);
	PT_TEST_ERR(pti_ckpt_load(path, &m, NULL, out, NULL), PT_ECORRUPT);
	PT_TEST_STR_HAS(pt_errmsg(PT_ECORRUPT), "truncated");
	unlink(path);
	pti_ckpt_path(path, sizeof(path), dir, 1, 99);
	PT_TEST_ERR(pti_ckpt_load(path, &m, NULL, out, NULL), PT_ENOENT);
	rmdir(dir);
}

static void test_checkpoint_keeps_two_and_clears_leftovers(void)
{
	// A writer killed mid-file leaves a .tmp; the next save removes it,
	// and only the newest two checkpoints of the rank stay.
	char dir[256], path[512], tmp[600];
	float a[N], b[N], c[N];
	int64_t clocks[W] = {0};
	PT_TEST_OK(pti_test_tmpdir(dir, sizeof(dir), "pt-ckpt"));
	fill(a, 1), fill(b, 2), fill(c, 3);
	const float *vecs[3] = {a, b, c};
	pti_ckpt_path(path, sizeof(path), dir, 1, 25);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	PT_TEST_TRUE(f != NULL);
	fputs("half a checkpoint", f);
	fclose(f);
	for (int64_t v = 10; v <= 40; v += 10) {
		pti_ckpt_meta m = ckpt_meta(v);
		PT_TEST_OK(pti_ckpt_save(dir, &m, clocks, vecs));
	}
	PT_TEST_TRUE(access(tmp, F_OK) != 0);
	for (int64_t v = 10; v <= 40; v += 10) {
		pti_ckpt_path(path, sizeof(path), dir, 1, v);
		PT_TEST_TRUE((access(path, F_OK) == 0) == (v >= 30));
		unlink(path);
	}
	rmdir(dir);
}

static void test_checkpoint_owner_only(void)
{
	// 0600 whatever the umask, and also when a killed writer's
	// temporary file of the same version, readable by all, is there.
	char dir[256], path[512], tmp[600];
	float a[N], b[N], c[N];
	int64_t clocks[W] = {0};
	struct stat sb;
	PT_TEST_OK(pti_test_tmpdir(dir, sizeof(dir), "pt-ckpt"));
	fill(a, 1), fill(b, 2), fill(c, 3);
	const float *vecs[3] = {a, b, c};
	pti_ckpt_meta m = ckpt_meta(10);
	pti_ckpt_path(path, sizeof(path), dir, 1, 10);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	mode_t old = umask(0);
	FILE *f = fopen(tmp, "wb");
	PT_TEST_TRUE(f != NULL && chmod(tmp, 0644) == 0);
	fclose(f);
	PT_TEST_OK(pti_ckpt_save(dir, &m, clocks, vecs));
	umask(old);
	PT_TEST_TRUE(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	unlink(path);
	rmdir(dir);
}

static void test_checkpoint_failed_write_keeps_older(void)
{
	// A checkpoint that cannot be written (a folder stands where its
	// temporary file, then where the file itself, would go; that stops
	// root too) fails naming the file and the reason, and removes
	// nothing. The next good one prunes by complete checkpoints only:
	// neither the folder nor a leftover .tmp of a higher version counts
	// as a newer checkpoint.
	char dir[256], path[512], tmp[600];
	float a[N], b[N], c[N];
	int64_t clocks[W] = {0};
	PT_TEST_OK(pti_test_tmpdir(dir, sizeof(dir), "pt-ckpt"));
	fill(a, 1), fill(b, 2), fill(c, 3);
	const float *vecs[3] = {a, b, c};
	for (int64_t v = 10; v <= 20; v += 10) {
		pti_ckpt_meta m = ckpt_meta(v);
		PT_TEST_OK(pti_ckpt_save(dir, &m, clocks, vecs));
	}
	pti_ckpt_meta m30 = ckpt_meta(30), m40 = ckpt_meta(40);
	pti_ckpt_path(path, sizeof(path), dir, 1, 30);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	PT_TEST_TRUE(mkdir(tmp, 0700) == 0);
	PT_TEST_ERR(pti_ckpt_save(dir, &m30, clocks, vecs), PT_EIO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EIO), tmp);
	PT_TEST_STR_HAS(pt_errmsg(PT_EIO), "Is a directory");
	rmdir(tmp);
	pti_ckpt_path(path, sizeof(path), dir, 1, 40);
	PT_TEST_TRUE(mkdir(path, 0700) == 0);
	PT_TEST_ERR(pti_ckpt_save(dir, &m40, clocks, vecs), PT_EIO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EIO), path);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	PT_TEST_TRUE(access(tmp, F_OK) != 0); // its temporary file is gone
	for (int64_t v = 10; v <= 20; v += 10) {
		pti_ckpt_path(path, sizeof(path), dir, 1, v);
		PT_TEST_TRUE(access(path, F_OK) == 0);
	}
	pti_ckpt_path(path, sizeof(path), dir, 1, 60);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	PT_TEST_TRUE(f != NULL);
	fclose(f);
	pti_ckpt_meta m50 = ckpt_meta(50);
	PT_TEST_OK(pti_ckpt_save(dir, &m50, clocks, vecs));
	PT_TEST_TRUE(access(tmp, F_OK) != 0);
	for (int64_t v = 10; v <= 50; v += 10) {
		pti_ckpt_path(path, sizeof(path), dir, 1, v);
		if (v == 40) {
			rmdir(path);
			continue;
		}
		PT_TEST_TRUE((access(path, F_OK) == 0) == (v == 20 || v == 50));
		unlink(path);
	}
	rmdir(dir);
}

// test_checkpoint_schedule: every N versions; every N seconds from the
// last one; never with 0. --checkpoint-every parses to those, and a bad
// value is refused naming the flag.
static void test_checkpoint_schedule(void)
{
	pti_ckpt_sched v = {20, 0, 0}, t = {5, 1, 100.0}, off = {0, 0, 0};
	PT_TEST_TRUE(!pti_ckpt_due(&v, 19, 0) && pti_ckpt_due(&v, 20, 0) &&
		     pti_ckpt_due(&v, 40, 0));
	PT_TEST_TRUE(!pti_ckpt_due(&t, 1, 104.9) && pti_ckpt_due(&t, 2, 105));
	PT_TEST_TRUE(!pti_ckpt_due(&t, 3, 109) && pti_ckpt_due(&t, 4, 110.5));
	PT_TEST_TRUE(!pti_ckpt_due(&off, 20, 1e9));
	pti_config c;
	uint64_t every;
	int secs;
	pti_config_defaults(&c);
	PT_TEST_OK(pti_jobopt_ckpt_every(&c.job, &every, &secs));
	PT_TEST_TRUE(every == 0);
	snprintf(c.job.checkpoint_every, sizeof(c.job.checkpoint_every), "30s");
	PT_TEST_OK(pti_jobopt_ckpt_every(&c.job, &every, &secs));
	PT_TEST_TRUE(every == 30 && secs == 1);
	snprintf(c.job.checkpoint_every, sizeof(c.job.checkpoint_every), "25");
	PT_TEST_OK(pti_jobopt_ckpt_every(&c.job, &every, &secs));
	PT_TEST_TRUE(every == 25 && secs == 0);
	const char *bad[] = {"0", "5m", "-3", "x"};
	for (int i = 0; i < 4; i++) {
		snprintf(c.job.checkpoint_every, sizeof(c.job.checkpoint_every), "%s",
		    bad[i]);
		PT_TEST_ERR(pti_jobopt_ckpt_every(&c.job, &every, &secs), PT_EINVAL);
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--checkpoint-every");
	}
}

static const pti_test_case cases[] = {
    {"test_checkpoint_round_trip", test_checkpoint_round_trip},
    {"test_checkpoint_schedule", test_checkpoint_schedule},
    {"test_checkpoint_refusals", test_checkpoint_refusals},
    {"test_checkpoint_keeps_two_and_clears_leftovers",
	test_checkpoint_keeps_two_and_clears_leftovers},
    {"test_checkpoint_owner_only", test_checkpoint_owner_only},
    {"test_checkpoint_failed_write_keeps_older",
	test_checkpoint_failed_write_keeps_older},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
