// common/afile.h - a file written whole or not at all, with a CRC-32 of
// what was written: checkpoints and saved models.
//
// The bytes go to PATH.tmp, created 0600 from the start (they hold a
// model; a leftover PATH.tmp is removed first, so that O_EXCL gives a new
// file of that mode and refuses a symbolic link planted in its place).
// Commit flushes and syncs it, renames it over PATH and syncs the folder,
// so that a crash leaves the old PATH or the new one, never a torn one.
#ifndef PT_COMMON_AFILE_H
#define PT_COMMON_AFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct pti_afile {
	FILE *f;
	char *path, *tmp;
	unsigned long crc; // CRC-32 of every byte written so far
	int err;           // errno of the first failed write, or 0
} pti_afile;

// pti_afile_open starts writing path. PT_EIO naming the temporary file,
// or PT_ENOMEM; nothing is left behind on failure.
int pti_afile_open(pti_afile *a, const char *path);

// pti_afile_write appends n bytes and adds them to the CRC. A failure is
// kept for pti_afile_commit to report.
void pti_afile_write(pti_afile *a, const void *p, size_t n);

// pti_afile_commit makes the file PATH (see above) and frees a. PT_EIO
// naming PATH with the first error (a full disk shows at a write or the
// sync); the temporary file is removed and PATH left as it was. A folder
// that cannot be synced (EINVAL, ENOTSUP on some file systems) is no
// error: there the rename is as durable as it gets.
int pti_afile_commit(pti_afile *a);

// pti_mkdir_p creates path and its missing parents, like mkdir -p.
// Returns 0, or -1 with errno set.
int pti_mkdir_p(const char *path);

#endif // PT_COMMON_AFILE_H
