// cli/dash/dbuf.c - a dashboard response's buffer (dbuf.h).
#include "cli/dash/dbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "common/outputs.h"

void pti_dbuf_printf(pti_dbuf *b, const char *fmt, ...)
{
	va_list ap;
	if (b->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->len : NULL,
		    b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = 1;
			return;
		}
		if (b->p != NULL && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
		char *q = realloc(b->p, cap);
		if (q == NULL) {
			b->failed = 1;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
}

void pti_dbuf_str(pti_dbuf *b, const char *s)
{
	json_t *j = pti_json_str(s);
	char *t = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	if (t == NULL)
		b->failed = 1;
	else
		pti_dbuf_printf(b, "%s", t);
	free(t);
	json_decref(j);
}

void pti_dbuf_num(pti_dbuf *b, double v)
{
	if (isfinite(v))
		pti_dbuf_printf(b, "%.9g", v);
	else
		pti_dbuf_printf(b, "null");
}

void pti_dbuf_secs(pti_dbuf *b, double v)
{
	if (isfinite(v))
		pti_dbuf_printf(b, "%.3f", v);
	else
		pti_dbuf_printf(b, "null");
}
