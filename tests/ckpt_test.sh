#!/bin/sh
# tests/ckpt_test.sh - checkpoints, --resume and dead servers with real
# processes and real kill -9: a stopped and resumed sync job ends
# bit-identical to one that never stopped; a truncated or mismatched
# checkpoint is refused by name and an older complete one is used; a
# server killed mid-job, or mid-checkpoint, is restarted and its workers
# reconnect; an async job resumes where its workers were; failed
# checkpoint writes reach the user, and checkpoints are private.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
# The test hooks (PSTRAIN_TEST_*, common/testhook.h) are only in the
# test build of pstrain.
H=${PSTRAIN:-build/tests/pstrain}
DIFF=build/tests/proc_modeldiff
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-ck-XXXXXX")
trap 'rm -rf "$T"' EXIT
. tests/lib.sh
J="--mode sync --servers 2 --workers 2 --data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2 --batch 32 --optimizer momentum:0.9"

# kill_server_at DIR FILE RANK FLAGS...: run a job with --out DIR in the
# background, kill -9 its server RANK once FILE exists (bounded wait),
# and wait for the launcher, whose exit status this returns.
kill_server_at() {
	d=$1 f=$2 r=$3
	shift 3
	$P run "$@" --out "$d" >"$d.log" 2>&1 &
	pid=$!
	i=0
	while [ "$i" -lt 2400 ] && ! [ -e "$f" ]; do
		sleep 0.05
		i=$((i + 1))
	done
	pkill -9 -f -- "^pstrain server .* --out $d .*--rank $r( |$)"
	wait $pid
}

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
	cp -r "$T/ck" "$T/ck-again"
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

test_ck_resume_same_out() {
	# Resumed into the first part's --out, the workers append steps
	# 21..40 to their CSVs, and the summary counts only this job's
	# work: 20 steps x 32 examples, from version 20.
	n=test_ck_resume_same_out
	[ -d "$T/ck-again" ] || { no $n "no checkpoints to resume from"; return; }
	$P run $J --steps 40 --resume "$T/ck-again" --out "$T/part" \
		>"$T/again.log" 2>&1 ||
		{ no $n "resume failed" "$T/again.log"; return; }
	s="$T/part/summary.json"
	rows=$(($(wc -l <"$T/part/worker-1.csv") - 1))
	last=$(tail -n 1 "$T/part/worker-1.csv" | cut -d, -f1)
	if [ "$(json resumed_from "$s")" = 20 ] &&
		[ "$(json samples "$s")" = 640 ] &&
		[ "$rows" = 45 ] && [ "$last" = 40 ] &&
		grep -q "resumed from version 20" "$T/again.log"; then
		ok $n
	else
		no $n "resumed_from $(json resumed_from "$s"), samples $(json samples "$s"), $rows rows ending at $last" "$T/again.log"
	fi
}

test_ck_truncated_refused() {
	n=test_ck_truncated_refused
	f="$T/ck-copy/server-1-v20.ckpt"
	[ -f "$f" ] || { no $n "no checkpoint $f to truncate"; return; }
	truncate -s 100 "$f"
	# A newer temporary file that a killed writer left is no checkpoint.
	echo partial >"$T/ck-copy/server-0-v30.ckpt.tmp"
	$P run $J --steps 40 --resume "$T/ck-copy" --out "$T/res2" \
		--save-model "$T/res2/m.bin" >"$T/res2.log" 2>&1 ||
		{ no $n "resume failed" "$T/res2.log"; return; }
	if grep -q "refusing checkpoint 20: $f: truncated" "$T/res2.log" &&
		grep -q "ignoring $T/ck-copy/server-0-v30.ckpt.tmp: an unfinished write" "$T/res2.log" &&
		! grep -q "No such file" "$T/res2.log" &&
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
	kill_server_at "$d" "$d/ck/server-1-v40.ckpt" 1 $J --steps 400 \
		--checkpoint-dir "$d/ck" --checkpoint-every 20 \
		--delay uniform:3:3 --restart-servers 1 --save-model "$d/m.bin"
	rc=$?
	$P run $J --steps 400 --out "$T/srv-ref" --save-model "$T/srv-ref/m.bin" \
		>"$T/srv-ref.log" 2>&1
	rs=$(json server_restarts "$d/summary.json")
	# The workers were not restarted: they reconnected.
	if [ "$rc" = 0 ] && [ "$rs" = 1 ] &&
		grep -q "restarting every server from checkpoint version" \
			"$d.log" && grep -q "rejoining" "$d/worker-0.log" &&
		! grep -q "worker 0 failed" "$d.log" &&
		$DIFF "$T/srv-ref/m.bin" "$d/m.bin" 0 >"$T/diff2.log"; then
		ok $n
	else
		no $n "exit $rc, restarts '$rs': $(cat "$T/diff2.log" 2>/dev/null)" "$d.log"
	fi
}

# restarted_shm NAME SERVERS: a server killed in a job over shared
# memory (--transport shm) of SERVERS servers: the restarted server hands
# over a new segment, the workers map it when they rejoin (one server:
# and compute in it again), and the model is bit-identical to the ipc
# job's that never failed (the server count changes no value in sync).
restarted_shm() {
	n=$1 r=$(($2 - 1))
	d="$T/$n"
	[ -f "$T/srv-ref/m.bin" ] || { no $n "no reference model"; return; }
	kill_server_at "$d" "$d/ck/server-$r-v40.ckpt" $r $J --steps 400 \
		--checkpoint-dir "$d/ck" --checkpoint-every 20 \
		--delay uniform:3:3 --restart-servers 1 --save-model "$d/m.bin" \
		--transport shm --servers "$2"
	rc=$?
	rs=$(json server_restarts "$d/summary.json")
	# server-R.log is the restarted server's (each start truncates it):
	# worker 0 handed its segment over to it.
	maps=$(grep -c "worker 0's pushes are read in shared memory" \
		"$d/server-$r.log")
	# Worker 0 computes in shared memory, from the start and again
	# after it rejoined (its view then shows the restarted server's
	# segment).
	inplace=$(grep -c "computes in shared memory" "$d/worker-0.log")
	if [ "$rc" = 0 ] && [ "$rs" = 1 ] && [ "$maps" -ge 1 ] &&
		[ "$inplace" -ge 2 ] &&
		grep -q "rejoining" "$d/worker-0.log" &&
		$DIFF "$T/srv-ref/m.bin" "$d/m.bin" 0 >"$d.diff"; then
		ok $n
	else
		no $n "exit $rc, restarts '$rs', the restarted server mapped worker 0's segment $maps times, worker 0 computed in place $inplace times: $(cat "$d.diff" 2>/dev/null)" "$d.log"
	fi
}

test_ck_dead_server_restarted_shm() {
	restarted_shm test_ck_dead_server_restarted_shm 2
	restarted_shm test_ck_dead_server_restarted_shm_one 1
}

test_ck_killed_while_writing() {
	# kill -9 a server while it writes a checkpoint (the test hook holds
	# it halfway through its temporary file): the half-written file is
	# never used, the previous checkpoint is, and the job ends
	# bit-identical to the job that never failed.
	n=test_ck_killed_while_writing
	d="$T/mid"
	PSTRAIN_TEST_CKPT_STALL=40:1500 $H run $J --steps 400 \
		--checkpoint-dir "$d/ck" --checkpoint-every 20 --restart-servers 1 \
		--out "$d" --save-model "$d/m.bin" >"$d.log" 2>&1 &
	pid=$!
	i=0
	while [ "$i" -lt 2400 ] && ! [ -f "$d/ck/server-1-v40.ckpt.tmp" ]; do
		sleep 0.05
		i=$((i + 1))
	done
	[ -f "$d/ck/server-1-v40.ckpt" ] && { no $n "the write was not held"; wait $pid; return; }
	pkill -9 -f -- "^pstrain server .* --out $d .*--rank 1( |$)"
	wait $pid
	rc=$?
	tmp=$(ls "$d/ck" | grep -c '\.tmp$')
	if [ "$rc" = 0 ] && [ "$tmp" = 0 ] &&
		grep -q "restarting every server from checkpoint version 20" \
			"$d.log" &&
		$DIFF "$T/srv-ref/m.bin" "$d/m.bin" 0 >"$T/diff3.log"; then
		ok $n
	else
		no $n "exit $rc, $tmp temporary files left: $(cat "$T/diff3.log" 2>/dev/null)" "$d.log"
	fi
}

A="--mode async --servers 2 --workers 3 --data synthetic:4000 --model mlp:32 --seed 3 --lr 0.05 --batch 48"

test_ck_async_server_restarted() {
	# async: only the dead server is restarted, from its own newest
	# checkpoint; the other server and the workers go on, and the job
	# ends about as accurate as one that never failed.
	n=test_ck_async_server_restarted
	d="$T/as"
	kill_server_at "$d" "$d/ck/server-1-v100.ckpt" 1 $A --epochs 4 \
		--checkpoint-dir "$d/ck" --checkpoint-every 50 \
		--restart-servers 1 --delay uniform:2:2
	rc=$?
	$P run $A --epochs 4 --out "$T/as-ref" >"$T/as-ref.log" 2>&1
	acc=$(json final_test_acc "$d/summary.json")
	ref=$(json final_test_acc "$T/as-ref/summary.json")
	rs=$(json server_restarts "$d/summary.json")
	if [ "$rc" = 0 ] && [ "$rs" = 1 ] &&
		grep -q "restarting it from checkpoint version" "$d.log" &&
		grep -q "rejoining" "$d"/worker-*.log &&
		awk "BEGIN { exit !($acc >= $ref - 0.05) }"; then
		ok $n
	else
		no $n "exit $rc, restarts '$rs', accuracy '$acc' against '$ref'" "$d.log"
	fi
}

test_ck_async_resume() {
	# An async job resumes from its checkpoint, each worker at the step
	# the checkpoint recorded for it (its data position), not from 0.
	n=test_ck_async_resume
	d="$T/ar"
	$P run $A --steps 60 --checkpoint-dir "$d/ck" --checkpoint-every 30 \
		--out "$d/part" >"$d.log" 2>&1 ||
		{ no $n "first part failed" "$d.log"; return; }
	$P run $A --steps 120 --resume "$d/ck" --out "$d/res" \
		>"$d/res.log" 2>&1 || { no $n "resume failed" "$d/res.log"; return; }
	first=$(sed -n 2p "$d/res/worker-2.csv" | cut -d, -f1)
	last=$(tail -n 1 "$d/res/worker-2.csv" | cut -d, -f1)
	acc=$(json final_test_acc "$d/res/summary.json")
	if grep -q "resuming from version" "$d/res.log" &&
		[ "${first:-0}" -gt 30 ] && [ "$last" = 120 ] &&
		awk "BEGIN { exit !($acc > 0.5) }"; then
		ok $n
	else
		no $n "worker 2 went from step '$first' to '$last', accuracy '$acc'" "$d/res.log"
	fi
}

test_ck_standalone_reconnect() {
	# By hand, without the launcher: kill -9 the only server of a sync
	# job, start it again a moment later from its newest checkpoint. The
	# workers say what they wait for, reconnect, go on from that step,
	# and end bit-identical to a job that never failed.
	n=test_ck_standalone_reconnect
	c="$T/sa"
	mkdir -p "$c"
	$P secret "$c/secret"
	f="--servers 1 --workers 2 --data synthetic:1200 --model mlp:32 --seed 7 --batch 32 --out $c --secret-file $c/secret"
	srv="$P server $f --lr 0.2 --listen ipc://$c/s0 --checkpoint-dir $c/ck --checkpoint-every 20"
	$srv >"$c/s0.log" 2>&1 &
	$P worker $f --rank 1 --connect "ipc://$c/s0" --steps 300 \
		--delay uniform:3:3 >"$c/w1.log" 2>&1 &
	w1=$!
	$P worker $f --rank 0 --connect "ipc://$c/s0" --steps 300 \
		--delay uniform:3:3 --save-model "$c/m.bin" >"$c/w0.log" 2>&1 &
	w0=$!
	i=0
	while [ "$i" -lt 2400 ] && ! [ -f "$c/ck/server-0-v40.ckpt" ]; do
		sleep 0.05
		i=$((i + 1))
	done
	pkill -9 -f -- "pstrain server .* --listen ipc://$c/s0"
	# Started again once worker 0 says that it waits for it (after a
	# second of waiting): an event, not a guess at how long that takes.
	i=0
	while [ "$i" -lt 2400 ] && ! grep -q "waiting for server 0 at ipc://$c/s0 to come back" "$c/w0.log"; do
		sleep 0.05
		i=$((i + 1))
	done
	v=$(ls "$c/ck" | sed -n 's/^server-0-v\([0-9]*\)\.ckpt$/\1/p' | sort -n | tail -n 1)
	$srv --resume-version "$v" >"$c/s0b.log" 2>&1 &
	s0=$!
	wait $w0; r0=$?
	wait $w1; r1=$?
	# Worker 0 stops the server; do not hang on one it failed to stop.
	i=0
	while [ "$i" -lt 300 ] && kill -0 $s0 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -9 $s0 2>/dev/null
	wait $s0; r2=$?
	$P run --servers 1 --workers 2 --data synthetic:1200 --model mlp:32 \
		--seed 7 --batch 32 --lr 0.2 --steps 300 --out "$c/run" \
		--save-model "$c/run/m.bin" >"$c/run.log" 2>&1
	if [ "$r0$r1$r2" = 000 ] &&
		grep -q "waiting for server 0 at ipc://$c/s0 to come back" "$c/w0.log" &&
		$DIFF "$c/run/m.bin" "$c/m.bin" 0 >"$T/diff4.log"; then
		ok $n
	else
		no $n "exits $r0 $r1 $r2, v$v: $(cat "$T/diff4.log" 2>/dev/null)" "$c/w0.log"
	fi
}

test_ck_write_failures_reported() {
	# Checkpoint writes that fail for real: a folder stands where server
	# 0's temporary files of versions 20 and 30 would go (chmod would
	# not stop root). The job still ends with status 0, and the failures
	# reach the user: counted in summary.json with the last error, and
	# said by the launcher with the newest good checkpoint, which is
	# there with the one before it. Checkpoints and the saved model are
	# their owner's only (0600).
	n=test_ck_write_failures_reported
	d="$T/wf"
	mkdir -p "$d/ck/server-0-v20.ckpt.tmp" "$d/ck/server-0-v30.ckpt.tmp"
	$P run $J --steps 60 --checkpoint-dir "$d/ck" --checkpoint-every 10 \
		--out "$d/out" --save-model "$d/out/m.bin" >"$d.log" 2>&1
	rc=$?
	s="$d/out/summary.json"
	fails=$(json checkpoint_failures "$s")
	err=$(jstr checkpoint_last_error "$s")
	modes=$(stat -c %a "$d"/ck/*.ckpt "$d/out/m.bin" | sort -u | tr '\n' ' ')
	good=0
	for f in server-0-v50 server-0-v60 server-1-v50 server-1-v60; do
		[ -f "$d/ck/$f.ckpt" ] && good=$((good + 1))
	done
	if [ "$rc" = 0 ] && [ "$fails" = 2 ] &&
		[ "$(json checkpoint_failures "$d/out/server-0.json")" = 2 ] &&
		[ "$(json checkpoint_failures "$d/out/server-1.json")" = 0 ] &&
		case $err in "server 0: $d/ck/server-0-v30.ckpt.tmp: Is a directory") true ;; *) false ;; esac &&
		grep -q "^pstrain run: 2 checkpoint writes failed (server 0: $d/ck/server-0-v30.ckpt.tmp: Is a directory); the newest good checkpoint is version 60" "$d.log" &&
		[ "$good" = 4 ] && [ "$modes" = "600 " ]; then
		ok $n
	else
		no $n "exit $rc, $fails failures ('$err'), $good of 4 good checkpoints, modes $modes" "$d.log"
	fi
}

test_ck_write_failures_reported
test_ck_resume_bit_identical
test_ck_resume_same_out
test_ck_dead_server_restarted
test_ck_dead_server_restarted_shm
test_ck_killed_while_writing
test_ck_async_server_restarted
test_ck_async_resume
test_ck_standalone_reconnect
test_ck_truncated_refused
test_ck_mismatch_refused
