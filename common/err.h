// common/err.h - error codes shared by every module, and a per-thread
// detail string that names what was wrong (the file, the flag, the peer).
// Functions return 0 or a PT_E* code; on failure they may leave a detail
// with pti_err_set, read back with pt_errmsg.
#ifndef PT_COMMON_ERR_H
#define PT_COMMON_ERR_H

enum {
	PT_OK = 0,
	PT_ENOMEM,   // out of memory
	PT_EINVAL,   // bad argument, flag or spec
	PT_EPROTO,   // malformed or unexpected message
	PT_EIO,      // file or socket I/O failed
	PT_ECORRUPT, // a file's contents are not what its format says
	PT_ETIMEDOUT,
	PT_ESTATE,   // operation out of turn
	PT_ERANGE,   // index or range outside what is held
	PT_ENOENT,   // no such file or thing
	PT_ETRANSPORT, // nng reported an error
	PT_EDIVERGED,  // training produced a non-finite loss
	PT_ECLOSED,    // peer or socket closed
	PT_EAUTH,      // the peer has not proven the job secret, or acts
		       // beyond the role it proved
	PT_NERR
};

// pt_strerror returns a static description of code.
const char *pt_strerror(int code);

// pti_err_set formats a detail for the calling thread and returns code,
// so that callers can write `return pti_err_set(PT_EIO, "%s: ...", path);`.
int pti_err_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// pt_errmsg returns the calling thread's last detail, or pt_strerror(code)
// when no detail was set since pti_err_clear.
const char *pt_errmsg(int code);

// pti_err_clear forgets the calling thread's detail.
void pti_err_clear(void);

#endif // PT_COMMON_ERR_H
