#!/bin/bash
# tests/slurm_test.sh - pstrain jobs under a real Slurm: a private
# single-node cluster (tests/slurm_lib.sh: munged, slurmctld and slurmd on
# 127.0.0.1) runs a job with `srun pstrain node` and the example
# examples/slurm/job.sbatch with `sbatch --wait`; each must save the same
# model, bit for bit, as the same sync job under pstrain run. Where Slurm
# cannot run here (not root, packages missing) it prints "skip: ..." and
# counts no case. Prints "ok NAME" / "FAIL NAME" per case.
set -u
cd "$(dirname "$0")/.." || exit 2
P=$PWD/bin/pstrain
. tests/lib.sh
. tests/slurm_lib.sh

why=$(slurm_available) || {
	echo "skip: $why"
	exit 0
}
W=$(mktemp -d "${TMPDIR:-/tmp}/pt-slurm-XXXXXX") || exit 2
trap 'slurm_down; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT

# The job: 1 server and 2 workers (3 tasks), small enough for seconds.
J="--data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2 --batch 32 \
--steps 20 --validation 0 --lr-scaling none --warmup-epochs 0"

if ! slurm_up "$W/cluster" 8 2>"$W/up.err"; then
	no test_slurm_up "the cluster did not start" "$W/up.err"
	exit 1
fi
ok test_slurm_up

$P run --mode sync --servers 1 --workers 2 $J --out "$W/ref" \
	--save-model "$W/ref/m.bin" >"$W/ref.log" 2>&1 ||
	no test_slurm_reference "pstrain run failed" "$W/ref.log"

# srun: one command on 3 tasks; the servers' address through
# DIR/nodes/slurm-JOB.STEP.
test_slurm_srun() {
	local n=test_slurm_srun d="$W/srun"
	mkdir -p "$d"
	$P secret "$d/job.secret"
	# shellcheck disable=SC2086
	timeout 120 srun -n 3 "$P" node --servers 1 --mode sync $J \
		--advertise 127.0.0.1 --out "$d/out" \
		--secret-file "$d/job.secret" --save-model "$d/out/m.bin" \
		>"$d/srun.log" 2>&1
	local r=$?
	if ! ls "$d"/out/nodes/slurm-*/server-0.url >/dev/null 2>&1; then
		no $n "no nodes/slurm-JOB.STEP/server-0.url (srun exit $r)" \
			"$d/srun.log"
	else
		same_job $n $r "$d/out/m.bin" "$W/ref/m.bin" 2 \
			"$d/out/summary.json" "$d/srun.log"
	fi
}

# sbatch: the example script as a user submits it (its node count
# overridden for this one-node cluster), the job's flags after its own.
test_slurm_sbatch() {
	local n=test_slurm_sbatch d="$W/sbatch"
	mkdir -p "$d"
	PSTRAIN=$P OUT="$d/out" ARGS="$J --advertise 127.0.0.1" LENGTH="" \
		timeout 180 sbatch --wait -N 1 -n 3 -o "$d/job.out" \
		examples/slurm/job.sbatch >"$d/sbatch.log" 2>&1
	local r=$?
	cat "$d/job.out" >>"$d/sbatch.log" 2>/dev/null
	if ! grep -q "summary: $d/out/summary.json" "$d/job.out"; then
		no $n "no summary line in the job's output (exit $r)" \
			"$d/sbatch.log"
	else
		same_job $n $r "$d/out/model.bin" "$W/ref/m.bin" 2 \
			"$d/out/summary.json" "$d/sbatch.log"
	fi
}

# The compare example: a job per mode and seed as srun steps, then
# compare --report-only over them: report.md has each mode with both
# seeds, and the sync jobs are pstrain run's (seed 7 is the reference's).
test_slurm_compare() {
	local n=test_slurm_compare d="$W/cmp" m
	mkdir -p "$d"
	PSTRAIN=$P OUT="$d/out" SEEDS=2 ARGS="$J" LENGTH="" \
		NODE_ARGS="--advertise 127.0.0.1" \
		timeout 300 sbatch --wait -N 1 -n 3 -o "$d/job.out" \
		examples/slurm/compare.sbatch >"$d/sbatch.log" 2>&1
	local r=$?
	if [ "$r" != 0 ]; then
		cat "$d/job.out" >>"$d/sbatch.log" 2>/dev/null
		no $n "sbatch exit $r" "$d/sbatch.log"
		return
	fi
	for m in sync async ssp-2; do
		if ! grep -q "^| $m | 2 " "$d/out/report.md"; then
			no $n "report.md has no row for $m over 2 seeds" \
				"$d/job.out"
			return
		fi
	done
	if grep -q "Made with --report-only" "$d/out/report.md"; then
		ok $n
	else
		no $n "report.md does not say it ran none of the jobs" \
			"$d/out/report.md"
	fi
}

test_slurm_srun
test_slurm_sbatch
test_slurm_compare
slurm_down
# Nothing of the cluster may outlive the test.
if pgrep -f -- "$W/cluster" >/dev/null; then
	no test_slurm_down "daemons still running: $(pgrep -af -- "$W/cluster")"
else
	ok test_slurm_down
fi
