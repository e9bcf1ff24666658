// common/afile.c - write a file whole or not at all (see afile.h).
#include "common/afile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "common/err.h"

static void afile_free(pti_afile *a)
{
	free(a->path);
	free(a->tmp);
	a->path = a->tmp = NULL;
	a->f = NULL;
}

int pti_afile_open(pti_afile *a, const char *path)
{
	size_t len = strlen(path);
	memset(a, 0, sizeof(*a));
	a->path = strdup(path);
	a->tmp = malloc(len + 5);
	if (a->path == NULL || a->tmp == NULL) {
		afile_free(a);
		return pti_err_set(PT_ENOMEM, "%s: writing it", path);
	}
	memcpy(a->tmp, path, len);
	memcpy(a->tmp + len, ".tmp", 5);
	a->crc = crc32(0, Z_NULL, 0);
	int fd = -1;
	if (unlink(a->tmp) == 0 || errno == ENOENT)
		fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	a->f = fd < 0 ? NULL : fdopen(fd, "wb");
	if (a->f == NULL) {
		int rv = pti_err_set(PT_EIO, "%s: %s", a->tmp, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(a->tmp);
		}
		afile_free(a);
		return rv;
	}
	return 0;
}

void pti_afile_write(pti_afile *a, const void *p, size_t n)
{
	if (a->err != 0 || n == 0)
		return;
	errno = 0;
	if (fwrite(p, 1, n, a->f) != n) {
		a->err = errno != 0 ? errno : EIO;
		return;
	}
	a->crc = crc32(a->crc, p, (uInt)n);
}

// afile_sync_dir syncs the folder holding path: 0 or an errno.
static int afile_sync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash == NULL ? strdup(".")
				  : strndup(path, (size_t)(slash - path) + 1);
	if (dir == NULL)
		return ENOMEM;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int e = fd < 0 || fsync(fd) != 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	free(dir);
	return e == EINVAL || e == ENOTSUP ? 0 : e;
}

int pti_afile_commit(pti_afile *a)
{
	int e = a->err;
	if (e == 0 && (fflush(a->f) != 0 || fsync(fileno(a->f)) != 0))
		e = errno;
	if (fclose(a->f) != 0 && e == 0)
		e = errno;
	if (e == 0 && rename(a->tmp, a->path) != 0)
		e = errno;
	int rv = 0;
	if (e != 0) {
		unlink(a->tmp);
		rv = pti_err_set(PT_EIO, "%s: %s", a->path, strerror(e));
	} else if ((e = afile_sync_dir(a->path)) != 0) {
		rv = pti_err_set(PT_EIO, "%s: syncing its folder: %s", a->path,
		    strerror(e));
	}
	afile_free(a);
	return rv;
}

int pti_mkdir_p(const char *path)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0777) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}
