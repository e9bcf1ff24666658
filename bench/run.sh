#!/bin/sh
# bench/run.sh - make bench: pstrain against baselines measured in the
# same run, rounds interleaved, medians reported (docs/PERFORMANCE.md).
#  1. communication: a pushpull of n floats through one server (pstrain.h)
#     against a raw nng REQ/REP round trip of the same bytes, ipc and tcp,
#     at the sizes of a tiny model, mlp:256,128 and mlp:2048,2048;
#  2. training: a 1 server x 1 worker sync job against the same model
#     trained in one process with no servers (bench/solo.c), samples/s
#     of training time (evaluation excluded);
#  3. PyTorch, when python3-torch is installed (said when it is not).
# Writes build/bench/bench.json (BENCH_OUT to change) with the machine
# record. BENCH_ROUNDS (default 5) rounds each.
cd "$(dirname "$0")/.." || exit 2
P=bin/pstrain
R=${BENCH_ROUNDS:-5}
OUT=${BENCH_OUT:-build/bench/bench.json}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-bench-XXXXXX")
trap 'rm -rf "$T"' EXIT
PSTRAIN_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export PSTRAIN_SECRET OPENBLAS_NUM_THREADS=1

# median: the median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan";
	else if (NR % 2) print v[(NR + 1) / 2];
	else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "pstrain bench: $R interleaved rounds per figure; machine record below"
json="{\n  \"rounds\": $R,\n  \"communication\": ["
sep=""
printf '\n%-5s %-22s %12s %12s %8s\n' transport size raw_nng_us pstrain_us speed
# name floats iterations
for tr in ipc tcp; do
	for spec in "tiny_2.6KB 650 2000" "mlp256x128_0.94MB 235146 100" \
		"mlp2048x2048_17.4MB 4350000 8"; do
		set -- $spec
		if [ $tr = ipc ]; then url="ipc://$T/c"; else url=tcp://127.0.0.1; fi
		build/bench/comm "$url" "$2" "$R" "$3" >"$T/c.txt" 2>"$T/c.err" ||
			{ echo "bench: comm failed:"; cat "$T/c.err"; exit 1; }
		raw=$(awk '{print $1}' "$T/c.txt" | median)
		ps=$(awk '{print $2}' "$T/c.txt" | median)
		# speed: raw time / pstrain time per round, median (1 = as fast)
		sp=$(awk '{print $1 / $2}' "$T/c.txt" | median)
		printf '%-5s %-22s %12.1f %12.1f %7.2fx\n' $tr "$1" "$raw" "$ps" "$sp"
		json="$json$sep\n    {\"transport\": \"$tr\", \"size\": \"$1\", \"floats\": $2, \"raw_nng_us\": $raw, \"pstrain_us\": $ps, \"speed_vs_raw\": $sp}"
		sep=","
	done
done
json="$json\n  ],"

# Training: the same job as pstrain run and as one process.
M="--model mlp:256,128 --data fashion-mnist --batch 256 --seed 1 --lr 0.1"
STEPS=${BENCH_STEPS:-600}
: >"$T/solo.txt"
: >"$T/ps.txt"
i=0
while [ $i -lt "$R" ]; do
	build/bench/solo $M --steps "$STEPS" | awk '{print $2}' >>"$T/solo.txt" ||
		exit 1
	rm -rf "$T/run"
	$P run --mode sync --servers 1 --workers 1 $M --steps "$STEPS" \
		--eval-every 1000000 --out "$T/run" >"$T/run.log" 2>&1 ||
		{ echo "bench: pstrain run failed:"; tail "$T/run.log"; exit 1; }
	sed -n 's/^  "samples_per_s": \([0-9.e+]*\),*$/\1/p' \
		"$T/run/summary.json" >>"$T/ps.txt"
	i=$((i + 1))
done
solo=$(median <"$T/solo.txt")
ps=$(median <"$T/ps.txt")
paste "$T/solo.txt" "$T/ps.txt" | awk '{print $2 / $1}' >"$T/r.txt"
ratio=$(median <"$T/r.txt")
printf '\n%-44s %12s\n' "training, mlp:256,128, batch 256, $STEPS steps" samples/s
printf '%-44s %12.0f\n' "one process, no servers (bench/solo)" "$solo"
printf '%-44s %12.0f  %.2fx of solo\n' "pstrain sync, 1 server x 1 worker" "$ps" "$ratio"
json="$json\n  \"training\": {\"model\": \"mlp:256,128\", \"batch\": 256, \"steps\": $STEPS, \"solo_samples_per_s\": $solo, \"pstrain_1x1_samples_per_s\": $ps, \"pstrain_vs_solo\": $ratio},"

if python3 -c 'import torch' 2>/dev/null; then
	torch="installed, but the PyTorch and DDP comparison is not written yet"
else
	torch="not installed (Debian: python3-torch); PyTorch and DDP not compared"
fi
printf '\nPyTorch: %s\n' "$torch"
json="$json\n  \"pytorch\": \"$torch\","

# The machine record, as every run keeps it.
rec=$(sed -n '/^  "record": {/,/^  }/p' "$T/run/summary.json" | sed '1d;$d')
printf '\nmachine:\n%s\n' "$(echo "$rec" | sed 's/^    /  /')"
json="$json\n  \"record\": {\n$rec\n  }\n}"
mkdir -p "$(dirname "$OUT")"
printf "$json\n" >"$OUT"
echo "written: $OUT"
