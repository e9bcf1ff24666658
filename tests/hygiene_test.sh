#!/bin/sh
# tests/hygiene_test.sh - what pstrain leaves on the machine and takes
# from it: one OpenBLAS thread per process unless the user chose, and no
# socket folder left behind by a launcher killed with kill -9. Prints
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
	while [ "$i" -lt 600 ]; do
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
	env -u OPENBLAS_NUM_THREADS $2 $P server --servers 1 --workers 1 $D \
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

test_hygiene_one_blas_thread
