// common/err.h - error codes shared by every module, a per-thread
// detail string that names what was wrong (the file, the flag, the peer),
// and the library's log (pt_log_set).
// Functions return 0 or a PT_E* code; on failure they may leave a detail
// with pti_err_set, read back with pt_errmsg.
#ifndef PT_COMMON_ERR_H
#define PT_COMMON_ERR_H

#include "pstrain.h" // the PT_E* codes, and pt_errmsg

// pti_strerror returns a static description of code.
const char *pti_strerror(int code);

// pti_err_set formats a detail for the calling thread and returns code,
// so that callers can write `return pti_err_set(PT_EIO, "%s: ...", path);`.
int pti_err_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));


// pti_err_clear forgets the calling thread's detail.
void pti_err_clear(void);

// pti_log formats one message (no trailing newline) for the function of
// pt_log_set at level PT_LOG_*; nothing when none is set.
void pti_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif // PT_COMMON_ERR_H
