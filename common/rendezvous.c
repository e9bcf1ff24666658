// common/rendezvous.c - addresses found through a shared folder (see
// rendezvous.h).
#include "common/rendezvous.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"

void pti_rdv_path(char *out, size_t n, const char *dir, const char *role,
    uint32_t rank)
{
	snprintf(out, n, "%s/%s-%u.url", dir, role, rank);
}

int pti_rdv_publish(const char *dir, const char *role, uint32_t rank,
    const char *url)
{
	char path[4096], tmp[4200];
	pti_rdv_path(path, sizeof(path), dir, role, rank);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%s\n", url) < 0 || fclose(f) != 0 ||
	    rename(tmp, path) != 0)
		return pti_err_set(PT_EIO, "%s: %s", path, strerror(errno));
	return 0;
}

// rdv_read reads one address from path into url (size n): 1 when there
// is one, 0 when the file is not there yet, -1 when it is empty.
static int rdv_read(const char *path, char *url, size_t n)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	int got = fgets(url, (int)n, f) != NULL;
	fclose(f);
	url[strcspn(url, "\n")] = '\0';
	return got && url[0] != '\0' ? 1 : -1;
}

int pti_rdv_gather(const char *dir, const char *role, uint32_t n,
    double timeout_s, char *out, size_t size, const char *who)
{
	char path[4096], url[1024];
	double start = pti_clock_s(), said = 0;
	for (;;) {
		size_t used = 0;
		uint32_t r;
		int got = 1;
		out[0] = '\0';
		for (r = 0; r < n; r++) {
			pti_rdv_path(path, sizeof(path), dir, role, r);
			if ((got = rdv_read(path, url, sizeof(url))) <= 0)
				break;
			if (used + strlen(url) + 2 > size)
				return pti_err_set(PT_EINVAL, "%s: the "
				    "addresses of %u %ss do not fit %zu bytes",
				    dir, n, role, size);
			used += (size_t)snprintf(out + used, size - used,
			    "%s%s", r ? "," : "", url);
		}
		if (r == n)
			return 0;
		if (got < 0)
			return pti_err_set(PT_EINVAL, "%s: no address", path);
		double waited = pti_clock_s() - start;
		if (waited >= timeout_s)
			return pti_err_set(PT_ETIMEDOUT, "gave up after %.0fs "
			    "waiting for %s %u to start and publish its "
			    "address as %s (is it a folder every host "
			    "shares?)", waited, role, r, path);
		if (waited >= said + 5.0) {
			pti_log(PT_LOG_INFO, "%s: waiting for %s %u to publish "
			    "%s (%.0fs so far, at most %.0fs)", who, role, r,
			    path, waited, timeout_s);
			said = waited;
		}
		usleep(20 * 1000);
	}
}
