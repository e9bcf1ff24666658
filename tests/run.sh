#!/bin/sh
# tests/run.sh - run every test of `make test` and count the cases.
# Unit tests run as built and under AddressSanitizer + UBSan; the server
# process test runs against both builds of pstrain; then the multi-process
# job tests. Each case prints "ok NAME" or "FAIL NAME"; the last line here
# is "N passed, N failed". Output of each program: build/test-logs/.
cd "$(dirname "$0")/.." || exit 2
logs=build/test-logs
# Leaks of the nng 1.5.2 bug that tests/lsan.supp explains are not ours.
LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan.supp"
export LSAN_OPTIONS
mkdir -p "$logs"
pass=0
fail=0
skip=0

# A test program that runs this long has hung (the slowest takes about a
# minute): it is stopped and counted as a failure, so that make test ends.
TEST_LIMIT_S=${TEST_LIMIT_S:-900}

# run LABEL COMMAND...: run one test program and count its cases.
run() {
	label=$1
	shift
	out="$logs/$label.log"
	timeout -k 10 "$TEST_LIMIT_S" "$@" >"$out" 2>&1
	rc=$?
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		echo "FAIL $label: stopped after $TEST_LIMIT_S s (hung?)" >>"$out"
	fi
	p=$(grep -c '^ok ' "$out")
	f=$(grep -c '^FAIL' "$out")
	# A test that cannot run here (no permission, no such program)
	# says "skip: why": counted, never taken for a pass.
	k=$(grep -c '^skip' "$out")
	skip=$((skip + k))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "FAIL $label: exited $rc without naming a case" >>"$out"
	fi
	pass=$((pass + p))
	fail=$((fail + f))
	if [ "$f" -gt 0 ]; then
		echo "$label: $p passed, $f failed; from $out:"
		grep -A8 '^FAIL' "$out" | sed 's/^/    /'
		[ "$rc" -ne 0 ] && tail -n 15 "$out" | sed 's/^/    | /'
	elif [ "$k" -gt 0 ]; then
		echo "$label: $p passed, skipped: $(grep '^skip' "$out" | head -n 1)"
	else
		echo "$label: $p passed"
	fi
}

for t in build/tests/*_test; do
	case $t in */proc_*) continue ;; esac
	run "$(basename "$t")" "$t"
done
for t in build/asan/tests/*_test; do
	run "asan-$(basename "$t")" env ASAN_OPTIONS=detect_leaks=1 "$t"
done
run proc_server_test env PSTRAIN=bin/pstrain build/tests/proc_server_test
run asan-proc_server_test env PSTRAIN=build/asan/pstrain \
	build/tests/proc_server_test
run mp_test sh tests/mp_test.sh
run allreduce_test sh tests/allreduce_test.sh
run research_test sh tests/research_test.sh
run record_test sh tests/record_test.sh
run compare_test sh tests/compare_test.sh
run ckpt_test sh tests/ckpt_test.sh
run tboard_test sh tests/tboard_test.sh
run asan-tboard_test env PSTRAIN=build/asan/pstrain sh tests/tboard_test.sh
run dash_test sh tests/dash_test.sh
run asan-dash_test env PSTRAIN=build/asan/pstrain sh tests/dash_test.sh
run dash_browser_test sh tests/dash_browser_test.sh
run hosts_test sh tests/hosts_test.sh
run asan-hosts_test env PSTRAIN=build/asan/pstrain sh tests/hosts_test.sh
run slurm_test bash tests/slurm_test.sh
run netns_test bash tests/netns_test.sh
run mpi_test bash tests/mpi_test.sh
run attack_test sh tests/attack_test.sh
run hygiene_test sh tests/hygiene_test.sh
run library_test sh tests/library_test.sh
run bench_test sh tests/bench_test.sh
run fuzz_test sh tests/fuzz_test.sh
# TLS against both builds too: handshakes and certificates under ASan.
run tls_test sh tests/tls_test.sh
run asan-tls_test env PSTRAIN=build/asan/pstrain sh tests/tls_test.sh

if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
