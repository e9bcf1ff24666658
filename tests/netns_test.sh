#!/bin/bash
# tests/netns_test.sh - jobs across several hosts: three network
# namespaces joined by veth pairs on one private segment
# (tests/netns_lib.sh), each with its own address and nothing else in
# common but the file system. The servers run in host 0, the workers in
# hosts 1 and 2, over tcp between the hosts' addresses. Two ways in, as
# docs/USAGE.md's "Across hosts" and "Under Slurm or mpirun" say: pstrain server
# and worker with a cluster file, and pstrain node with the servers'
# addresses found through DIR/nodes/ID (each server advertising its
# host's own address, the default); and an allreduce ring under pstrain
# node, a worker on each host. Each must save the same model, bit for
# bit, as the same job under pstrain run. Where namespaces cannot be
# made here it prints "skip: ..." and counts no case. Prints "ok NAME" /
# "FAIL NAME" per case.
set -u
cd "$(dirname "$0")/.." || exit 2
P=$PWD/bin/pstrain
. tests/lib.sh
. tests/netns_lib.sh

why=$(netns_available) || {
	echo "skip: $why"
	exit 0
}
W=$(mktemp -d "${TMPDIR:-/tmp}/pt-netns-XXXXXX") || exit 2
trap 'netns_down; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT

J="--data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2 --batch 32 \
--steps 20"

if ! netns_up 3 2>"$W/up.err"; then
	no test_netns_up "namespaces not made" "$W/up.err"
	exit 1
fi
ok test_netns_up

# shellcheck disable=SC2086
$P run --mode sync --servers 2 --workers 2 $J --out "$W/ref" \
	--save-model "$W/ref/m.bin" >"$W/ref.log" 2>&1 ||
	no test_netns_reference "pstrain run failed" "$W/ref.log"

# on I CMD...: CMD in host I, killed after 120 s (a bound against a hang,
# not a timing check).
on() {
	local i=$1
	shift
	netns_exec "$i" timeout -s KILL 120 "$@"
}

# docs/USAGE.md's cluster file, addresses and all: 2 servers on host 0, a worker
# on each of hosts 1 and 2, every process with the same flags.
test_netns_cluster_file() {
	local n=test_netns_cluster_file d="$W/cl" f
	mkdir -p "$d"
	printf 'server tcp://%s:7000\nserver tcp://%s:7001\nworker h1\nworker h2\n' \
		"$NETNS_ADDR_0" "$NETNS_ADDR_0" >"$d/cluster.txt"
	$P secret "$d/job.secret"
	f="--cluster $d/cluster.txt --mode sync $J --out $d/out \
--secret-file $d/job.secret --save-model $d/out/m.bin"
	# shellcheck disable=SC2086
	{
		on 0 $P server $f --rank 0 >"$d/s0.log" 2>&1 &
		on 0 $P server $f --rank 1 >"$d/s1.log" 2>&1 &
		on 2 $P worker $f --rank 1 >"$d/w1.log" 2>&1 &
		on 1 $P worker $f --rank 0 >"$d/w0.log" 2>&1
	}
	local r0=$?
	wait
	if ! grep -q "by worker 0 ($NETNS_ADDR_1:" "$d/s0.log"; then
		no $n "server 0 never heard from host 1's address" "$d/s0.log"
	else
		same_job $n $r0 "$d/out/m.bin" "$W/ref/m.bin" 2 \
			"$d/out/summary.json" "$d/w0.log"
	fi
}

# pstrain node: ranks 0 and 1 serve on host 0, 2 and 3 work on hosts 1
# and 2; no address given anywhere.
test_netns_node() {
	local n=test_netns_node d="$W/node" f url
	mkdir -p "$d"
	$P secret "$d/job.secret"
	f="node --servers 2 --workers 2 --mode sync $J --out $d/out \
--secret-file $d/job.secret --job-id t1 --save-model $d/out/m.bin"
	# shellcheck disable=SC2086
	{
		on 0 $P $f --node-rank 0 >"$d/n0.log" 2>&1 &
		on 0 $P $f --node-rank 1 >"$d/n1.log" 2>&1 &
		on 2 $P $f --node-rank 3 >"$d/n3.log" 2>&1 &
		on 1 $P $f --node-rank 2 >"$d/n2.log" 2>&1
	}
	local r=$?
	wait
	url=$(cat "$d/out/nodes/t1/server-1.url" 2>/dev/null)
	if [ "${url%:*}" != "tcp://$NETNS_ADDR_0" ] ||
		! grep -q "by worker 0 ($NETNS_ADDR_1:" "$d/n0.log"; then
		no $n "server 1 published '$url', not host 0's address, or \
server 0 did not hear from host 1's" "$d/n0.log"
	else
		same_job $n $r "$d/out/m.bin" "$W/ref/m.bin" 2 \
			"$d/out/summary.json" "$d/n2.log"
	fi
}

# pstrain node with --mode allreduce: three workers, one per host, each
# listening on its host's address and publishing it in DIR/nodes/ID; the
# ring's links cross the segment. The model is pstrain run's ring's.
test_netns_allreduce_node() {
	local n=test_netns_allreduce_node d="$W/ar" f url
	mkdir -p "$d"
	$P secret "$d/job.secret"
	# shellcheck disable=SC2086
	$P run --mode allreduce --workers 3 $J --batch 48 --out "$d/ref" \
		--save-model "$d/ref/m.bin" >"$d/ref.log" 2>&1 ||
		{ no $n "pstrain run failed" "$d/ref.log"; return; }
	f="node --workers 3 --mode allreduce $J --batch 48 --out $d/out \
--secret-file $d/job.secret --job-id t2 --save-model $d/out/m.bin"
	# shellcheck disable=SC2086
	{
		on 1 $P $f --node-rank 1 >"$d/n1.log" 2>&1 &
		on 2 $P $f --node-rank 2 >"$d/n2.log" 2>&1 &
		on 0 $P $f --node-rank 0 >"$d/n0.log" 2>&1
	}
	local r=$?
	wait
	url=$(cat "$d/out/nodes/t2/worker-2.url" 2>/dev/null)
	if [ "${url%:*}" != "tcp://$NETNS_ADDR_2" ]; then
		no $n "worker 2 published '$url', not host 2's address" \
			"$d/n2.log"
	else
		same_job $n $r "$d/out/m.bin" "$d/ref/m.bin" 3 \
			"$d/out/summary.json" "$d/n0.log"
	fi
}

test_netns_cluster_file
test_netns_node
test_netns_allreduce_node
netns_down
if ip netns list 2>/dev/null | grep -q "^${NETNS_PREFIX:-pstn-$$-}"; then
	no test_netns_down "namespaces left: $(ip netns list)"
else
	ok test_netns_down
fi
