#!/bin/bash
# tests/slurm_smoke.sh - start a private one-node Slurm cluster with
# tests/slurm_lib.sh and prove srun and sbatch run tasks on it the way the
# job tests need: more tasks than cores, the caller's environment and
# working directory, the SLURM_* variables a task reads, and a node list that
# `scontrol show hostnames` expands. Exit 0 on success, 77 ("skip: ...")
# where Slurm cannot be started, 1 on failure.
set -u
cd "$(dirname "$0")/.." || exit 2
. tests/slurm_lib.sh

why=$(slurm_available) || { echo "skip: $why"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/pt-slurm-XXXXXX") || exit 2
trap 'slurm_down; rm -rf "$W"' EXIT

fail() { echo "FAIL slurm_smoke: $*"; exit 1; }
# ms: milliseconds since the epoch.
ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((t / 1000)); }
start=$(ms)

t0=$(ms)
slurm_up "$W/c" 8 2>"$W/up.err" || {
	cat "$W/up.err"
	fail "slurm_up"
}
echo "slurm_up took $(($(ms) - t0)) ms"

# The daemons must not be jobs of this shell: a bare `wait` would hang.
[ -z "$(jobs -p)" ] || fail "daemons are jobs of the caller: $(jobs -p)"

# srun on its own: 3 tasks, each prints its rank (expanded by the task).
# shellcheck disable=SC2016
out=$(timeout 60 srun -n 3 bash -c 'echo "$SLURM_PROCID $(hostname -s)"' 2>"$W/srun.err") ||
	fail "srun: $out $(cat "$W/srun.err")"
[ "$(echo "$out" | awk '{print $1}' | sort -n | tr '\n' ' ')" = "0 1 2 " ] ||
	fail "srun ranks: $out"

# Tasks see the caller's environment and working directory, their rank, the
# task count and a node list that scontrol expands inside the task.
mkdir "$W/run dir" || fail "mkdir"
cd "$W/run dir" || fail "cd"
export SLURMSMOKE_VAR="a b=c"
# shellcheck disable=SC2016
out=$(timeout 60 srun -n 3 bash -c 'echo "$SLURM_PROCID $SLURM_NTASKS" \
	"$SLURM_STEP_NODELIST" "$(scontrol show hostnames "$SLURM_STEP_NODELIST")" \
	"[$SLURMSMOKE_VAR]" "$PWD"' 2>"$W/srun.err") ||
	fail "srun env: $out $(cat "$W/srun.err")"
want="0 3 $SLURMLIB_NODE $SLURMLIB_NODE [a b=c] $W/run dir
1 3 $SLURMLIB_NODE $SLURMLIB_NODE [a b=c] $W/run dir
2 3 $SLURMLIB_NODE $SLURMLIB_NODE [a b=c] $W/run dir"
[ "$(echo "$out" | sort)" = "$want" ] || fail "srun env: got
$out
want
$want"
out=$(timeout 60 srun -n 1 --chdir="$W" pwd 2>"$W/srun.err") ||
	fail "srun --chdir: $out $(cat "$W/srun.err")"
[ "$out" = "$W" ] || fail "srun --chdir: ran in $out, not $W"
cd - >/dev/null || fail "cd -"

# More tasks than cores, all at once: each of NCPUS tasks waits (up to 20 s)
# until every one has checked in.
mkdir "$W/in" || fail "mkdir"
# shellcheck disable=SC2016
timeout 60 srun -n "$SLURMLIB_NCPUS" bash -c 'touch "$1/$SLURM_PROCID"
	for _ in $(seq 100); do
		[ "$(ls "$1" | wc -l)" -ge "$SLURM_NTASKS" ] && exit 0
		sleep 0.2
	done
	exit 1' - "$W/in" 2>"$W/srun.err" ||
	fail "$SLURMLIB_NCPUS tasks at once on $(nproc) cores: $(cat "$W/srun.err")"

# sbatch --wait: a batch job whose srun step writes one line per task.
cat >"$W/job.sh" <<'JOB'
#!/bin/bash
srun bash -c 'echo "rank $SLURM_PROCID of $SLURM_NTASKS"' >"$1"
JOB
out=$(timeout 90 sbatch --wait -n 3 -o "$W/job.out" "$W/job.sh" "$W/ranks" 2>&1) ||
	fail "sbatch: $out; $(cat "$W/job.out" 2>/dev/null)"
[ "$(sort "$W/ranks" 2>/dev/null | tr '\n' ' ')" = "rank 0 of 3 rank 1 of 3 rank 2 of 3 " ] ||
	fail "sbatch output: $(cat "$W/ranks" "$W/job.out" 2>/dev/null)"

# A batch job running a server and workers as two steps at once: without
# --exact (or --overlap) the first step takes all the job's CPUs and the
# second waits for it to end. Both wait for each other here (up to 20 s).
cat >"$W/par.sh" <<'JOB'
#!/bin/bash
meet='touch "$1/$2"; for _ in $(seq 100); do
	[ -e "$1/server" ] && [ -e "$1/worker" ] && exit 0; sleep 0.2; done; exit 1'
srun --exact -n 1 bash -c "$meet" - "$1" server &
srun --exact -n 2 bash -c "$meet" - "$1" worker &
wait -n && wait -n
JOB
mkdir "$W/meet" || fail "mkdir"
out=$(timeout 90 sbatch --wait -n 3 -o "$W/par.out" "$W/par.sh" "$W/meet" 2>&1) ||
	fail "sbatch, two steps at once: $out; $(cat "$W/par.out" 2>/dev/null)"

# sbatch --wait passes on the job's exit code.
printf '#!/bin/bash\nexit 3\n' >"$W/fail.sh"
timeout 90 sbatch --wait -o /dev/null "$W/fail.sh" >/dev/null 2>&1
rc=$?
[ "$rc" = 3 ] || fail "sbatch --wait of a job that exits 3 returned $rc"

t0=$(ms)
slurm_down
echo "slurm_down took $(($(ms) - t0)) ms"
echo "slurm_smoke took $(($(ms) - start)) ms"
echo "ok slurm_smoke"
