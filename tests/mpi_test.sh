#!/bin/bash
# tests/mpi_test.sh - a pstrain job under Open MPI's mpirun: `mpirun -np 3
# pstrain node` (tests/mpi_lib.sh adds what running as root on this
# machine needs), the rank from OMPI_COMM_WORLD_RANK, the servers'
# address through DIR/nodes/ompi-JOBID. The job must save the same model,
# bit for bit, as the same sync job under pstrain run. Where mpirun cannot
# run here it prints "skip: ..." and counts no case. Prints "ok NAME" /
# "FAIL NAME" per case.
set -u
cd "$(dirname "$0")/.." || exit 2
P=$PWD/bin/pstrain
. tests/lib.sh
. tests/mpi_lib.sh

why=$(mpi_available) || {
	echo "skip: $why"
	exit 0
}
W=$(mktemp -d "${TMPDIR:-/tmp}/pt-mpi-XXXXXX") || exit 2
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT

J="--data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2 --batch 32 \
--steps 20"

test_mpi_node() {
	local n=test_mpi_node
	# shellcheck disable=SC2086
	$P run --mode sync --servers 1 --workers 2 $J --out "$W/ref" \
		--save-model "$W/ref/m.bin" >"$W/ref.log" 2>&1 ||
		{ no $n "pstrain run failed" "$W/ref.log"; return; }
	$P secret "$W/job.secret"
	# shellcheck disable=SC2086
	MPI_TIMEOUT=120 mpi_run 3 "$P" node --servers 1 --mode sync $J \
		--advertise 127.0.0.1 --out "$W/out" \
		--secret-file "$W/job.secret" --save-model "$W/out/m.bin" \
		>"$W/mpi.log" 2>&1
	local r=$?
	if ! ls "$W"/out/nodes/ompi-*/server-0.url >/dev/null 2>&1; then
		no $n "no nodes/ompi-JOBID/server-0.url (mpirun exit $r)" \
			"$W/mpi.log"
	else
		same_job $n $r "$W/out/m.bin" "$W/ref/m.bin" 2 \
			"$W/out/summary.json" "$W/mpi.log"
	fi
}

test_mpi_node
