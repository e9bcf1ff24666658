// common/jsonio.c - reading a job's JSON files (jsonio.h).
#include "common/jsonio.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

json_t *pti_json_load(const char *path)
{
	json_error_t err;
	if (access(path, F_OK) != 0)
		return NULL;
	json_t *j = json_load_file(path, 0, &err);
	if (j == NULL)
		fprintf(stderr, "pstrain: %s:%d:%d: not JSON: %s\n", path,
		    err.line, err.column, err.text);
	return j;
}

double pti_json_num(const json_t *o, const char *key)
{
	const json_t *v = o ? json_object_get(o, key) : NULL;
	return json_is_number(v) ? json_number_value(v) : NAN;
}

int pti_json_value_text(const json_t *v, char *out, size_t n)
{
	if (n > 0)
		out[0] = '\0';
	if (v == NULL || json_is_null(v) || n == 0)
		return -1;
	if (json_is_string(v))
		snprintf(out, n, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(out, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(out, n, "%.15g", json_real_value(v));
	else if (json_is_boolean(v))
		snprintf(out, n, "%s", json_is_true(v) ? "true" : "false");
	else
		return -1; // an object or array is not a value here
	return 0;
}

int pti_json_text(const json_t *o, const char *key, char *out, size_t n)
{
	return pti_json_value_text(o ? json_object_get(o, key) : NULL, out, n);
}
