#!/bin/sh
# tests/shm_test.sh - --transport shm on real jobs: the dense values go
# through shared memory (common/shm.h) and the job computes exactly what
# it computes over ipc, whole shards and --layer-push's ranges alike;
# async, ssp and backup workers, whose values change while read, learn
# over it; all-reduce, which has no servers, is refused by name; run's
# default (auto) picks it where there are servers, compare for all its
# jobs or none, and processes started by hand by their addresses. (The handshake's refusals of
# a wrong secret, a small or unsealed segment and values before it are
# in proc_server_test's test_server_shm; a server restarted from its
# checkpoint in ckpt_test's test_ck_dead_server_restarted_shm.)
# Prints "ok NAME" / "FAIL NAME: why" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-shm-XXXXXX")
trap 'rm -rf "$T"' EXIT
. tests/lib.sh
J="--mode sync --servers 2 --workers 3 --data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2 --batch 48 --steps 40"

# same NAME FLAGS...: the job over shm and over ipc with FLAGS saves the
# same model, bit for bit, and each of the servers $SERVERS read every
# worker's pushes in shared memory, and every worker computed in shared
# memory (its gradient in its segment, the values in its view of the
# servers': sync without backup workers). mlp:32's 2,410 values over two
# servers: [0, 1205) and [1205, 2410), whose own pages hold [0, 1024) and
# [2048, 2410): a page of each is read in place, the rest copied.
SERVERS="0 1"
same() {
	n=$1
	shift
	# shellcheck disable=SC2086
	$P run $J "$@" --transport shm --out "$T/$n-shm" \
		--save-model "$T/$n-shm.bin" >"$T/$n-shm.log" 2>&1 ||
		{ no $n "the shm job failed" "$T/$n-shm.log"; return; }
	# shellcheck disable=SC2086
	$P run $J "$@" --transport ipc --out "$T/$n-ipc" \
		--save-model "$T/$n-ipc.bin" \
		>"$T/$n-ipc.log" 2>&1 ||
		{ no $n "the ipc job failed" "$T/$n-ipc.log"; return; }
	for s in $SERVERS; do
		for w in 0 1 2; do
			grep -q "worker $w's pushes are read in shared memory" \
				"$T/$n-shm/server-$s.log" ||
				{ no $n "server $s never mapped worker $w's" \
					"$T/$n-shm/server-$s.log"; return; }
		done
	done
	for w in 0 1 2; do
		grep -q "worker $w: computes in shared memory" \
				"$T/$n-shm/worker-$w.log" ||
			{ no $n "worker $w copied its values" \
				"$T/$n-shm/worker-$w.log"; return; }
	done
	grep -q '"shm": true' "$T/$n-shm/summary.json" ||
		{ no $n "summary.json's config lacks shm" \
			"$T/$n-shm/summary.json"; return; }
	# The servers' own memory is recorded (RssAnon, sampled).
	for d in "$T/$n-shm" "$T/$n-ipc"; do
		own=$(json server_max_private_mb "$d/summary.json")
		case $own in "" | null | 0 | 0.0) no $n "no server_max_private_mb" \
			"$d/summary.json"; return ;; esac
	done
	if cmp -s "$T/$n-shm.bin" "$T/$n-ipc.bin"; then
		ok $n
	else
		no $n "the models differ" "$T/$n-shm.log"
	fi
}

test_shm_same_model() {
	same test_shm_same_model
}

test_shm_layer_push_same_model() {
	same test_shm_layer_push_same_model --layer-push on
}

test_shm_one_server_in_place() {
	# One server holds the whole model (its view is the server's
	# segment, nothing copied), with and without --layer-push; and three
	# servers over a model of 75,010 values, whose shards start and end
	# inside pages and hold whole pages between: the model is still
	# ipc's bit for bit.
	SERVERS=0
	same test_shm_one_server_in_place --servers 1 --layer-push on
	same test_shm_one_server_in_place_lp_off --servers 1 --layer-push off
	SERVERS="0 1 2"
	same test_shm_three_servers_in_place --servers 3 --model mlp:1000
	SERVERS="0 1"
}

# refused NAME WANT FLAGS...: pstrain run with FLAGS exits 2 saying WANT,
# having started nothing.
refused() {
	n=$1 want=$2
	shift 2
	# shellcheck disable=SC2086
	$P run $J "$@" --out "$T/$n" >"$T/$n.log" 2>&1
	rc=$?
	if [ $rc = 2 ] && grep -q -- "$want" "$T/$n.log" && [ ! -e "$T/$n" ]; then
		ok $n
	else
		no $n "exit $rc" "$T/$n.log"
	fi
}

test_shm_refusals() {
	refused test_shm_refuses_allreduce "--transport shm: --mode allreduce has no servers" \
		--transport shm --mode allreduce --servers 0
	refused test_shm_refuses_hosts "emulated hosts talk over --transport tcp or tls" \
		--transport shm --placement dedicated
}

# moving NAME FLAGS...: a job whose servers change values while workers
# may read them (FLAGS: a mode, backup workers), over shm: it ends with
# exit 0 and a model that learned (test accuracy at least 0.9 on this
# easy set), every server read every worker's pushes in shared memory,
# and no worker computed in place (values are copied out under the
# segment's seqlock: tests/api_test.c's test_api_shm_async_reads_whole
# checks that a copy is never torn). Sets d to the job's folder.
moving() {
	n=$1
	shift
	d="$T/$n"
	# shellcheck disable=SC2086
	$P run $J --steps 120 "$@" --transport shm --out "$d" \
		--save-model "$d.bin" >"$d.log" 2>&1 ||
		{ no $n "the job failed" "$d.log"; return 1; }
	acc=$(json final_test_acc "$d/summary.json")
	awk "BEGIN { exit !($acc >= 0.9) }" ||
		{ no $n "test accuracy '$acc'" "$d.log"; return 1; }
	for s in 0 1; do
		for w in 0 1 2; do
			grep -q "worker $w's pushes are read in shared memory" \
				"$d/server-$s.log" ||
				{ no $n "server $s never mapped worker $w's" \
					"$d/server-$s.log"; return 1; }
		done
	done
	! grep -q "computes in server" "$d"/worker-*.log ||
		{ no $n "a worker read moving values in place" "$d.log"
		return 1; }
	return 0
}

test_shm_async() {
	moving test_shm_async --mode async && ok test_shm_async
}

test_shm_ssp_bound() {
	# The bound holds over shm as over ipc (tests/research_test.sh):
	# with worker 2 slow, nobody runs more than 2 steps ahead of it.
	n=test_shm_ssp_bound
	moving $n --mode ssp --staleness 2 --straggler 2:5 || return
	for s in 0 1; do
		lead=$(json max_lead "$d/server-$s.json")
		[ "${lead:-9}" -le 2 ] ||
			{ no $n "server $s: a worker led by '$lead'" "$d.log"
			return; }
	done
	ok $n
}

test_shm_backup_workers() {
	moving test_shm_backup_workers --backup-workers 1 &&
		ok test_shm_backup_workers
}

# picked NAME WANT SHM FLAGS...: a short job with FLAGS says it runs
# over WANT on its start line and records shm SHM (true, false).
picked() {
	pn=$1 want=$2 shm=$3
	shift 3
	# shellcheck disable=SC2086
	$P run $J --steps 3 "$@" --out "$T/$pn" >"$T/$pn.log" 2>&1 ||
		{ no $pn "the job failed" "$T/$pn.log"; return 1; }
	grep -q "steps over $want, output in" "$T/$pn.log" ||
		{ no $pn "not over $want" "$T/$pn.log"; return 1; }
	grep -q "\"shm\": $shm" "$T/$pn/summary.json" ||
		{ no $pn "summary.json's config lacks shm $shm" \
			"$T/$pn/summary.json"; return 1; }
}

# boxed DIR MIN: every server of the job in DIR took at least MIN
# requests from the workers' boxes (server-S.json's box_requests).
boxed() {
	for f in "$1"/server-*.json; do
		b=$(sed -n 's/^ *"box_requests": \([0-9]*\),*$/\1/p' "$f")
		[ "${b:-0}" -ge "$2" ] || return 1
	done
}

test_shm_auto() {
	# --transport auto (the default): shm for a mode with servers, whose
	# servers then read every worker's pushes there and take the steps'
	# requests from the workers' boxes (3 steps of 3 workers: 9 at
	# least); ipc for all-reduce and when ipc is asked for by name.
	n=test_shm_auto
	picked $n-sync shm true || return
	grep -q "worker 2's pushes are read in shared memory" \
		"$T/$n-sync/server-1.log" ||
		{ no $n "server 1 never mapped worker 2's" \
			"$T/$n-sync/server-1.log"; return; }
	picked $n-async shm true --mode async || return
	boxed "$T/$n-sync" 9 && boxed "$T/$n-async" 9 ||
		{ no $n "a server took fewer than 9 requests from boxes" \
			"$T/$n-sync/server-0.json"; return; }
	picked $n-allreduce ipc false --mode allreduce --servers 0 || return
	picked $n-ipc ipc false --transport ipc || return
	! grep -q "in shared memory" "$T/$n-ipc"/*.log ||
		{ no $n "--transport ipc mapped segments" "$T/$n-ipc.log"; return; }
	grep -q '"box_requests": 0,' "$T/$n-ipc/server-0.json" ||
		{ no $n "--transport ipc used boxes" "$T/$n-ipc/server-0.json"
		return; }
	ok $n
}

# by_hand NAME SERVER-TRANSPORT WORKER-TRANSPORT: a server and a worker
# started by hand at an ipc:// address, each with its --transport, run 5
# steps (the worker's exit and the server's both 0).
by_hand() {
	d="$T/$1"
	mkdir -p "$d"
	[ -f "$T/secret" ] || $P secret "$T/secret" >/dev/null
	f="--data synthetic:1200 --model mlp:32 --seed 7 --batch 32 --workers 1"
	f="$f --secret-file $T/secret"
	# shellcheck disable=SC2086
	$P server $f --transport "$2" --listen "ipc://$d/s0" --out "$d" \
		>"$d/s.log" 2>&1 &
	s=$!
	# shellcheck disable=SC2086
	$P worker $f --transport "$3" --connect "ipc://$d/s0" --steps 5 \
		--out "$d" >"$d/w.log" 2>&1; rw=$?
	wait $s; rs=$?
	[ $rw = 0 ] && [ $rs = 0 ] ||
		{ no "$1" "exits: worker $rw, server $rs" "$d/w.log"; return 1; }
}

test_shm_by_hand() {
	# pstrain server and worker started by hand choose by their
	# addresses: at ipc:// addresses the server offers shared memory and
	# the worker uses it (computing in place); a worker given --transport
	# ipc does not; a server given --transport ipc offers none, and the
	# worker says so and goes on over ipc.
	n=test_shm_by_hand
	by_hand $n-auto auto auto || return
	grep -q "worker 0's pushes are read in shared memory" \
		"$T/$n-auto/s.log" &&
		grep -q "worker 0: computes in shared memory" \
			"$T/$n-auto/w.log" ||
		{ no $n "auto at ipc:// did not share memory" \
			"$T/$n-auto/s.log"; return; }
	by_hand $n-wipc auto ipc || return
	! grep -q "in shared memory" "$T/$n-wipc/s.log" ||
		{ no $n "a worker of --transport ipc shared memory" \
			"$T/$n-wipc/s.log"; return; }
	by_hand $n-sipc ipc auto || return
	grep -q "offers no shared memory (--transport ipc); values go over ipc" \
		"$T/$n-sipc/w.log" &&
		! grep -q "in shared memory" "$T/$n-sipc/s.log" ||
		{ no $n "the worker did not go on over ipc" \
			"$T/$n-sipc/w.log"; return; }
	ok $n
}

test_shm_auto_compare() {
	# compare picks once for every job: shm when every mode has
	# servers, ipc for all when one of them is all-reduce (a comparison
	# changes one thing), saying so.
	n=test_shm_auto_compare
	for modes in sync,async sync,allreduce; do
		# shellcheck disable=SC2086
		$P compare ${J#--mode sync} --steps 3 --servers 1 --modes $modes \
			--seeds 1 \
			--out "$T/$n-$modes" >"$T/$n-$modes.log" 2>&1 ||
			{ no $n "compare --modes $modes failed" \
				"$T/$n-$modes.log"; return; }
	done
	for f in "$T/$n-sync,async"/*/seed-1/summary.json; do
		grep -q '"shm": true' "$f" ||
			{ no $n "$f: not over shm" "$f"; return; }
	done
	for f in "$T/$n-sync,allreduce"/*/seed-1/summary.json; do
		grep -q '"shm": false' "$f" ||
			{ no $n "$f: over shm beside all-reduce" "$f"; return; }
	done
	grep -q "every job over ipc: allreduce has no servers" \
		"$T/$n-sync,allreduce.log" ||
		{ no $n "no word of ipc for all" "$T/$n-sync,allreduce.log"
		return; }
	grep -q "every process on this machine, over shm" \
		"$T/$n-sync,async/report.md" ||
		{ no $n "report.md's network is not shm" \
			"$T/$n-sync,async/report.md"; return; }
	ok $n
}

test_shm_server_memory_flat() {
	# A server of 1.1M floats (4.5 MB) and 6 workers: once it has read
	# a granule of a worker's push it lets go of those pages (all but
	# worker 0's), so its peak RSS stays within two shards of the same
	# job's with one worker (holding them all: 5 shards more).
	n=test_shm_server_memory_flat
	for w in 1 6; do
		$P run --mode sync --servers 1 --workers $w --transport shm \
			--data synthetic:1200 \
			--model mlp:1024,1024 --seed 7 --lr 0.1 --batch 48 --steps 4 \
			--out "$T/$n-$w" >"$T/$n-$w.log" 2>&1 ||
			{ no $n "the $w-worker job failed" "$T/$n-$w.log"; return; }
	done
	r1=$(json server_max_rss_mb "$T/$n-1/summary.json")
	r6=$(json server_max_rss_mb "$T/$n-6/summary.json")
	hi=$(sed -n 's/^  "hi": \([0-9]*\),*$/\1/p' "$T/$n-6/server-0.json")
	if awk -v a="$r1" -v b="$r6" -v n="$hi" \
		'BEGIN { exit !(n > 1e6 && b - a < 2 * n * 4 / 1048576) }'; then
		ok $n
	else
		no $n "peak RSS $r1 MiB with 1 worker, $r6 with 6 (shard of $hi floats)"
	fi
}

test_shm_same_model
test_shm_layer_push_same_model
test_shm_one_server_in_place
test_shm_async
test_shm_ssp_bound
test_shm_backup_workers
test_shm_refusals
test_shm_auto
test_shm_by_hand
test_shm_auto_compare
test_shm_server_memory_flat
