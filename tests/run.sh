#!/bin/sh
# tests/run.sh - run the test programs of `make test` and count the cases.
#
#   sh tests/run.sh                  every program, once
#   sh tests/run.sh PROG...          only those (labels as listed below,
#                                    or shell patterns: 'asan-*')
#   sh tests/run.sh --loop N PROG... each chosen program N times, then
#                                    how often each case failed
#   sh tests/run.sh --list           the labels, one a line
#
# Unit tests run as built and under AddressSanitizer + UBSan; the server
# process test runs against both builds of pstrain; then the
# multi-process job tests. Each case prints "ok NAME", "FAIL NAME" or
# "skip NAME: why". Each program ends with a line "k/N LABEL: P passed,
# F failed, S s"; one still running says so every HEARTBEAT_S seconds.
# The last line is "N passed, N failed" (", N skipped"). Output of each
# program: build/test-logs/LABEL.log.
cd "$(dirname "$0")/.." || exit 2
logs=build/test-logs
# Leaks of the nng 1.5.2 bug that tests/lsan.supp explains are not ours.
LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan.supp"
export LSAN_OPTIONS
mkdir -p "$logs"

# A test program that runs this long has hung (the slowest takes about
# two minutes on a busy machine): it is stopped and counted as a failure,
# so that make test ends.
TEST_LIMIT_S=${TEST_LIMIT_S:-900}
HEARTBEAT_S=${HEARTBEAT_S:-30}

# programs: every test program, a line each: LABEL COMMAND...
programs() {
	for t in build/tests/*_test; do
		case $t in */proc_*) continue ;; esac
		echo "$(basename "$t") $t"
	done
	for t in build/asan/tests/*_test; do
		echo "asan-$(basename "$t") env ASAN_OPTIONS=detect_leaks=1 $t"
	done
	cat <<'EOF'
proc_server_test env PSTRAIN=bin/pstrain build/tests/proc_server_test
asan-proc_server_test env PSTRAIN=build/asan/pstrain build/tests/proc_server_test
prefetch_test sh tests/prefetch_test.sh
mp_test sh tests/mp_test.sh
allreduce_test sh tests/allreduce_test.sh
research_test sh tests/research_test.sh
tables_test sh tests/tables_test.sh
asan-tables_test env PSTRAIN=build/asan/pstrain sh tests/tables_test.sh
record_test sh tests/record_test.sh
compare_test sh tests/compare_test.sh
ckpt_test sh tests/ckpt_test.sh
shm_test sh tests/shm_test.sh
asan-shm_test env PSTRAIN=build/asan/pstrain sh tests/shm_test.sh
tboard_test sh tests/tboard_test.sh
asan-tboard_test env PSTRAIN=build/asan/pstrain sh tests/tboard_test.sh
dash_test sh tests/dash_test.sh
asan-dash_test env PSTRAIN=build/asan/pstrain sh tests/dash_test.sh
dash_browser_test sh tests/dash_browser_test.sh
hosts_test sh tests/hosts_test.sh
asan-hosts_test env PSTRAIN=build/asan/pstrain sh tests/hosts_test.sh
slurm_test bash tests/slurm_test.sh
netns_test bash tests/netns_test.sh
link_test sh tests/link_test.sh
mpi_test bash tests/mpi_test.sh
attack_test sh tests/attack_test.sh
hygiene_test sh tests/hygiene_test.sh
library_test sh tests/library_test.sh
pypkg_test sh tests/pypkg_test.sh
torch_test sh tests/torch_test.sh
bench_test sh tests/bench_test.sh
fuzz_test sh tests/fuzz_test.sh
tls_test sh tests/tls_test.sh
asan-tls_test env PSTRAIN=build/asan/pstrain sh tests/tls_test.sh
EOF
}

loops=1
case ${1:-} in
--list)
	programs | cut -d' ' -f1
	exit 0
	;;
--loop)
	loops=${2:-}
	case $loops in '' | *[!0-9]*)
		echo "tests/run.sh: --loop takes a count of rounds" >&2
		exit 2
		;;
	esac
	shift 2
	;;
esac

# matches PAT: some program's label matches the shell pattern PAT.
matches() {
	for l in $(programs | cut -d' ' -f1); do
		# shellcheck disable=SC2254
		case $l in $1) return 0 ;; esac
	done
	return 1
}
for pat in "$@"; do
	matches "$pat" || {
		echo "tests/run.sh: no test program matches $pat" \
			"(sh tests/run.sh --list names them)" >&2
		exit 2
	}
done

# The chosen programs, in the table's order.
chosen="$logs/chosen"
programs | while read -r label cmd; do
	want=$#
	for pat in "$@"; do
		# shellcheck disable=SC2254
		case $label in $pat) want=0 ;; esac
	done
	[ "$want" -eq 0 ] && echo "$label $cmd"
done >"$chosen"
total=$(($(wc -l <"$chosen") * loops))

pass=0
fail=0
skip=0
k=0
cases="$logs/cases"
: >"$cases"
t_start=$(date +%s)

# heartbeat PID LABEL T0 OUT: while PID runs, a line every HEARTBEAT_S
# seconds, so that a long program is never silent.
heartbeat() {
	while sleep "$HEARTBEAT_S" >/dev/null 2>&1; do
		kill -0 "$1" 2>/dev/null || exit 0
		echo "$k/$total $2: running, $(($(date +%s) - $3)) s," \
			"$(grep -c '^ok ' "$4") passed so far"
	done
}

# run LABEL COMMAND...: run one test program and count its cases.
run() {
	label=$1
	shift
	k=$((k + 1))
	out="$logs/$label.log"
	[ "$loops" -gt 1 ] && out="$logs/$label.$round.log"
	t0=$(date +%s)
	timeout -k 10 "$TEST_LIMIT_S" "$@" >"$out" 2>&1 &
	pid=$!
	heartbeat $pid "$label" "$t0" "$out" &
	hb=$!
	wait $pid
	rc=$?
	kill $hb 2>/dev/null
	wait $hb 2>/dev/null
	secs=$(($(date +%s) - t0))
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		echo "FAIL $label: stopped after $TEST_LIMIT_S s (hung?)" >>"$out"
	fi
	p=$(grep -c '^ok ' "$out")
	f=$(grep -c '^FAIL' "$out")
	# A test that cannot run here (no permission, no such program)
	# says "skip: why": counted, never taken for a pass.
	s=$(grep -c '^skip' "$out")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "FAIL $label: exited $rc without naming a case" >>"$out"
	fi
	pass=$((pass + p))
	fail=$((fail + f))
	skip=$((skip + s))
	grep -E '^(ok|FAIL|skip)' "$out" | sed "s|^|$label |" >>"$cases"
	line="$k/$total $label: $p passed, $f failed"
	[ "$s" -gt 0 ] && line="$line, $s skipped"
	echo "$line, $secs s"
	if [ "$f" -gt 0 ]; then
		echo "    from $out:"
		grep -A8 '^FAIL' "$out" | sed 's/^/    /'
		[ "$rc" -ne 0 ] && tail -n 15 "$out" | sed 's/^/    | /'
	elif [ "$s" -gt 0 ]; then
		grep '^skip' "$out" | head -n 3 | sed 's/^/    /'
	fi
}

round=1
while [ "$round" -le "$loops" ]; do
	while read -r label cmd; do
		# shellcheck disable=SC2086
		run "$label" $cmd </dev/null
	done <"$chosen"
	round=$((round + 1))
done

if [ "$loops" -gt 1 ]; then
	# Each case: how many of the rounds it failed, most first.
	echo "cases over $loops rounds (failed of run):"
	sed -E 's/^([^ ]+) (ok|FAIL|skip):? ([^ :]+).*/\1 \3 \2/' "$cases" |
		awk '{ key = $1 " " $2; n[key]++; if ($3 == "FAIL") f[key]++ }
		END { for (c in n) printf "%d %d %s\n", f[c], n[c], c }' |
		sort -k1,1nr -k3 |
		awk '{ printf "    %s: %d of %d failed\n", $3 " " $4, $1, $2 }'
fi
echo "time: $(($(date +%s) - t_start)) s"
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
