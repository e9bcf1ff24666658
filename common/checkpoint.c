// common/checkpoint.c - shard checkpoints (see checkpoint.h).
#include "common/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "common/afile.h"
#include "common/err.h"
#include "common/testhook.h"

#define CKPT_MAGIC "PSTRCKPT"
#define CKPT_FORMAT 3u // 3: the tables' bytes after the vectors

// The fixed header, little-endian on every host pstrain runs on.
typedef struct ckpt_head {
	char magic[8];
	uint32_t format, rank, n_servers, opt_kind;
	uint64_t layout_hash, lo, hi;
	int64_t version;
	uint64_t updates;
	uint32_t n_state, n_workers;
} ckpt_head;

void pti_ckpt_path(char *out, size_t size, const char *dir, uint32_t rank,
    int64_t version)
{
	snprintf(out, size, "%s/server-%u-v%lld.ckpt", dir, rank,
	    (long long)version);
}

int pti_ckpt_name(const char *name, uint32_t rank, int64_t *version)
{
	char prefix[32];
	long long v;
	int used = 0;
	int pl = snprintf(prefix, sizeof(prefix), "server-%u-v", rank);
	if (strncmp(name, prefix, (size_t)pl) != 0 ||
	    sscanf(name + pl, "%lld%n", &v, &used) != 1 || v < 0)
		return PTI_CKPT_OTHER;
	*version = v;
	if (strcmp(name + pl + used, ".ckpt") == 0)
		return PTI_CKPT_FILE;
	if (strcmp(name + pl + used, ".ckpt.tmp") == 0)
		return PTI_CKPT_TMP;
	return PTI_CKPT_OTHER;
}

// ckpt_prune removes this rank's checkpoints older than the newest
// PT_CKPT_KEEP, and temporary files that a killed writer left behind. It
// runs only after version `newest` was written, synced and renamed, and
// counts as checkpoints only regular files of the exact name the rename
// gives: a temporary file, or anything else of a similar name, is no
// newer checkpoint for whose sake a complete one may go.
static void ckpt_prune(const char *dir, uint32_t rank, int64_t newest)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat sb;
	char path[4096];
	if (d == NULL)
		return;
	int64_t versions[64];
	int n = 0;
	while ((e = readdir(d)) != NULL && n < 64) {
		int64_t v;
		int kind = pti_ckpt_name(e->d_name, rank, &v);
		if (kind == PTI_CKPT_OTHER ||
		    fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(sb.st_mode))
			continue;
		if (kind == PTI_CKPT_FILE)
			versions[n++] = v;
		else {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		int newer = 0;
		for (int k = 0; k < n; k++)
			newer += versions[k] > versions[i];
		if (newer >= PT_CKPT_KEEP && versions[i] < newest) {
			pti_ckpt_path(path, sizeof(path), dir, rank, versions[i]);
			unlink(path);
		}
	}
}

// ckpt_stall sleeps halfway through writing version v when the test
// hook PSTRAIN_TEST_CKPT_STALL=V:MS asks for it (see checkpoint.h).
static void ckpt_stall(FILE *f, int64_t v)
{
	const char *e = pti_test_hook("PSTRAIN_TEST_CKPT_STALL");
	long long want;
	unsigned ms;
	if (e == NULL || sscanf(e, "%lld:%u", &want, &ms) != 2 || want != v)
		return;
	fflush(f);
	pti_log(PT_LOG_WARN, "checkpoint: stalling %u ms while writing version "
	    "%lld (PSTRAIN_TEST_CKPT_STALL)", ms, want);
	usleep((useconds_t)ms * 1000);
}

int pti_ckpt_save(const char *dir, const pti_ckpt_meta *m,
    const int64_t *clocks, const float *const *vecs)
{
	char path[4096];
	ckpt_head h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, CKPT_MAGIC, 8);
	h.format = CKPT_FORMAT;
	h.rank = m->rank, h.n_servers = m->n_servers, h.opt_kind = m->opt_kind;
	h.layout_hash = m->layout_hash, h.lo = m->lo, h.hi = m->hi;
	h.version = m->version, h.updates = m->updates;
	h.n_state = m->n_state, h.n_workers = m->n_workers;
	pti_ckpt_path(path, sizeof(path), dir, m->rank, m->version);
	pti_afile a;
	int rv = pti_afile_open(&a, path);
	if (rv != 0)
		return rv;
	pti_afile_write(&a, &h, sizeof(h));
	pti_afile_write(&a, clocks, (size_t)m->n_workers * sizeof(int64_t));
	size_t bytes = (size_t)(m->hi - m->lo) * sizeof(float);
	for (uint32_t i = 0; i <= m->n_state; i++) {
		pti_afile_write(&a, vecs[i], bytes);
		if (i == 0)
			ckpt_stall(a.f, m->version);
	}
	uint64_t xl = m->extra != NULL ? m->extra_len : 0;
	pti_afile_write(&a, &xl, 8);
	if (xl > 0)
		pti_afile_write(&a, m->extra, xl);
	uint32_t c32 = (uint32_t)a.crc;
	pti_afile_write(&a, &c32, 4);
	// The older checkpoints are pruned only once this one is complete,
	// renamed and its folder synced: until then they are all a crash
	// may leave.
	if ((rv = pti_afile_commit(&a)) != 0)
		return rv;
	ckpt_prune(dir, m->rank, m->version);
	return 0;
}

int pti_ckpt_load(const char *path, const pti_ckpt_meta *want,
    int64_t *clocks, float *const *vecs, pti_ckpt_meta *got)
{
	ckpt_head h;
	uint32_t c32;
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return pti_err_set(errno == ENOENT ? PT_ENOENT : PT_EIO,
		    "%s: %s", path, strerror(errno));
	int rv = 0;
	if (fread(&h, sizeof(h), 1, f) != 1)
		rv = pti_err_set(PT_ECORRUPT, "%s: truncated header", path);
	else if (memcmp(h.magic, CKPT_MAGIC, 8) != 0 ||
		 (h.format != CKPT_FORMAT && h.format != 2))
		rv = pti_err_set(PT_ECORRUPT,
		    "%s: not a pstrain checkpoint of format 2 or %u", path,
		    CKPT_FORMAT);
	else if (h.rank != want->rank || h.n_servers != want->n_servers)
		rv = pti_err_set(PT_ECORRUPT,
		    "%s: written by server %u of %u, this is server %u of %u",
		    path, h.rank, h.n_servers, want->rank, want->n_servers);
	else if (h.layout_hash != want->layout_hash || h.lo != want->lo ||
		 h.hi != want->hi)
		rv = pti_err_set(PT_ECORRUPT,
		    "%s: holds another model or shard ([%llu, %llu))", path,
		    (unsigned long long)h.lo, (unsigned long long)h.hi);
	else if (h.opt_kind != want->opt_kind || h.n_state != want->n_state)
		rv = pti_err_set(PT_ECORRUPT,
		    "%s: written with another --optimizer", path);
	else if (h.n_workers > 1024)
		rv = pti_err_set(PT_ECORRUPT, "%s: claims %u workers", path,
		    h.n_workers);
	uLong crc = crc32(0, (const Bytef *)&h, sizeof(h));
	for (uint32_t i = 0; rv == 0 && i < h.n_workers; i++) {
		int64_t ck;
		if (fread(&ck, sizeof(ck), 1, f) != 1)
			rv = pti_err_set(PT_ECORRUPT, "%s: truncated clocks",
			    path);
		crc = crc32(crc, (const Bytef *)&ck, sizeof(ck));
		if (clocks != NULL && h.n_workers == want->n_workers)
			clocks[i] = ck;
	}
	size_t bytes = (size_t)(want->hi - want->lo) * sizeof(float);
	for (uint32_t i = 0; rv == 0 && i <= want->n_state; i++) {
		if (fread(vecs[i], 1, bytes, f) != bytes)
			rv = pti_err_set(PT_ECORRUPT, "%s: truncated values",
			    path);
		else
			crc = crc32(crc, (const Bytef *)vecs[i], (uInt)bytes);
	}
	uint64_t xl = 0;
	void *x = NULL;
	if (rv == 0 && h.format >= 3) {
		if (fread(&xl, 8, 1, f) != 1 || xl > PT_CKPT_EXTRA_MAX)
			rv = pti_err_set(PT_ECORRUPT, "%s: truncated or wrong "
			    "tables' length", path);
		else if (xl > 0 && (x = malloc(xl)) == NULL)
			rv = pti_err_set(PT_ENOMEM, "%s: %llu bytes of tables",
			    path, (unsigned long long)xl);
		else if (xl > 0 && fread(x, 1, xl, f) != xl)
			rv = pti_err_set(PT_ECORRUPT, "%s: truncated tables",
			    path);
		if (rv == 0) {
			crc = crc32(crc, (const Bytef *)&xl, 8);
			for (uint64_t at = 0; at < xl; at += 1u << 30) {
				uint64_t k = xl - at < (1u << 30) ? xl - at
								  : 1u << 30;
				crc = crc32(crc, (const Bytef *)x + at,
				    (uInt)k);
			}
		}
	}
	if (rv == 0 && fread(&c32, 4, 1, f) != 1)
		rv = pti_err_set(PT_ECORRUPT, "%s: truncated checksum", path);
	else if (rv == 0 && (uint32_t)crc != c32)
		rv = pti_err_set(PT_ECORRUPT, "%s: checksum mismatch", path);
	else if (rv == 0 && fgetc(f) != EOF)
		rv = pti_err_set(PT_ECORRUPT, "%s: bytes after the checksum",
		    path);
	fclose(f);
	if (rv == 0 && got != NULL) {
		*got = *want;
		got->version = h.version;
		got->updates = h.updates;
		got->n_workers = h.n_workers;
		got->extra = x;
		got->extra_len = xl;
		x = NULL;
	}
	free(x);
	return rv;
}

int pti_ckpt_due(pti_ckpt_sched *sc, int64_t version, double now)
{
	if (sc->every == 0)
		return 0;
	if (sc->seconds ? now - sc->last < (double)sc->every
			: version % (int64_t)sc->every != 0)
		return 0;
	sc->last = now;
	return 1;
}
