// cli/dash/dbuf.h - the growing text buffer that one dashboard response
// is written into (dashjson.c's /data.json, dashprom.c's /metrics), with
// the JSON pieces those write. One buffer per request: not shared
// between threads.
#ifndef PT_CLI_DASH_DBUF_H
#define PT_CLI_DASH_DBUF_H

#include <stddef.h>

// A response's text; start from {0}. On failure it stays short, failed
// is set and the response is refused. The caller frees p.
typedef struct pti_dbuf {
	char *p;
	size_t len, cap;
	int failed;
} pti_dbuf;

void pti_dbuf_printf(pti_dbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// pti_dbuf_str appends s as a JSON string (bytes that are not UTF-8
// become '?'); pti_dbuf_num a number, or null for NaN and infinities.
void pti_dbuf_str(pti_dbuf *b, const char *s);
void pti_dbuf_num(pti_dbuf *b, double v);
// pti_dbuf_secs appends seconds (since 1970, or since a job's start) to
// the millisecond, or null.
void pti_dbuf_secs(pti_dbuf *b, double v);

#endif // PT_CLI_DASH_DBUF_H
