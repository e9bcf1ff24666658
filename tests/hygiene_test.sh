#!/bin/sh
# tests/hygiene_test.sh - what pstrain leaves on the machine and takes
# from it: one OpenBLAS thread per process unless the user chose, and no
# socket folder left behind by a launcher killed with kill -9, and no
# test hook in what is shipped. Prints
# "ok NAME" / "FAIL NAME" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-hy-XXXXXX")
trap 'rm -rf "$T"' EXIT
D="--data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2"

. tests/lib.sh

# wait_file FILE: wait (bounded) until FILE exists
wait_file() {
	i=0
	while [ "$i" -lt 2400 ]; do
		[ -e "$1" ] && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# blas_threads DIR [VAR=VALUE]: start a server (with the variable, else
# without OPENBLAS_NUM_THREADS), and print how many of its threads were
# started before main: those keep the executable's name, where main
# renames itself pstrain-server and nng names its threads nng:*. They
# are OpenBLAS's pool.
blas_threads() {
	d=$1
	mkdir -p "$d"
	env -u OPENBLAS_NUM_THREADS PSTRAIN_SECRET=00112233445566778899aabbccddeeff $2 \
		$P server --servers 1 --workers 1 $D \
		--listen "ipc://$d/s0" --ready-file "$d/ready" --out "$d" \
		>"$d/server.log" 2>&1 &
	spid=$!
	if ! wait_file "$d/ready"; then
		kill $spid
		wait $spid
		echo "none: the server did not start"
		return
	fi
	name=$(basename "$P" | cut -c1-15)
	c=0
	for t in /proc/$spid/task/*/comm; do
		[ "$(cat "$t" 2>/dev/null)" = "$name" ] && c=$((c + 1))
	done
	kill $spid
	wait $spid
	echo $c
}

test_hygiene_one_blas_thread() {
	# OpenBLAS starts its pool as it loads, before main: unless the
	# user set OPENBLAS_NUM_THREADS, there must be none (one thread,
	# the main one), and a user's choice must still be honoured.
	n=test_hygiene_one_blas_thread
	def=$(blas_threads "$T/th1")
	if [ "$(nproc)" -lt 2 ]; then
		two=1 # one CPU: OpenBLAS caps its pool at it anyway
	else
		two=$(blas_threads "$T/th2" OPENBLAS_NUM_THREADS=2)
	fi
	[ "$def" = 0 ] && [ "$two" = 1 ] && ok $n ||
		no $n "OpenBLAS threads: $def without OPENBLAS_NUM_THREADS (want 0), $two with 2 (want 1)" \
			"$T/th1/server.log"
}

# alive DIR: processes whose command line names --out DIR
alive() { pgrep -f -- "--out $1( |$)" | wc -l; }

test_hygiene_sockets_after_kill9() {
	# kill -9 a launcher and its processes mid-job: its socket folder
	# stays (nothing could remove it), and the next job removes it. Not
	# removed: the folder of a live process, one of another owner, an
	# old-style name, and what a symbolic link named like a stale folder
	# points to. A private TMPDIR keeps other users' folders out of it.
	n=test_hygiene_sockets_after_kill9
	tmp="$T/tmp"
	d="$T/k9"
	mkdir -p "$tmp" "$T/victim"
	: >"$T/victim/s0"
	ln -s "$T/victim" "$tmp/pstrain-run-99999999-1-aaaaaa"
	mkdir "$tmp/pstrain-XXold" "$tmp/pstrain-run-99999998-1-bbbbbb"
	other=yes
	[ "$(id -u)" = 0 ] && chown 65534 "$tmp/pstrain-run-99999998-1-bbbbbb" ||
		{ other=no; rmdir "$tmp/pstrain-run-99999998-1-bbbbbb"; }
	live="$tmp/pstrain-run-$$-$(cut -d' ' -f22 /proc/$$/stat)-cccccc"
	mkdir "$live"
	TMPDIR=$tmp $P run --servers 2 --workers 2 $D --batch 32 \
		--steps 100000 --out "$d" >"$d.log" 2>&1 &
	pid=$!
	if ! wait_file "$d/worker-0.csv"; then
		no $n "the job did not start" "$d.log"
		kill $pid
		wait $pid
		return
	fi
	kill -9 $pid
	pkill -9 -f -- "--out $d( |$)"
	wait $pid 2>/dev/null
	i=0
	while [ "$i" -lt 300 ] && [ "$(alive "$d")" != 0 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	left=$(ls -d "$tmp/pstrain-run-$pid-"* 2>/dev/null | wc -l)
	TMPDIR=$tmp $P run --servers 1 --workers 1 $D --batch 32 --steps 5 \
		--out "$T/next" >"$T/next.log" 2>&1
	rc=$?
	after=$(ls -d "$tmp/pstrain-run-$pid-"* 2>/dev/null | wc -l)
	kept=0
	[ -d "$live" ] && kept=$((kept + 1))
	[ -d "$tmp/pstrain-XXold" ] && kept=$((kept + 1))
	[ -f "$T/victim/s0" ] && kept=$((kept + 1))
	[ $other = no ] || [ -d "$tmp/pstrain-run-99999998-1-bbbbbb" ] &&
		kept=$((kept + 1))
	others=$(ls "$tmp" | grep -c '^pstrain-run-')
	# Left after the next job: the symbolic link, the live folder and
	# the other owner's (when there is one); not the next job's own.
	want=$([ $other = yes ] && echo 3 || echo 2)
	if [ "$left" = 1 ] && [ "$rc" = 0 ] && [ "$after" = 0 ] &&
		[ "$kept" = 4 ] && [ "$others" = "$want" ]; then
		ok $n
	else
		no $n "killed job's folders: $left before, $after after the next job (exit $rc); $kept of 4 kept; $others pstrain-run- entries (want $want)" "$T/next.log"
	fi
}

# The test hooks (PSTRAIN_TEST_*, common/testhook.h) are compiled into
# the test build only: the library and bin/pstrain read none of them.
test_hygiene_no_test_hooks() {
	n=test_hygiene_no_test_hooks
	hooked=$(strings build/tests/pstrain | grep -c '^PSTRAIN_TEST_')
	shipped=$(cat bin/pstrain build/lib/libpstrain.so build/lib/libpstrain.a |
		strings | grep -c '^PSTRAIN_TEST_')
	if [ "$hooked" -ge 4 ] && [ "$shipped" = 0 ]; then
		ok $n
	else
		no $n "hooks named: $hooked in the test build (want >= 4), $shipped in bin/pstrain and the library (want 0)"
	fi
}

test_hygiene_one_blas_thread
test_hygiene_sockets_after_kill9
test_hygiene_no_test_hooks
