// common/err.c - error strings, the per-thread error detail, the log.
#include "common/err.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char err_detail[512];

static const char *const err_names[PT_NERR] = {
	[PT_OK] = "success",
	[PT_ENOMEM] = "out of memory",
	[PT_EINVAL] = "invalid argument",
	[PT_EPROTO] = "protocol error",
	[PT_EIO] = "input/output error",
	[PT_ECORRUPT] = "corrupt data",
	[PT_ETIMEDOUT] = "timed out",
	[PT_ESTATE] = "operation out of turn",
	[PT_ERANGE] = "out of range",
	[PT_ENOENT] = "not found",
	[PT_ETRANSPORT] = "transport error",
	[PT_EDIVERGED] = "training diverged",
	[PT_ECLOSED] = "connection closed",
	[PT_EAUTH] = "not authenticated",
};

const char *pti_strerror(int code)
{
	if (code < 0 || code >= PT_NERR || err_names[code] == NULL)
		return "unknown error";
	return err_names[code];
}

int pti_err_set(int code, const char *fmt, ...)
{
	// Through a copy: callers wrap the detail they had, passing
	// pt_errmsg()'s text, which is err_detail itself.
	char buf[sizeof(err_detail)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	memcpy(err_detail, buf, sizeof(buf));
	return code;
}

const char *pt_errmsg(int code)
{
	return err_detail[0] != '\0' ? err_detail : pti_strerror(code);
}

void pti_err_clear(void)
{
	err_detail[0] = '\0';
}

// ---------------------------------------------------------------- log

// The function and its argument, set before the library's threads start
// (pstrain.h); read with acquire so that a thread sees both.
static pt_log_fn _Atomic log_fn;
static void *log_arg;

void pt_log_set(pt_log_fn fn, void *arg)
{
	log_arg = arg;
	atomic_store_explicit(&log_fn, fn, memory_order_release);
}

void pt_log_stderr(void *arg, int level, const char *msg)
{
	(void)arg, (void)level;
	fprintf(stderr, "%s\n", msg);
}

void pti_log(int level, const char *fmt, ...)
{
	pt_log_fn fn = atomic_load_explicit(&log_fn, memory_order_acquire);
	if (fn == NULL)
		return;
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fn(log_arg, level, buf);
}
