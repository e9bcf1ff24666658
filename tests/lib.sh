# tests/lib.sh - shared by the shell test scripts (sourced, not run):
# ok/no print the case lines tests/run.sh counts; json reads a number or
# word from a flat JSON file such as summary.json.
ok() { echo "ok $1"; }
# PY: a python3 for the tests' readers (standard library only).
PY=python3
command -v $PY >/dev/null 2>&1 || PY=/usr/bin/python3
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
# wait_rows FILE N: wait (at most 120 s) until FILE has N lines.
wait_rows() {
	i=0
	while [ "$i" -lt 2400 ]; do
		[ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}
# wait_line PATTERN FILE: wait (at most 120 s) until FILE has a line
# matching PATTERN (grep's).
wait_line() {
	i=0
	while [ "$i" -lt 2400 ]; do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}
# same_job NAME RC MODEL REF WORKERS SUMMARY LOG: what every test of a job
# started another way (by hand, srun, sbatch, mpirun, across namespaces)
# checks against the same job under pstrain run: its launcher's exit
# status RC is 0, MODEL is REF bit for bit, and SUMMARY (unless "-")
# counts WORKERS workers. Prints the case's line; LOG is shown on failure.
same_job() {
	if [ "$2" != 0 ]; then
		no "$1" "exit $2" "$7"
	elif ! cmp -s "$3" "$4"; then
		no "$1" "model differs from pstrain run's" "$7"
	elif [ "$6" != - ] && [ "$(json workers "$6")" != "$5" ]; then
		no "$1" "summary.json missing, or not $5 workers" "$7"
	else
		ok "$1"
	fi
}

# dash_job STEPS MS CK: the dashboard tests' job, started in the
# background with its pid in $pid: async 1 x 2 mlp:16, slowed to MS ms a
# step (--delay), a checkpoint every CK steps in $T/ck, output in $T/job
# and its log in $T/job.log.
dash_job() {
	$P run --mode async --servers 1 --workers 2 --model mlp:16 \
		--data synthetic:2000 --batch 32 --steps "$1" \
		--delay "uniform:$2:$2" --evals-per-epoch 4 --validation 10% \
		--checkpoint-dir "$T/ck" --checkpoint-every "$3" --dashboard \
		--out "$T/job" >"$T/job.log" 2>&1 &
	pid=$!
}
