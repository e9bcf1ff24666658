#!/bin/sh
# tests/bench_test.sh - make bench runs end to end and reports every
# figure (one short round; no figure is judged: nothing is timed here).
cd "$(dirname "$0")/.." || exit 2
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-bt-XXXXXX")
trap 'rm -rf "$T"' EXIT
. tests/lib.sh
n=test_bench_reports_every_figure
if BENCH_ROUNDS=1 BENCH_STEPS=20 BENCH_OUT="$T/bench.json" sh bench/run.sh \
	>"$T/bench.log" 2>&1 &&
	python3 -c '
import json, math, sys
d = json.load(open(sys.argv[1]))
c = d["communication"]
assert len(c) == 6, c
for r in c:
    for k in ("raw_nng_us", "pstrain_us", "speed_vs_raw"):
        assert math.isfinite(r[k]), r
t = d["training"]
assert all(math.isfinite(t[k]) for k in ("solo_samples_per_s",
    "pstrain_1x1_samples_per_s", "pstrain_vs_solo")), t
assert d["record"]["openblas_core"], d["record"]
' "$T/bench.json" 2>"$T/check.log"; then
	ok $n
else
	no $n "bench failed or left a figure out" "$T/bench.log"
	cat "$T/check.log"
fi
