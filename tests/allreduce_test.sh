#!/bin/sh
# tests/allreduce_test.sh - --mode allreduce as whole jobs: real worker
# processes summing their gradients in a ring over real nng sockets, no
# servers. Equal to sync parameter servers (bit for bit at 2 workers,
# also when sync pushpulls go in pieces, to
# 1e-4 at 3 over 200 steps), deterministic, its outputs, what it refuses,
# --resume and --restart-workers giving the uninterrupted model, a dead
# worker ending the job, a stranger kept out of the ring, and the ring
# over tcp (pstrain run, by hand, pstrain node, a cluster file) equal to
# the ipc job.
# Prints "ok NAME" / "FAIL NAME" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
DIFF=build/tests/proc_modeldiff
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-ar-XXXXXX")
trap 'rm -rf "$T"' EXIT
D="--data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2"

. tests/lib.sh

# kill_rank1 DIR ROWS: once DIR/worker-1.csv holds more than ROWS lines
# (waited for at most 30 s), kill -9 that job's worker 1.
kill_rank1() {
	i=0
	while [ "$i" -lt 2400 ] && ! { [ -f "$1/worker-1.csv" ] &&
		[ "$(wc -l <"$1/worker-1.csv")" -gt "$2" ]; }; do
		sleep 0.05
		i=$((i + 1))
	done
	pkill -9 -f -- "^pstrain worker .* --out $1 .*--rank 1( |$)"
}

# job NAME MODE W ARGS...: a 200-step job into $T/NAME, its model saved
job() {
	name=$1 mode=$2 w=$3
	shift 3
	$P run --mode "$mode" --workers "$w" $D --batch 48 --steps 200 \
		--out "$T/$name" --save-model "$T/$name/m.bin" "$@" \
		>"$T/$name.log" 2>&1
}

test_ar_equals_sync_w2() {
	# Two workers: each segment's sum is g0 + g1 or g1 + g0, the same
	# float, so the model is the sync job's bit for bit (with momentum:
	# the workers run the servers' optimizer).
	n=test_ar_equals_sync_w2
	job s2 sync 2 --servers 2 --optimizer momentum:0.9 ||
		{ no $n "sync job failed" "$T/s2.log"; return; }
	job a2 allreduce 2 --optimizer momentum:0.9 ||
		{ no $n "allreduce job failed" "$T/a2.log"; return; }
	if $DIFF "$T/s2/m.bin" "$T/a2/m.bin" 0 >"$T/diff.log"; then
		ok $n
	else
		no $n "models differ: $(cat "$T/diff.log")"
	fi
}

test_ar_equals_sync_pieces() {
	# A shard of 614,410 floats: each sync worker's pushpull goes in two
	# pieces over the socket, each applied and answered as soon as both
	# workers have pushed it (client/api.c, ps/sync.c). Still the ring's
	# bits.
	n=test_ar_equals_sync_pieces
	d="--data synthetic:1200 --model mlp:8192 --seed 7 --lr 0.02"
	d="$d --batch 48 --steps 30 --optimizer momentum:0.9 --transport ipc"
	for m in sync allreduce; do
		$P run --mode $m --workers 2 $d --out "$T/pc-$m" \
			--save-model "$T/pc-$m/m.bin" >"$T/pc-$m.log" 2>&1 ||
			{ no $n "$m job failed" "$T/pc-$m.log"; return; }
	done
	ahead=$(sed -n 's/.*"pieces_applied_ahead": \([0-9]*\).*/\1/p' \
		"$T/pc-sync/server-0.json")
	if [ "$ahead" != 60 ]; then
		no $n "server 0 applied '$ahead' pieces ahead, not 2 x 30"
	elif cmp -s "$T/pc-sync/m.bin" "$T/pc-allreduce/m.bin"; then
		ok $n
	else
		no $n "the sync and allreduce models differ"
	fi
}

test_ar_near_sync_w3() {
	# Three workers: segments 1 and 2 are summed in another order than
	# the servers' rank order, so the bits differ, but by rounding only.
	n=test_ar_near_sync_w3
	job s3 sync 3 --servers 1 --lr-scaling linear --warmup-epochs 1 ||
		{ no $n "sync job failed" "$T/s3.log"; return; }
	job a3 allreduce 3 --lr-scaling linear --warmup-epochs 1 ||
		{ no $n "allreduce job failed" "$T/a3.log"; return; }
	if $DIFF "$T/s3/m.bin" "$T/a3/m.bin" 1e-4 >"$T/diff.log"; then
		ok $n
	else
		no $n "models differ: $(cat "$T/diff.log")"
	fi
}

test_ar_deterministic() {
	n=test_ar_deterministic
	job a3b allreduce 3 --lr-scaling linear --warmup-epochs 1 ||
		{ no $n "allreduce job failed" "$T/a3b.log"; return; }
	if cmp -s "$T/a3/m.bin" "$T/a3b/m.bin"; then
		ok $n
	else
		no $n "two runs with seed 7 saved different models"
	fi
}

test_ar_outputs() {
	# One row per step per worker, staleness 0, the ring's time as
	# comm_ms, no server files, and a summary that says what ran.
	n=test_ar_outputs
	d="$T/a3"
	rows=$(awk -F, 'NR > 1' "$d/worker-2.csv" | wc -l)
	stale=$(awk -F, 'FNR > 1 && $9 != 0' "$d"/worker-*.csv | wc -l)
	comm=$(awk -F, 'NR > 1 && $8 > 0' "$d/worker-1.csv" | wc -l)
	mode=$(jstr mode "$d/summary.json")
	servers=$(json servers "$d/summary.json")
	if [ "$rows" = 200 ] && [ "$stale" = 0 ] && [ "$comm" = 200 ] &&
		[ "$mode" = allreduce ] && [ "$servers" = 0 ] &&
		[ -s "$d/final.csv" ] && ! ls "$d"/server-* >/dev/null 2>&1; then
		ok $n
	else
		why="rows $rows, stale rows $stale, comm rows $comm"
		no $n "$why, mode '$mode', servers '$servers'" "$d/summary.json"
	fi
}

test_ar_refusals() {
	# What allreduce does not do is refused by name, before anything
	# starts; --servers is ignored with a note.
	n=test_ar_refusals
	bad=""
	for f in "--restart-servers 1 --checkpoint-dir $T/ck"; do
		# shellcheck disable=SC2086
		$P run --mode allreduce --workers 2 $D --batch 48 --steps 5 \
			--out "$T/ref" $f >"$T/ref.log" 2>&1
		rc=$?
		flag=${f%% *}
		[ "$rc" = 2 ] && grep -q -- "$flag" "$T/ref.log" ||
			bad="$bad [$f: exit $rc]"
	done
	$P server --mode allreduce --listen "ipc://$T/s" $D >"$T/srv.log" 2>&1
	rc=$?
	[ "$rc" = 2 ] && grep -q "runs no servers" "$T/srv.log" ||
		bad="$bad [server: exit $rc]"
	# A worker's ring: --listen and --ring-dir go together, and only
	# with allreduce.
	# wref WANT FLAGS...: pstrain worker FLAGS exits 2 saying WANT.
	wref() {
		want=$1
		shift
		$P worker "$@" $D --out "$T/wref" >"$T/wref.log" 2>&1
		rc=$?
		[ "$rc" = 2 ] && grep -q -- "$want" "$T/wref.log" ||
			bad="$bad [worker $*: exit $rc]"
	}
	wref "needs --ring-dir" --mode allreduce --listen "ipc://$T/l"
	wref "needs --listen" --mode allreduce --ring-dir "$T"
	wref "--ring-dir is" --mode sync --ring-dir "$T" --connect "ipc://$T/s"
	$P run --mode allreduce --servers 3 --workers 2 $D --batch 48 \
		--steps 5 --out "$T/note" >"$T/note.log" 2>&1 ||
		bad="$bad [--servers 3 failed]"
	grep -q "runs no servers; --servers 3 is ignored" "$T/note.log" ||
		bad="$bad [no note]"
	[ -z "$bad" ] && ok $n || no $n "$bad" "$T/ref.log"
}

test_ar_dead_worker_ends_job() {
	# kill -9 a worker: its neighbours lose the ring, and the launcher
	# ends the job at once, saying why, with nothing left running.
	n=test_ar_dead_worker_ends_job
	d="$T/kill"
	$P run --mode allreduce --workers 3 $D --batch 48 --steps 100000 \
		--out "$d" >"$d.log" 2>&1 &
	pid=$!
	kill_rank1 "$d" 0
	wait $pid
	rc=$?
	left=$(pgrep -f -- "--out $d( |$)" | wc -l)
	if [ "$rc" != 0 ] && [ "$left" = 0 ] &&
		grep -q "worker 1 failed (signal 9, Killed); the ring" "$d.log"; then
		ok $n
	else
		no $n "exit $rc, $left processes left" "$d.log"
	fi
}

test_ar_stranger_refused() {
	# A process with another job's secret dials worker 0's ring address
	# first, as its left neighbour: it never gets a proof of its own
	# accepted nor trains a step, gives up, and the job's own worker 1
	# then joins and the two finish the job.
	n=test_ar_stranger_refused
	$P secret "$T/k1" >/dev/null && $P secret "$T/k2" >/dev/null ||
		{ no $n "pstrain secret failed"; return; }
	mkdir -p "$T/str" "$T/strx"
	w="$P worker --mode allreduce --workers 2 $D --batch 48 --steps 20"
	$w --rank 0 --connect "ipc://$T/w0,ipc://$T/w1" --secret-file \
		"$T/k1" --rpc-timeout 20 --out "$T/str" >"$T/str0.log" 2>&1 &
	a=$!
	$w --rank 1 --connect "ipc://$T/w0,ipc://$T/x1" --secret-file \
		"$T/k2" --rpc-timeout 3 --out "$T/strx" >"$T/strx.log" 2>&1
	rcx=$?
	$w --rank 1 --connect "ipc://$T/w0,ipc://$T/w1" --secret-file \
		"$T/k1" --rpc-timeout 20 --out "$T/str" >"$T/str1.log" 2>&1
	rc1=$?
	wait $a
	rc0=$?
	rows=$(awk 'FNR > 1' "$T/str/worker-0.csv" "$T/str/worker-1.csv" |
		wc -l)
	if [ "$rcx" != 0 ] && grep -q "ring: worker 1" "$T/strx.log" &&
		[ "$rc0" = 0 ] && [ "$rc1" = 0 ] && [ "$rows" = 40 ] &&
		[ -s "$T/str/final.csv" ] && ! [ -s "$T/strx/worker-1.csv" ]; then
		ok $n
	else
		no $n "exits: stranger $rcx, workers $rc0 and $rc1; $rows rows" \
			"$T/strx.log"
	fi
}

# free_port: a TCP port of 127.0.0.1 that nothing listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

test_ar_tcp_by_hand() {
	# The ring over tcp, its two workers started by hand: the model is
	# the ipc job's (a2) bit for bit, and the summary says what ran: no
	# servers, transport tcp.
	n=test_ar_tcp_by_hand
	d="$T/tcp"
	u="tcp://127.0.0.1:$(free_port),tcp://127.0.0.1:$(free_port)"
	w="$P worker --mode allreduce --workers 2 $D --batch 48 --steps 200"
	w="$w --optimizer momentum:0.9 --connect $u --out $d"
	export PSTRAIN_SECRET=00112233445566778899aabbccddeeff
	$w --rank 1 --save-model "$d/m.bin" >"$T/tcp1.log" 2>&1 &
	a=$!
	$w --rank 0 --save-model "$d/m.bin" >"$T/tcp0.log" 2>&1
	rc0=$?
	wait $a
	rc1=$?
	unset PSTRAIN_SECRET
	servers=$(json servers "$d/summary.json")
	if [ "$rc0" = 0 ] && [ "$rc1" = 0 ] && [ "$servers" = 0 ] &&
		grep -q '"transport": "tcp"' "$d/summary.json" &&
		cmp -s "$T/a2/m.bin" "$d/m.bin"; then
		ok $n
	else
		no $n "exits $rc0 and $rc1, servers '$servers', or another model" \
			"$T/tcp0.log"
	fi
}

test_ar_tcp_equals_ipc() {
	# pstrain run --transport tcp: the ring over loopback tcp, each
	# worker on a free port it says in the socket folder. The model is
	# the ipc job's (a2) bit for bit, and the summary records the ring
	# as it ran: no servers, transport tcp, the two workers' addresses.
	n=test_ar_tcp_equals_ipc
	job a2t allreduce 2 --optimizer momentum:0.9 --transport tcp ||
		{ no $n "the tcp job failed" "$T/a2t.log"; return; }
	s="$T/a2t/summary.json"
	$PY - "$s" <<'PYEOF' || { no $n "the record" "$s"; return; }
import json, sys
j = json.load(open(sys.argv[1]))
a = j["addresses"]
assert j["servers"] == 0 and j["config"]["transport"] == "tcp", j
assert len(a) == 2 and all(x.startswith("tcp://127.0.0.1:") for x in a), a
assert a[0] != a[1], a
PYEOF
	cmp -s "$T/a2/m.bin" "$T/a2t/m.bin" && ok $n ||
		no $n "the tcp job's model is not the ipc job's" "$T/a2t.log"
}

test_ar_node_and_cluster() {
	# pstrain node with --mode allreduce: every task a worker, each
	# listening on --advertise and publishing its ring address in
	# DIR/nodes/ID; then the same job from a cluster file of 'worker
	# URL' lines. Both models are the ipc job's (a2) bit for bit.
	n=test_ar_node_and_cluster
	export PSTRAIN_SECRET=00112233445566778899aabbccddeeff
	d="$T/node"
	w="$P node --mode allreduce --workers 2 $D --batch 48 --steps 200"
	w="$w --optimizer momentum:0.9 --advertise 127.0.0.1 --job-id j1"
	$w --node-rank 1 --out "$d" >"$T/node1.log" 2>&1 &
	a=$!
	$w --node-rank 0 --out "$d" --save-model "$d/m.bin" \
		>"$T/node0.log" 2>&1
	rc0=$?
	wait $a
	rc1=$?
	f="$T/cluster.txt"
	printf 'worker tcp://127.0.0.1:%s\nworker tcp://127.0.0.1:%s\n' \
		"$(free_port)" "$(free_port)" >"$f"
	c="$T/cl"
	w="$P worker --mode allreduce --cluster $f $D --batch 48 --steps 200"
	w="$w --optimizer momentum:0.9 --out $c"
	$w --rank 1 >"$T/cl1.log" 2>&1 &
	a=$!
	$w --rank 0 --save-model "$c/m.bin" >"$T/cl0.log" 2>&1
	rc2=$?
	wait $a
	rc3=$?
	unset PSTRAIN_SECRET
	urls=$(ls "$d/nodes/j1" 2>/dev/null | tr '\n' ' ')
	if [ "$rc0$rc1$rc2$rc3" = 0000 ] &&
		[ "$urls" = "worker-0.url worker-1.url " ] &&
		[ "$(json servers "$d/summary.json")" = 0 ] &&
		grep -q '"tcp://127.0.0.1:' "$c/summary.json" &&
		cmp -s "$T/a2/m.bin" "$d/m.bin" &&
		cmp -s "$T/a2/m.bin" "$c/m.bin"; then
		ok $n
	else
		no $n "exits $rc0 $rc1 (node) $rc2 $rc3 (cluster), files $urls, or another model" \
			"$T/node0.log"
	fi
}

test_ar_resume_same_model() {
	# 60 steps with a checkpoint every 25, then --resume to 100: the
	# model of 100 steps straight, bit for bit (Adam: its state too).
	n=test_ar_resume_same_model
	a="--optimizer adam --lr 0.01"
	# shellcheck disable=SC2086
	job res-a allreduce 3 $a --steps 100 ||
		{ no $n "straight job failed" "$T/res-a.log"; return; }
	# shellcheck disable=SC2086
	$P run --mode allreduce --workers 3 $D --batch 48 --steps 60 $a \
		--checkpoint-every 25 --checkpoint-dir "$T/res-ck" \
		--out "$T/res-b" >"$T/res-b.log" 2>&1 ||
		{ no $n "first part failed" "$T/res-b.log"; return; }
	# shellcheck disable=SC2086
	$P run --mode allreduce --workers 3 $D --batch 48 --steps 100 $a \
		--resume "$T/res-ck" --out "$T/res-b" \
		--save-model "$T/res-b/m.bin" >"$T/res-b2.log" 2>&1 ||
		{ no $n "resumed part failed" "$T/res-b2.log"; return; }
	if cmp -s "$T/res-a/m.bin" "$T/res-b/m.bin" &&
		grep -q "resumed from .*server-0-v50.ckpt at step 50" \
			"$T/res-b/worker-2.log"; then
		ok $n
	else
		no $n "the resumed model differs, or not from step 50" \
			"$T/res-b/worker-2.log"
	fi
}

test_ar_restart_same_model() {
	# kill -9 a worker with --restart-workers: every worker starts again
	# from the newest checkpoint, and the job ends with the model of an
	# uninterrupted one.
	n=test_ar_restart_same_model
	job rs-a allreduce 3 --steps 300 ||
		{ no $n "straight job failed" "$T/rs-a.log"; return; }
	d="$T/rs-b"
	$P run --mode allreduce --workers 3 $D --batch 48 --steps 300 \
		--delay uniform:3:3 --checkpoint-every 20 \
		--checkpoint-dir "$T/rs-ck" --restart-workers 1 --out "$d" \
		--save-model "$d/m.bin" >"$d.log" 2>&1 &
	pid=$!
	kill_rank1 "$d" 50
	wait $pid
	rc=$?
	restarts=$(json worker_restarts "$d/summary.json")
	if [ "$rc" = 0 ] && [ "$restarts" = 1 ] &&
		cmp -s "$T/rs-a/m.bin" "$d/m.bin"; then
		ok $n
	else
		no $n "exit $rc, worker_restarts '$restarts'" "$d.log"
	fi
}

test_ar_equals_sync_w2
test_ar_equals_sync_pieces
test_ar_near_sync_w3
test_ar_deterministic
test_ar_outputs
test_ar_refusals
test_ar_resume_same_model
test_ar_restart_same_model
test_ar_dead_worker_ends_job
test_ar_stranger_refused
test_ar_tcp_by_hand
test_ar_tcp_equals_ipc
test_ar_node_and_cluster
