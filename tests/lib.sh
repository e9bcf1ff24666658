# tests/lib.sh - shared by the shell test scripts (sourced, not run):
# ok/no print the case lines tests/run.sh counts; json reads a number or
# word from a flat JSON file such as summary.json.
ok() { echo "ok $1"; }
# no NAME WHY [LOG]: a failed case, with the end of LOG when given.
no() {
	echo "FAIL $1: $2"
	[ -n "$3" ] && [ -f "$3" ] && tail -n 20 "$3" | sed 's/^/    | /'
}
# Only top-level keys (two spaces in): summary.json's nested "config" and
# "record" objects repeat some names.
json() { sed -n "s/^  \"$1\": \([-0-9.e+a-z]*\),*$/\1/p" "$2"; }
# jstr KEY FILE: a top-level string value, unquoted.
jstr() { sed -n "s/^  \"$1\": \"\(.*\)\",*$/\1/p" "$2"; }
