#!/bin/sh
# tests/hosts_test.sh - jobs whose processes are started by hand, one at a
# time, as on several hosts: every process takes the same flags, --out is
# made, worker 0 shows the progress, the finishing worker writes
# summary.json, and a server stops by itself once no worker is left.
# Prints "ok NAME" / "FAIL NAME" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-hosts-XXXXXX")
trap 'pkill -9 -f -- "$T/" 2>/dev/null; rm -rf "$T"' EXIT
D="--data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2 --batch 32"

. tests/lib.sh

# within S CMD...: CMD, killed after S seconds (a bound against a hang,
# not a timing check); its exit status, 124 when it had to be killed.
within() {
	s=$1
	shift
	timeout -s KILL "$s" "$@"
}

# The same command line for every process of a 2 x 2 job, training flags
# (run's) and all: each process uses the flags that concern it.
test_hosts_same_flags() {
	n=test_hosts_same_flags
	c="$T/same"
	mkdir -p "$c"
	printf 'server ipc://%s/s0\nserver ipc://%s/s1\nworker a\nworker b\n' \
		"$c" "$c" >"$c/cluster.txt"
	$P secret "$c/secret" || { no $n "secret"; return; }
	# --out does not exist yet: the processes make it.
	f="--mode sync --cluster $c/cluster.txt $D --steps 20 --epochs 3 \
--eval-every 10 --out $c/out --secret-file $c/secret \
--save-model $c/out/m.bin --checkpoint-every 10 --checkpoint-dir $c/ck"
	within 120 $P server $f --rank 0 >"$c/s0.log" 2>&1 &
	s0=$!
	within 120 $P server $f --rank 1 >"$c/s1.log" 2>&1 &
	s1=$!
	within 120 $P worker $f --rank 1 >"$c/w1.log" 2>&1 &
	w1=$!
	within 120 $P worker $f --rank 0 >"$c/w0.log" 2>"$c/w0.err"
	r0=$?
	wait $w1; r1=$?
	wait $s0; r2=$?
	wait $s1; r3=$?
	$P run --mode sync --servers 2 --workers 2 $D --steps 20 \
		--eval-every 10 --out "$c/run" --save-model "$c/run/m.bin" \
		>"$c/run.log" 2>&1
	if [ "$r0$r1$r2$r3" != 0000 ]; then
		no $n "exits $r0 $r1 $r2 $r3" "$c/w0.err"
	elif ! cmp -s "$c/out/m.bin" "$c/run/m.bin"; then
		no $n "model differs from pstrain run's" "$c/run.log"
	elif [ "$(json steps "$c/out/summary.json")" != 20 ] ||
		[ "$(json workers "$c/out/summary.json")" != 2 ]; then
		no $n "summary.json missing or wrong" "$c/w0.err"
	elif ! grep -q "^step 20/20 " "$c/w0.err"; then
		no $n "worker 0 printed no final progress line" "$c/w0.err"
	elif ! grep -q '"server_updates"\|"updates"' "$c/out/server-0.json"; then
		no $n "no server-0.json in --out" "$c/s0.log"
	else
		ok $n
	fi
}

# A worker whose servers were never started says so, and gives up after
# --connect-timeout, not the long --rpc-timeout meant for a server that
# went away.
test_hosts_never_started() {
	n=test_hosts_never_started
	c="$T/never"
	mkdir -p "$c"
	$P secret "$c/secret"
	within 60 $P worker --workers 1 --connect "ipc://$c/nobody" $D \
		--steps 5 --out "$c/out" --secret-file "$c/secret" \
		--connect-timeout 2 >"$c/w.log" 2>&1
	r=$?
	if [ "$r" = 124 ] || [ "$r" = 0 ]; then
		no $n "exit $r" "$c/w.log"
	elif ! grep -q "server 0 at ipc://$c/nobody to start" "$c/w.log"; then
		no $n "no 'to start' message" "$c/w.log"
	elif grep -q "come back" "$c/w.log"; then
		no $n "said 'come back' of a server never reached" "$c/w.log"
	else
		ok $n
	fi
}

# A server whose workers never arrive stops after --alone-timeout, saying
# why, instead of holding its host (or a Slurm allocation) forever.
test_hosts_server_alone() {
	n=test_hosts_server_alone
	c="$T/alone"
	mkdir -p "$c"
	$P secret "$c/secret"
	within 60 $P server --servers 1 --workers 2 --listen "ipc://$c/s0" \
		$D --out "$c/out" --secret-file "$c/secret" \
		--alone-timeout 1 >"$c/s.log" 2>&1
	r=$?
	if [ "$r" = 124 ] || [ "$r" = 0 ]; then
		no $n "exit $r" "$c/s.log"
	elif ! grep -q "worker 1 has not arrived" "$c/s.log" ||
		! grep -q "no worker is left" "$c/s.log"; then
		no $n "reasons not said" "$c/s.log"
	elif [ ! -f "$c/out/server-0.json" ]; then
		no $n "no server-0.json" "$c/s.log"
	else
		ok $n
	fi
}

# Every worker gone (killed) before the end: the server notices and stops.
test_hosts_server_stops_when_workers_gone() {
	n=test_hosts_server_stops_when_workers_gone
	c="$T/gone"
	mkdir -p "$c"
	$P secret "$c/secret"
	# One command line serves both: each takes the other's flags.
	f="--servers 1 --workers 1 $D --steps 100000 --out $c/out \
--secret-file $c/secret --alone-timeout 60 --connect-timeout 60"
	within 90 $P server $f --listen "ipc://$c/s0" >"$c/s.log" 2>&1 &
	s=$!
	$P worker $f --connect "ipc://$c/s0" >"$c/w.log" 2>&1 &
	w=$!
	i=0
	while [ "$i" -lt 1200 ] && ! grep -qs '^[0-9]' "$c/out/worker-0.csv"; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -9 $w
	wait $s
	r=$?
	if [ "$r" = 124 ]; then
		no $n "server still running 90 s on" "$c/s.log"
	elif ! grep -q "no worker is left" "$c/s.log"; then
		no $n "server exit $r without saying why" "$c/s.log"
	else
		ok $n
	fi
}

# One flag set also means one --help: a worker's lists its own flags and
# says it takes run's.
test_hosts_help() {
	n=test_hosts_help
	h=$($P worker --help)
	if echo "$h" | grep -q -- "--connect-timeout" &&
		echo "$h" | grep -q "every flag of 'pstrain run --help'" &&
		$P server --epochs 2 --help >/dev/null; then
		ok $n
	else
		no $n "worker --help or server --epochs"
	fi
}

# pstrain node under a launcher's variables (as srun and mpirun set them;
# tests/slurm_test.sh and mpi_test.sh run the real ones): 1 server and 2
# workers from one command line, the server's address found through
# DIR/nodes/ID; the same model as pstrain run's.
test_hosts_node_ranks() {
	n=test_hosts_node_ranks
	c="$T/node"
	mkdir -p "$c"
	$P secret "$c/secret"
	f="node --mode sync --servers 1 $D --steps 20 --out $c/out \
--secret-file $c/secret --job-id j1 --advertise 127.0.0.1 \
--save-model $c/out/m.bin"
	for r in 1 2 0; do
		SLURM_PROCID=$r SLURM_NTASKS=3 within 120 $P $f \
			>"$c/n$r.log" 2>&1 &
	done
	wait
	$P run --mode sync --servers 1 --workers 2 $D --steps 20 \
		--out "$c/run" --save-model "$c/run/m.bin" >"$c/run.log" 2>&1
	url=$(cat "$c/out/nodes/j1/server-0.url" 2>/dev/null)
	case $url in
	tcp://127.0.0.1:[0-9]*) ;;
	*)
		no $n "server-0.url holds '$url'" "$c/n0.log"
		return
		;;
	esac
	same_job $n 0 "$c/out/m.bin" "$c/run/m.bin" 2 "$c/out/summary.json" \
		"$c/n1.log"
}

# With a cluster file the addresses and counts are the file's; the rank
# comes from Open MPI's variables.
test_hosts_node_cluster_file() {
	n=test_hosts_node_cluster_file
	c="$T/nodecl"
	mkdir -p "$c"
	printf 'server ipc://%s/s0\nserver ipc://%s/s1\nworker a\n' "$c" "$c" \
		>"$c/cluster.txt"
	$P secret "$c/secret"
	f="node --cluster $c/cluster.txt $D --steps 20 --out $c/out \
--secret-file $c/secret --save-model $c/out/m.bin"
	for r in 2 1 0; do
		OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=3 within 120 \
			$P $f >"$c/n$r.log" 2>&1 &
	done
	wait
	$P run --servers 2 --workers 1 $D --steps 20 --out "$c/run" \
		--save-model "$c/run/m.bin" >"$c/run.log" 2>&1
	if cmp -s "$c/out/m.bin" "$c/run/m.bin" &&
		grep -q "shard" "$c/n1.log"; then
		ok $n
	else
		no $n "model differs, or rank 1 did not serve" "$c/n2.log"
	fi
}

# Bad set-ups are refused by name, before anything starts.
test_hosts_node_refusals() {
	n=test_hosts_node_refusals
	c="$T/noderr"
	mkdir -p "$c"
	$P secret "$c/secret"
	f="node --servers 1 $D --steps 5 --out $c/out --secret-file $c/secret"
	e1=$(env -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK $P $f 2>&1)
	r1=$?
	e2=$(SLURM_PROCID=0 SLURM_NTASKS=3 $P $f --workers 4 --job-id x 2>&1)
	r2=$?
	e3=$(env -u SLURM_JOB_ID -u OMPI_MCA_ess_base_jobid SLURM_PROCID=1 \
		SLURM_NTASKS=2 $P $f 2>&1)
	r3=$?
	e4=$(SLURM_PROCID=1 SLURM_NTASKS=1 $P $f 2>&1)
	r4=$?
	e5=$(SLURM_PROCID=1 SLURM_NTASKS=2 $P $f --job-id x --mode allreduce 2>&1)
	r5=$?
	if [ "$r1$r2$r3$r4$r5" != 22222 ]; then
		no $n "exits $r1 $r2 $r3 $r4 $r5: $e1 / $e2 / $e3 / $e4 / $e5"
	elif ! echo "$e1" | grep -q "no rank" ||
		! echo "$e2" | grep -q "started 3 processes, but the job has 1 servers and 4 workers" ||
		! echo "$e3" | grep -q "give --job-id" ||
		! echo "$e4" | grep -q "SLURM_PROCID is 1 but SLURM_NTASKS is '1'" ||
		! echo "$e5" | grep -q "allreduce runs no servers: every task is a worker (--servers 1)"; then
		no $n "messages: $e1 / $e2 / $e3 / $e4 / $e5"
	else
		ok $n
	fi
}

test_hosts_same_flags
test_hosts_never_started
test_hosts_server_alone
test_hosts_server_stops_when_workers_gone
test_hosts_help
test_hosts_node_ranks
test_hosts_node_cluster_file
test_hosts_node_refusals
