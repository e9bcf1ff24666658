// common/jsonio.h - reading the JSON files a job writes (summary.json,
// server-R.json), with Debian's jansson.
#ifndef PT_COMMON_JSONIO_H
#define PT_COMMON_JSONIO_H

#include <stddef.h>

#include <jansson.h>

// pti_json_load parses the JSON file at path. NULL when it is missing
// (quietly), or malformed (said on stderr, with the line and column).
// The caller frees the result with json_decref.
json_t *pti_json_load(const char *path);

// pti_json_num: the number under key in object o (o may be NULL); NaN
// when o or the key is missing, null or not a number.
double pti_json_num(const json_t *o, const char *key);

// pti_json_text copies the value under key in object o as text into out
// (size n): a string as it is, a number or a boolean as JSON writes it.
// Returns 0, or -1 when missing or null (out is then "").
int pti_json_text(const json_t *o, const char *key, char *out, size_t n);

// pti_json_value_text is pti_json_text of a value v already found.
int pti_json_value_text(const json_t *v, char *out, size_t n);

#endif // PT_COMMON_JSONIO_H
