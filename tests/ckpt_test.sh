#!/bin/sh
# tests/ckpt_test.sh - checkpoints and --resume with real processes: a
# stopped and resumed sync job ends bit-identical to one that never
# stopped; a truncated or mismatched checkpoint is refused by name and an
# older complete one is used.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
DIFF=build/tests/proc_modeldiff
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-ck-XXXXXX")
trap 'rm -rf "$T"' EXIT
. tests/lib.sh
J="--mode sync --servers 2 --workers 2 --data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2 --batch 32 --optimizer momentum:0.9"

test_ck_resume_bit_identical() {
	n=test_ck_resume_bit_identical
	$P run $J --steps 40 --checkpoint-dir "$T/full" --checkpoint-every 10 \
		--out "$T/full" --save-model "$T/full/m.bin" >"$T/full.log" 2>&1 ||
		{ no $n "uninterrupted run failed" "$T/full.log"; return; }
	# Stop after 25 steps (checkpoints at 10 and 20), then resume.
	$P run $J --steps 25 --checkpoint-dir "$T/ck" --checkpoint-every 10 \
		--out "$T/part" >"$T/part.log" 2>&1 ||
		{ no $n "first part failed" "$T/part.log"; return; }
	cp -r "$T/ck" "$T/ck-copy"
	$P run $J --steps 40 --resume "$T/ck" --out "$T/res" \
		--save-model "$T/res/m.bin" >"$T/res.log" 2>&1 ||
		{ no $n "resume failed" "$T/res.log"; return; }
	if grep -q "resuming from version 20" "$T/res.log" &&
		$DIFF "$T/full/m.bin" "$T/res/m.bin" 0 >"$T/diff.log"; then
		ok $n
	else
		no $n "$(cat "$T/diff.log")" "$T/res.log"
	fi
}

test_ck_truncated_refused() {
	n=test_ck_truncated_refused
	f="$T/ck-copy/server-1-v20.ckpt"
	[ -f "$f" ] || { no $n "no checkpoint $f to truncate"; return; }
	truncate -s 100 "$f"
	$P run $J --steps 40 --resume "$T/ck-copy" --out "$T/res2" \
		--save-model "$T/res2/m.bin" >"$T/res2.log" 2>&1 ||
		{ no $n "resume failed" "$T/res2.log"; return; }
	if grep -q "refusing checkpoint 20: $f: truncated" "$T/res2.log" &&
		grep -q "resuming from version 10" "$T/res2.log" &&
		$DIFF "$T/full/m.bin" "$T/res2/m.bin" 0 >/dev/null; then
		ok $n
	else
		no $n "truncated checkpoint not refused by name" "$T/res2.log"
	fi
}

test_ck_mismatch_refused() {
	n=test_ck_mismatch_refused
	if $P run $J --servers 3 --steps 40 --resume "$T/ck" --out "$T/res3" \
		>"$T/res3.log" 2>&1; then
		no $n "resume with another server count succeeded"
	elif grep -q "server-0-v20.ckpt: written by server 0 of 2" "$T/res3.log"
	then
		ok $n
	else
		no $n "unclear refusal" "$T/res3.log"
	fi
}

test_ck_dead_server_restarted() {
	# kill -9 a server mid-way: the job restarts from the newest complete
	# checkpoint and, being sync, ends bit-identical to the job that
	# never failed.
	n=test_ck_dead_server_restarted
	d="$T/srv"
	# (3 ms per step keeps the job running well past the kill; delays
	# do not change what a sync job computes.)
	$P run $J --steps 400 --checkpoint-dir "$d/ck" --checkpoint-every 20 \
		--delay uniform:3:3 --restart-servers 1 --out "$d" \
		--save-model "$d/m.bin" \
		>"$d.log" 2>&1 &
	pid=$!
	i=0
	while [ "$i" -lt 600 ] && ! ls "$d/ck"/server-1-v40.ckpt >/dev/null 2>&1
	do
		sleep 0.05
		i=$((i + 1))
	done
	pkill -9 -f -- "^pstrain server .* --out $d .*--rank 1( |$)"
	wait $pid
	rc=$?
	$P run $J --steps 400 --out "$T/srv-ref" --save-model "$T/srv-ref/m.bin" \
		>"$T/srv-ref.log" 2>&1
	rs=$(json server_restarts "$d/summary.json")
	if [ "$rc" = 0 ] && [ "$rs" = 1 ] &&
		grep -q "restarting from version" "$d.log" &&
		$DIFF "$T/srv-ref/m.bin" "$d/m.bin" 0 >"$T/diff2.log"; then
		ok $n
	else
		no $n "exit $rc, restarts '$rs': $(cat "$T/diff2.log" 2>/dev/null)" "$d.log"
	fi
}

test_ck_resume_bit_identical
test_ck_dead_server_restarted
test_ck_truncated_refused
test_ck_mismatch_refused
