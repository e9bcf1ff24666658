// common/rendezvous.h - processes of one job finding each other's
// addresses through a folder they all see: each publishes DIR/ROLE-R.url
// (its address and a newline, written whole by a rename), and those that
// need them wait for every one. pstrain node's servers publish in
// DIR/nodes/ID for their workers; all-reduce workers publish their ring
// addresses for each other (pstrain run: in its socket folder; pstrain
// node: in DIR/nodes/ID).
#ifndef PT_COMMON_RENDEZVOUS_H
#define PT_COMMON_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

// pti_rdv_path is DIR/ROLE-R.url.
void pti_rdv_path(char *out, size_t n, const char *dir, const char *role,
    uint32_t rank);

// pti_rdv_publish writes url as ROLE-R's address in dir. PT_EIO naming
// the file on failure.
int pti_rdv_publish(const char *dir, const char *role, uint32_t rank,
    const char *url);

// pti_rdv_gather waits at most timeout_s seconds (0: looks once) for the
// addresses of ROLE-0 .. ROLE-(n-1) in dir and lists them in out (size
// bytes), comma-separated in rank order; while waiting it says so on the
// log every 5 s, as `who`. PT_ETIMEDOUT naming the first missing file,
// PT_EINVAL for an empty file or a list longer than size.
int pti_rdv_gather(const char *dir, const char *role, uint32_t n,
    double timeout_s, char *out, size_t size, const char *who);

#endif // PT_COMMON_RENDEZVOUS_H
