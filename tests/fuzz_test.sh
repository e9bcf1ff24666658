#!/bin/sh
# tests/fuzz_test.sh - a short bounded libFuzzer run of each harness in
# tests/fuzz (the decoder, the server's request handler) from the kept
# corpus, under ASan and UBSan: any crash, leak or undefined behaviour
# fails the case. `make fuzz` runs them longer. Needs clang (scripts/deps.sh
# installs it); without it the cases are skipped and say so.
cd "$(dirname "$0")/.." || exit 2
. tests/lib.sh
SECONDS_EACH=${FUZZ_TEST_SECONDS:-12}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-fuzz-XXXXXX")
trap 'rm -rf "$T"' EXIT

if ! command -v clang >/dev/null 2>&1; then
	echo "skip test_fuzz_*: clang is not installed"
	exit 0
fi
if ! make -s -j"$(nproc)" --no-print-directory fuzz-build >"$T/build.log" 2>&1; then
	no test_fuzz_build "make fuzz-build failed" "$T/build.log"
	exit 1
fi
# Both harnesses at once, one a core: the run is bounded by time.
for f in decode server; do
	mkdir -p "$T/$f"
	build/fuzz/fuzz_$f -max_total_time="$SECONDS_EACH" -close_fd_mask=2 \
		-artifact_prefix="$T/$f-" "$T/$f" "tests/fuzz/corpus/$f" \
		>"$T/$f.log" 2>&1 &
	echo $! >"$T/$f.pid"
done
for f in decode server; do
	n=test_fuzz_$f
	wait "$(cat "$T/$f.pid")"
	rc=$?
	runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$T/$f.log")
	if [ "$rc" = 0 ] && [ "${runs:-0}" -gt 1000 ]; then
		ok "$n"
	else
		no "$n" "exit $rc after '${runs}' runs" "$T/$f.log"
	fi
done
