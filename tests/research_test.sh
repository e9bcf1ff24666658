#!/bin/sh
# tests/research_test.sh - the research toolkit, checked from real runs'
# logs: the ssp bound, backup workers under a straggler, seeded delays,
# the lr schedule, and divergence. Prints "ok NAME" / "FAIL NAME" lines.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-rs-XXXXXX")
trap 'rm -rf "$T"' EXIT
D="--data synthetic:1200 --model mlp:32 --seed 7"

. tests/lib.sh

test_rs_ssp_bound() {
	# Worker 2 is slow; with s=2 nobody may run more than 2 steps ahead
	# of it, where async lets the others run far ahead.
	n=test_rs_ssp_bound
	for m in "ssp --staleness 2" async; do
		o="$T/$(echo "$m" | cut -c1-3)"
		$P run --mode $m --servers 2 --workers 3 $D --batch 48 \
			--steps 30 --lr 0.1 --straggler 2:20 --out "$o" \
			>"$o.log" 2>&1 || { no $n "$m run failed" "$o.log"; return; }
	done
	ssp=$(json max_lead "$T/ssp/server-0.json")
	asy=$(json max_lead "$T/asy/server-0.json")
	s1=$(json max_lead "$T/ssp/server-1.json")
	if [ "$ssp" -le 2 ] && [ "$s1" -le 2 ] && [ "$asy" -gt 2 ]; then
		ok $n
	else
		no $n "ssp leads $ssp/$s1 (bound 2), async lead $asy"
	fi
	idle=$(json idle_fraction "$T/ssp/summary.json")
	awk "BEGIN { exit !($idle > 0) }" && ok test_rs_ssp_idle_fraction ||
		no test_rs_ssp_idle_fraction "idle_fraction is '$idle'"
}

test_rs_backup_worker() {
	# Worker 2 sleeps a second every step. Plain sync waits for it every
	# step; with one backup worker the steps close without it: gradients
	# are dropped, and worker 2, skipping to the open step, computes
	# fewer than the job's 100 (counted, not timed). 100
	# steps, not 10: with 10 the other two could finish (about 0.3 s)
	# before worker 2's process had even said hello, which then had
	# nothing left to push, and no gradient was dropped.
	n=test_rs_backup_worker
	$P run --mode sync --backup-workers 1 --servers 1 --workers 3 $D \
		--batch 48 --steps 100 --lr 0.1 --straggler 2:1000 \
		--out "$T/bk" >"$T/bk.log" 2>&1 ||
		{ no $n "run failed" "$T/bk.log"; return; }
	rows=$(($(wc -l <"$T/bk/worker-2.csv") - 1))
	dr=$(json dropped_gradients "$T/bk/summary.json")
	ver=$(json final_version "$T/bk/summary.json")
	# Skipping is what backup workers are for: the job is sound.
	how=$(jstr outcome "$T/bk/summary.json")
	if [ "$rows" -lt 100 ] && [ "$dr" -gt 0 ] && [ "$ver" = 100 ] &&
		[ "$how" = ok ]; then
		ok $n
	else
		no $n "worker 2 computed $rows of 100 steps, dropped $dr, version $ver, outcome '$how'"
	fi
}

test_rs_delays_seeded() {
	n=test_rs_delays_seeded
	for k in a b; do
		$P run --mode async --servers 1 --workers 2 $D --batch 32 \
			--steps 15 --delay exp:3 --out "$T/d$k" >"$T/d$k.log" 2>&1 ||
			{ no $n "run $k failed" "$T/d$k.log"; return; }
	done
	a=$(cut -d, -f11 "$T/da/worker-1.csv" | tail -n +2)
	b=$(cut -d, -f11 "$T/db/worker-1.csv" | tail -n +2)
	distinct=$(echo "$a" | sort -u | wc -l)
	[ -n "$a" ] && [ "$a" = "$b" ] && [ "$distinct" -gt 5 ] && ok $n ||
		no $n "delays differ between runs or do not vary"
}

test_rs_lr_schedule() {
	# linear scaling: 0.2 x 64/256 = 0.05; warm-up over one epoch of
	# 1200/64 = 18 steps: step k (1-based) uses 0.05 x k/18.
	n=test_rs_lr_schedule
	$P run --mode sync --servers 2 --workers 2 $D --batch 64 --steps 25 \
		--lr 0.2 --lr-scaling linear --warmup-epochs 1 --out "$T/lr" \
		>"$T/lr.log" 2>&1 || { no $n "run failed" "$T/lr.log"; return; }
	bad=$(awk -F, 'NR > 1 {
		want = ($1 < 18) ? 0.05 * $1 / 18 : 0.05
		d = $10 - want; if (d < 0) d = -d
		if (d > 1e-6) bad++ } END { print bad + 0 }' "$T/lr/worker-1.csv")
	[ "$bad" = 0 ] && ok $n || no $n "$bad rows with the wrong lr"
}

test_rs_divergence_reported() {
	n=test_rs_divergence_reported
	$P run --mode async --servers 1 --workers 2 $D --batch 32 --steps 400 \
		--lr 200 --out "$T/dv" >"$T/dv.log" 2>&1
	rc=$?
	d=$(json diverged "$T/dv/summary.json")
	[ "$rc" = 3 ] && [ "$d" = true ] && grep -q "DIVERGED" "$T/dv.log" &&
		ok $n || no $n "exit $rc, diverged '$d'" "$T/dv.log"
}

test_rs_ssp_bound
test_rs_backup_worker
test_rs_delays_seeded
test_rs_lr_schedule
test_rs_divergence_reported
