// cli/run/sockdir.c - the launcher's socket folder (see sockdir.h).
//
// Why a folder in the temporary folder, named after the launcher, and
// swept by the next launcher: the sockets need a short path (a socket
// path fits in 107 bytes), a file system that supports them (--out may
// be a network or FUSE mount that does not), and a folder only its owner
// can enter (mkdtemp's 0700; --out follows the umask). After kill -9 the
// launcher cannot remove it, so its name records the launcher's pid and
// start time, and every launcher removes the folders whose launcher no
// longer exists before it makes its own. The start time tells a dead
// launcher from a new process that reuses its pid. Launchers in another
// pid namespace that share this temporary folder are not told apart:
// give them each their own TMPDIR.
#include "cli/run/sockdir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/err.h"

#define SOCKDIR_PREFIX "pstrain-run-"
#define SOCKDIR_SUN_PATH 107 // bytes of a socket path, without its NUL
#define SOCKDIR_SOCKET "/s4294967295" // the longest socket name in it

// pti_proc_start reads the start time of process pid (clock ticks after
// boot, field 22 of /proc/PID/stat) into *start. Returns 0, ESRCH when
// there is no such process or only its zombie (killed, not yet waited
// for: it will never clean up), or another errno when it cannot tell.
int pti_proc_start(long pid, unsigned long long *start)
{
	char path[64], buf[1024], state;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return errno == ENOENT ? ESRCH : errno;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	// The command name, in parentheses, may hold spaces and ')'.
	const char *p = strrchr(buf, ')');
	if (p == NULL || sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s "
				   "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
				   "%llu", &state, start) != 2)
		return EINVAL;
	return state == 'Z' || state == 'X' ? ESRCH : 0;
}

// sockdir_stale tells whether name is a socket folder of a launcher that
// no longer exists: exactly SOCKDIR_PREFIX PID-START-XXXXXX.
static int sockdir_stale(const char *name)
{
	long pid;
	unsigned long long start;
	int used = 0;
	char canon[128];
	if (sscanf(name, SOCKDIR_PREFIX "%ld-%llu-%n", &pid, &start,
		&used) != 2 || used == 0 || pid <= 0)
		return 0;
	// Refuse anything but the name we make: no sign, no leading zero,
	// six letters or digits after.
	snprintf(canon, sizeof(canon), SOCKDIR_PREFIX "%ld-%llu-", pid,
	    start);
	if (strncmp(name, canon, (size_t)used) != 0 ||
	    strlen(canon) != (size_t)used || strlen(name + used) != 6)
		return 0;
	for (const char *p = name + used; *p; p++)
		if (!isalnum((unsigned char)*p))
			return 0;
	return pti_proc_gone(pid, start);
}

int pti_proc_gone(long pid, unsigned long long start)
{
	unsigned long long now;
	int rv = pti_proc_start(pid, &now);
	if (rv == ESRCH)
		return 1;
	return rv == 0 && now != start;
}

// sockdir_ours tells whether name is a file a launcher makes in its
// folder: a server's socket sR and its shared memory's sR.shm, a
// worker's ring socket wR, or the ring's address worker-R.url.
static int sockdir_ours(const char *name)
{
	static const char *const forms[] = {"s%u", "s%u.shm", "w%u",
	    "worker-%u.url"};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		unsigned r;
		char canon[32];
		if (sscanf(name, forms[i], &r) != 1)
			continue;
		snprintf(canon, sizeof(canon), forms[i], r);
		if (strcmp(canon, name) == 0)
			return 1;
	}
	return 0;
}

// sockdir_remove removes folder name of the folder open as tfd and the
// files of sockdir_ours in it, never following a symbolic link, and only
// when this user owns it. Anything else in it keeps it there.
static void sockdir_remove(int tfd, const char *name)
{
	struct stat sb;
	int fd = openat(tfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					O_CLOEXEC);
	if (fd < 0)
		return; // a symbolic link, not a folder, or gone already
	if (fstat(fd, &sb) != 0 || sb.st_uid != geteuid()) {
		close(fd);
		return;
	}
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (sockdir_ours(e->d_name))
			unlinkat(fd, e->d_name, 0); // never removes a folder
	closedir(d);
	unlinkat(tfd, name, AT_REMOVEDIR);
}

// sockdir_sweep removes the stale socket folders in tmp.
static void sockdir_sweep(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *e;
	struct stat sb;
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, SOCKDIR_PREFIX,
			strlen(SOCKDIR_PREFIX)) == 0 &&
		    fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) ==
			0 &&
		    S_ISDIR(sb.st_mode) && sb.st_uid == geteuid() &&
		    sockdir_stale(e->d_name))
			sockdir_remove(dirfd(d), e->d_name);
	closedir(d);
}

// sockdir_name writes TMP/pstrain-run-PID-START-XXXXXX into out (size
// size); 0 when it does not fit there or leaves no room in a socket path.
static int sockdir_name(char *out, size_t size, const char *tmp,
    unsigned long long start)
{
	int n = snprintf(out, size, "%s/" SOCKDIR_PREFIX "%ld-%llu-XXXXXX",
	    tmp, (long)getpid(), start);
	return n > 0 && (size_t)n < size &&
	       (size_t)n + strlen(SOCKDIR_SOCKET) <= SOCKDIR_SUN_PATH;
}

int pti_sockdir_make(char *out, size_t size)
{
	unsigned long long start;
	const char *tmp = getenv("TMPDIR");
	if (tmp == NULL || *tmp == '\0')
		tmp = "/tmp";
	int rv = pti_proc_start((long)getpid(), &start);
	if (rv != 0)
		return pti_err_set(PT_EIO, "/proc/%ld/stat: %s",
		    (long)getpid(), strerror(rv));
	// A socket path holds 107 bytes at most: a long TMPDIR gives way.
	if (!sockdir_name(out, size, tmp, start) &&
	    !sockdir_name(out, size, tmp = "/tmp", start))
		return pti_err_set(PT_EIO, "/tmp: too long a path for sockets");
	sockdir_sweep(tmp);
	if (mkdtemp(out) == NULL)
		return pti_err_set(PT_EIO, "%s: %s", out, strerror(errno));
	return 0;
}
