// common/checkpoint.h - a server's shard on disk: values, optimizer state and
// version, written atomically (temporary file, fsync, rename) with a
// CRC-32, so that a job can go on from the newest checkpoint every server
// completed. Format: docs/FORMATS.md.
#ifndef PT_COMMON_CHECKPOINT_H
#define PT_COMMON_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define PT_CKPT_KEEP 2 // checkpoints kept per server; older ones removed

typedef struct pti_ckpt_meta {
	uint32_t rank, n_servers;
	uint64_t layout_hash;
	uint64_t lo, hi;   // the shard
	int64_t version;   // parameter version (sync: steps done)
	uint64_t updates;  // updates applied, for Adam's step count
	uint32_t opt_kind, n_state;
	uint32_t n_workers; // the clocks that follow: steps each worker pushed
	// The server's embedding tables (ps/tables.c), as bytes after the
	// vectors: extra_len of them at extra (save: the caller's; load:
	// malloc'd into *got, the caller's to free; NULL when none).
	void *extra;
	uint64_t extra_len;
} pti_ckpt_meta;

#define PT_CKPT_EXTRA_MAX ((uint64_t)1 << 40) // bytes of tables, at most

// When checkpoints are due: every `every` versions, or every `every`
// seconds when `seconds` is set; never when every is 0.
typedef struct pti_ckpt_sched {
	uint64_t every;
	int seconds;
	double last; // when the last one was due (seconds clock)
} pti_ckpt_sched;

// pti_ckpt_due tells whether a checkpoint is due after version `version`
// at time now; when one is, the seconds clock starts again at now.
int pti_ckpt_due(pti_ckpt_sched *sc, int64_t version, double now);

// pti_ckpt_path writes DIR/server-R-vVERSION.ckpt into out.
void pti_ckpt_path(char *out, size_t size, const char *dir, uint32_t rank,
    int64_t version);

// pti_ckpt_name tells what a file name in a checkpoint folder is for
// rank: PTI_CKPT_FILE for server-R-vV.ckpt, PTI_CKPT_TMP for the
// server-R-vV.ckpt.tmp a killed writer left (with *version set), or
// PTI_CKPT_OTHER.
enum { PTI_CKPT_OTHER, PTI_CKPT_FILE, PTI_CKPT_TMP };
int pti_ckpt_name(const char *name, uint32_t rank, int64_t *version);

// pti_ckpt_save writes m, the m->n_workers clocks, the 1 + m->n_state
// vectors vecs[i] (each hi - lo floats) and m's extra bytes to
// pti_ckpt_path, atomically,
// then removes this rank's checkpoints older than the newest
// PT_CKPT_KEEP and any temporary file a killed writer left; the older
// ones go only once this one is complete (written, fsynced, renamed, its
// folder fsynced). Files are created readable by their owner only (0600).
// PT_EIO with a detail naming the file and the system's error; nothing
// is removed then.
//
// Fault injection for tests: with PSTRAIN_TEST_CKPT_STALL=V:MS in the
// environment, the write of version V stops for MS milliseconds halfway
// through its temporary file, so that a test can kill the server there.
int pti_ckpt_save(const char *dir, const pti_ckpt_meta *m,
    const int64_t *clocks, const float *const *vecs);

// pti_ckpt_load reads path into vecs (1 + want->n_state vectors of
// hi - lo floats, the caller's) and, when the file's worker count equals
// want->n_workers and clocks is not NULL, its clocks into clocks (the
// caller's, n_workers entries), after checking it whole: magic, format,
// CRC, and that rank, server count, layout hash, shard and optimizer equal
// want's. *got receives the file's meta (n_workers: the file's; its extra
// bytes malloc'd, NULL in a file of format 2, which had none; without
// got they are checked and dropped). PT_ECORRUPT
// (or PT_ENOENT) with a detail naming the file and the reason; vecs and
// clocks may be partly written then.
int pti_ckpt_load(const char *path, const pti_ckpt_meta *want,
    int64_t *clocks, float *const *vecs, pti_ckpt_meta *got);

#endif // PT_COMMON_CHECKPOINT_H
