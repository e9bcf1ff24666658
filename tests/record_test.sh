#!/bin/sh
# tests/record_test.sh - what makes a run's numbers trustworthy, on real
# jobs: the run record holds every option and the machine, outcomes
# (collapsed) are named, a previous run is not overwritten without
# --force, the validation split is held out and selects the best
# parameters, --matched-lr divides the lr by W, evaluation runs beside
# training, and a full disk is named as the cause of a failed job. Prints "ok NAME" / "FAIL NAME: why" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
# The test hooks (PSTRAIN_TEST_*) are only in the tests' build.
H=${PSTRAIN:-build/tests/pstrain}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-record-XXXXXX")
trap 'rm -rf "$T"' EXIT
D="--data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2 --servers 1"

. tests/lib.sh

# job NAME DIR ARGS...: run a job into DIR; a failed case when it fails.
job() {
	n=$1 d=$2
	shift 2
	# shellcheck disable=SC2086
	$P run $D --out "$d" "$@" >"$d.log" 2>&1 ||
		{ no "$n" "the job failed" "$d.log"; return 1; }
}

test_record_every_option() {
	# Every flag of `pstrain run --help` is in summary.json's config
	# with its effective value, and the record names the machine.
	n=test_record_every_option
	d="$T/rec"
	job $n "$d" --workers 2 --batch 32 --steps 100 --straggler 1:1 \
		--delay exp:0.2 --warmup-epochs 0.5 || return
	s="$d/summary.json"
	for f in $($P run --help | sed -n 's/^  --\([a-z-]*\).*/\1/p'); do
		grep -q "^    \"$f\": " "$s" ||
			{ no $n "config lacks --$f" "$s"; return; }
	done
	for k in command_line version hostname cpu_model cores \
		openblas_core openblas_threads openblas_coretype_env \
		nng_version start_time; do
		grep -q "^    \"$k\": " "$s" ||
			{ no $n "record lacks $k" "$s"; return; }
	done
	v=$($P --version | sed 's/^pstrain //')
	if grep -q "\"version\": \"$v\"" "$s" &&
		grep -q '"straggler": "1:1"' "$s" &&
		grep -q '"warmup-epochs": 0.5,' "$s" &&
		grep -q '"command_line": "pstrain run .*--delay exp:0.2' "$s" &&
		! grep -q '"openblas_core": ""' "$s" &&
		[ "$(jstr outcome "$s")" = ok ]; then
		ok $n
	else
		no $n "record values wrong" "$s"
	fi
}

test_record_collapsed() {
	# A job that never learns (lr 1e-7) ends with its training loss at
	# chance level: outcome collapsed, not ok, and still exit 0.
	n=test_record_collapsed
	d="$T/col"
	job $n "$d" --workers 2 --batch 32 --steps 30 --lr 1e-7 || return
	how=$(jstr outcome "$d/summary.json")
	[ "$how" = collapsed ] && grep -q ": collapsed" "$d.log" ||
		{ no $n "outcome '$how'" "$d/summary.json"; return; }
	# The accuracy floor: twice chance unless given. The same job at
	# lr 0.2 learns (ok); with --acc-floor above its final training
	# accuracy it is collapsed by the floor alone (its loss is well
	# under chance's).
	job $n "$T/fl" --workers 2 --batch 32 --steps 30 || return
	job $n "$T/fl2" --workers 2 --batch 32 --steps 30 --acc-floor 0.99 || return
	s=$T/fl/summary.json s2=$T/fl2/summary.json
	acc=$(json final_train_acc "$s") loss=$(json final_train_loss "$s")
	if [ "$(jstr outcome "$s")" != ok ] || [ "$(json acc_floor "$s")" != 0.2 ] ||
		[ "$(jstr outcome "$s2")" != collapsed ] ||
		[ "$(json acc_floor "$s2")" != 0.99 ] ||
		[ "$(json final_train_acc "$s2")" != "$acc" ] ||
		! awk "BEGIN { exit !($acc < 0.99 && $loss < 0.9 * log(10)) }"; then
		no $n "floor: acc $acc loss $loss, $(jstr outcome "$s2")" "$s2"
		return
	fi
	ok $n
}

test_record_refuses_overwrite() {
	# A second job into the same folder is refused and changes nothing;
	# with --force it replaces the old files, stale ones included.
	n=test_record_refuses_overwrite
	d="$T/ow"
	job $n "$d" --workers 2 --batch 32 --steps 10 || return
	cp "$d/summary.json" "$T/ow.before"
	touch "$d/worker-5.csv"
	$P run $D --workers 2 --batch 32 --steps 12 --out "$d" >"$T/ow2.log" 2>&1
	rc=$?
	[ "$rc" = 2 ] && grep -q -- "--out $d holds a previous run" "$T/ow2.log" &&
		cmp -s "$d/summary.json" "$T/ow.before" ||
		{ no $n "second run: exit $rc" "$T/ow2.log"; return; }
	$P run $D --workers 2 --batch 32 --steps 12 --out "$d" --force \
		>"$T/ow3.log" 2>&1 || { no $n "--force failed" "$T/ow3.log"; return; }
	[ "$(json steps "$d/summary.json")" = 12 ] && [ ! -e "$d/worker-5.csv" ] &&
		ok $n || no $n "--force did not replace the run" "$T/ow3.log"
}

test_record_validation_split() {
	# --validation 10% of 1200: 120 held out, 1080 trained on (16 steps
	# of 64 per epoch); evaluations are on validation, the best of them
	# is what summary.json reports, and the test set is evaluated once
	# at the end for the final and the best parameters.
	n=test_record_validation_split
	d="$T/val"
	job $n "$d" --workers 2 --batch 64 --epochs 3 --validation 10% \
		--evals-per-epoch 4 || return
	s="$d/summary.json"
	h=$(head -n 1 "$d/eval.csv")
	best=$(awk -F, 'NR > 1 && $4 > b { b = $4 } END { printf "%g", b }' \
		"$d/eval.csv")
	rows=$(($(wc -l <"$d/eval.csv") - 1))
	if [ "$(json validation_examples "$s")" = 120 ] &&
		[ "$(json train_examples "$s")" = 1080 ] &&
		[ "$(json steps_per_epoch "$s")" = 16 ] &&
		[ "$h" = "step,wall_s,val_loss,val_acc,worker_step,eval_s,val_auc" ] &&
		[ "$rows" = 12 ] &&
		[ "$(json best_val_acc "$s")" = "$best" ] &&
		[ -n "$(json best_val_test_acc "$s")" ] &&
		[ "$(json best_val_test_acc "$s")" != null ]; then
		ok $n
	else
		no $n "validation fields, eval.csv ($h, $rows rows, best $best)" "$s"
	fi
	$P run $D --workers 2 --batch 64 --steps 5 --validation 1200 \
		--out "$T/val2" >"$T/val2.log" 2>&1
	[ $? = 2 ] && grep -q "validation 1200 holds out" "$T/val2.log" ||
		no "${n}_refused" "--validation 1200 accepted" "$T/val2.log"
}

test_record_matched_lr() {
	# async, W = 4, --lr 0.2 --matched-lr: every gradient applied at 0.05.
	n=test_record_matched_lr
	d="$T/mlr"
	job $n "$d" --mode async --workers 4 --batch 64 --steps 10 \
		--matched-lr || return
	lrs=$(cut -d, -f10 "$d/worker-3.csv" | sed 1d | sort -u)
	[ "$lrs" = 0.05 ] && ok $n || no $n "lr column: $lrs" "$d/worker-3.csv"
	# SGD's match only: with adagrad the run says what lr / W does.
	grep -q "note: --matched-lr" "$d.log" &&
		no "${n}_sgd_note" "a note for sgd" "$d.log"
	job $n "$T/mlr-ada" --mode async --workers 2 --batch 32 --steps 3 \
		--matched-lr --optimizer adagrad || return
	grep -q "note: --matched-lr divides the rate by W.*adagrad" \
		"$T/mlr-ada.log" ||
		no "${n}_adagrad_note" "no note" "$T/mlr-ada.log"
	# --steps with --epochs: one of them would be ignored, so refused,
	# both named; --steps alone runs that many steps.
	$P run $D --mode async --workers 2 --batch 32 --steps 3 --epochs 4 \
		--out "$T/se2" >"$T/se2.log" 2>&1
	rc=$?
	[ $rc = 2 ] && grep -q -- "--steps 3 and --epochs 4: give one" \
		"$T/se2.log" && [ ! -e "$T/se2/summary.json" ] ||
		no "${n}_steps_epochs" "exit $rc" "$T/se2.log"
	job $n "$T/se" --mode async --workers 2 --batch 32 --steps 3 || return
	[ "$(sed -n 's/^  "steps": \([0-9]*\),*$/\1/p' "$T/se/summary.json")" = 3 ] ||
		no "${n}_steps" "not 3 steps" "$T/se/summary.json"
	$P run $D --mode sync --workers 2 --batch 32 --steps 5 --matched-lr \
		--out "$T/mlr2" >"$T/mlr2.log" 2>&1
	[ $? = 2 ] && grep -q "matched-lr need" "$T/mlr2.log" ||
		no "${n}_sync" "sync accepted --matched-lr" "$T/mlr2.log"
}

test_record_eval_beside_training() {
	# Evaluation runs beside training: with every evaluation held back
	# (the test hook PSTRAIN_TEST_EVAL_HOLD) the workers still do all
	# their steps, and eval.csv has no row until it is let go. Then the
	# rows come, each of the parameters worker 0 had when it was due;
	# train_s is the span of the steps, nothing subtracted; nothing
	# waited for the evaluator.
	n=test_record_eval_beside_training
	d="$T/ev"
	go="$T/ev.go"
	PSTRAIN_TEST_EVAL_HOLD=$go $H run --data synthetic:4000 \
		--model mlp:32 --seed 7 --servers 1 --workers 2 --batch 32 \
		--steps 30 --validation 50% --eval-every 5 --out "$d" \
		>"$d.log" 2>&1 &
	pid=$!
	wait_rows "$d/worker-0.csv" 31 && wait_rows "$d/worker-1.csv" 31
	held=$?
	rows=$(grep -c '^[0-9]' "$d/eval.csv")
	touch "$go"
	wait $pid
	rc=$?
	[ "$held" = 0 ] && [ "$rows" = 0 ] ||
		{ no $n "steps done $held, eval rows while held $rows" "$d.log"
		return; }
	[ "$rc" = 0 ] || { no $n "exit $rc" "$d.log"; return; }
	s="$d/summary.json"
	# 5 evaluations in training (steps 5..25) and the final one; each
	# at or after its step's end and before the next step's end.
	awk -F, 'FNR == 1 { next } NR == FNR { end[$1] = $3; next }
		{ n++; if ($5 % 5 != 0 || (($5 + 1) in end &&
			$2 > end[$5 + 1] + 0.0005) || $2 < end[$5] - 0.0005)
			bad = 1 }
		END { exit bad || n != 6 }' "$d/worker-0.csv" "$d/eval.csv" ||
		{ no $n "eval.csv rows against worker-0.csv" "$d/eval.csv"
		return; }
	span=$(cat "$d"/worker-*.csv | awk -F, '$1 ~ /^[0-9]/ {
		b = $3 - $6 / 1000; if (lo == "" || b < lo) lo = b
		if ($3 > hi) hi = $3 } END { printf "%.6f", hi - lo }')
	awk -v t="$(json train_s "$s")" -v span="$span" \
		-v w="$(json eval_wait_s "$s")" 'BEGIN {
		exit !((t - span) ^ 2 < 0.002 ^ 2 && w == 0) }' && ok $n ||
		no $n "train_s $(json train_s "$s"), span $span, eval_wait_s $(json eval_wait_s "$s")" "$s"
}

test_record_server_record_missing() {
	# A server that cannot write its record (a folder stands where
	# server-0.json goes): summary.json's server counts are null, not
	# 0, the missing file is named there and on stderr with the end of
	# the server's log, and the outcome is "damaged". Its steps_by_worker
	# counts the one worker's 5 steps.
	n=test_record_server_record_missing
	mkdir -p "$T/nosrv/server-0.json"
	$P run --servers 1 --workers 1 --model mlp:8 --data synthetic:300 \
		--steps 5 --force --out "$T/nosrv" >"$T/nosrv.log" 2>&1
	rc=$?
	if ! grep -q "nosrv/server-0.json is missing: .*server-0.log ends: server 0: cannot write" "$T/nosrv.log"; then
		no $n "exit $rc, no warning" "$T/nosrv.log"
		return
	fi
	# The launcher bounds a worker's step: 5 planned, and 100 more.
	if ! grep -q "1 workers, steps up to 105$" "$T/nosrv/server-0.log"; then
		no $n "the server's step bound" "$T/nosrv/server-0.log"
		return
	fi
	$PY - "$T/nosrv/summary.json" <<'EOF' && ok $n || no $n "exit $rc, the record" "$T/nosrv.log"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["outcome"] == "damaged", j["outcome"]
assert j["server_records_missing"] == ["server-0.json"], j["server_records_missing"]
for k in ("dropped_gradients", "unauthenticated_requests", "auth_failures",
          "connections_closed", "rank_refusals", "checkpoint_failures",
          "max_staleness_seen"):
    assert j[k] is None, (k, j[k])
assert j["steps_by_worker"] == {"worker-0": 5}, j["steps_by_worker"]
EOF
}

test_record_disk_full() {
	# --out on a full disk (a tmpfs of 48 KiB, mounted in a mount
	# namespace of its own): the job fails, and its output names the
	# file that could not be written and why, although the workers'
	# logs on that disk could not be written either.
	n=test_record_disk_full
	d="$T/full"
	mkdir -p "$d"
	if ! unshare -rm true 2>/dev/null; then
		no $n "cannot make a mount namespace (unshare -rm) here"
		return
	fi
	# (Over ipc: the disk's size is what fills it while the logs are
	# still being written.)
	unshare -rm sh -c 'mount -t tmpfs -o size=48k tmpfs "$1" || exit 99
		shift; exec "$@"' sh "$d" $P run $D --workers 2 --batch 32 \
		--steps 400 --transport ipc --out "$d/r" >"$T/full.log" 2>&1
	rc=$?
	if [ "$rc" = 0 ] || [ "$rc" = 99 ]; then
		no $n "exit $rc" "$T/full.log"
	elif ! grep -q "$d/r/worker-[01].csv: No space left on device" \
		"$T/full.log"; then
		no $n "the full file is not named with its cause" "$T/full.log"
	elif ! grep -q "could not write $d/r/worker-[01].log: No space left on device" \
		"$T/full.log"; then
		no $n "the unwritable log is not named" "$T/full.log"
	else
		ok $n
	fi
}

test_record_short_worker() {
	# A worker that finishes short of the plan, unlost (the test hook
	# PSTRAIN_TEST_STEPS gives worker 1 30 steps of 100, as one misled
	# by a forged step would): the job is damaged, and says which.
	n=test_record_short_worker
	d="$T/short"
	PSTRAIN_TEST_STEPS=1:30 $H run $D --mode async --workers 2 \
		--batch 32 --steps 100 --out "$d" >"$d.log" 2>&1 ||
		{ no $n "the job failed" "$d.log"; return; }
	if [ "$(jstr outcome "$d/summary.json")" = damaged ] &&
		grep -q '"worker-1": 30' "$d/summary.json" &&
		grep -q "worker 1 computed 30 of the 100 steps planned" "$d.log"
	then
		ok $n
	else
		no $n "not damaged, or not said why" "$d.log"
	fi
}

# An OpenBLAS kernel older than the CPU's vectors allow gets a note that
# names it and the OPENBLAS_CORETYPE to set; the kernel the CPU is made
# for gets none. The CPU's level is read here from /proc/cpuinfo.
test_record_blas_kernel() {
	n=test_record_blas_kernel
	f=$(grep -m1 '^flags' /proc/cpuinfo)
	has() { echo "$f" | grep -qw "$1"; }
	if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
		best=SkylakeX
	elif has avx2 && has fma; then
		best=Haswell
	elif has avx; then
		best=Sandybridge
	else
		best=""
	fi
	OPENBLAS_CORETYPE=Prescott job $n "$T/bk1" --steps 2 || return
	if [ -n "$best" ]; then
		grep -q "note: OpenBLAS uses its Prescott kernel.*OPENBLAS_CORETYPE=$best" \
			"$T/bk1.log" || { no $n "no note" "$T/bk1.log"; return; }
		OPENBLAS_CORETYPE=$best job $n "$T/bk2" --steps 2 || return
		! grep -q "note: OpenBLAS" "$T/bk2.log" ||
			{ no $n "a note for $best" "$T/bk2.log"; return; }
	elif grep -q "note: OpenBLAS" "$T/bk1.log"; then
		no $n "a note on a CPU without AVX" "$T/bk1.log"
		return
	fi
	ok $n
}

test_record_worker_threads() {
	# --worker-threads 2: each worker's OpenBLAS has two threads (its
	# log says so), the server keeps one, and the record has the flag.
	n=test_record_worker_threads
	job $n "$T/wt2" --workers 2 --batch 32 --steps 2 --worker-threads 2 ||
		return
	for w in 0 1; do
		grep -q "worker $w: 2 OpenBLAS threads" "$T/wt2/worker-$w.log" ||
			{ no $n "worker $w's log" "$T/wt2/worker-$w.log"; return; }
	done
	! grep -q "OpenBLAS threads" "$T/wt2/server-0.log" ||
		{ no $n "the server has more than one" "$T/wt2/server-0.log"
		return; }
	grep -q '"worker-threads": 2' "$T/wt2/summary.json" ||
		{ no $n "not in the record" "$T/wt2/summary.json"; return; }
	job $n "$T/wt1" --workers 2 --batch 32 --steps 2 || return
	! grep -q "OpenBLAS threads" "$T/wt1/worker-0.log" ||
		{ no $n "more than one without the flag" "$T/wt1/worker-0.log"
		return; }
	ok $n
}

test_record_every_option
test_record_worker_threads
test_record_short_worker
test_record_disk_full
test_record_server_record_missing
test_record_collapsed
test_record_refuses_overwrite
test_record_validation_split
test_record_matched_lr
test_record_eval_beside_training
test_record_blas_kernel
