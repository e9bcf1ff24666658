#!/bin/bash
# tests/mpi_smoke.sh - start 3 copies with tests/mpi_lib.sh (more copies
# than this machine's 2 cores, as root, stdin /dev/null, CI=true) and prove
# each sees its rank 0..2, size 3, the caller's exported environment and
# working directory, loopback-only launcher addresses, that a failing copy
# fails the run, and that MPI_TIMEOUT ends a hung run with no copy left and
# no session directory left. Exit 0 on success, 77 ("skip: ...") where
# mpirun is not available, 1 on failure.
[ -n "${BASH_VERSION-}" ] || exec bash "$0" "$@"	# also when run with sh
set -u
cd "$(dirname "$0")/.." || exit 2
. tests/mpi_lib.sh

why=$(mpi_available) || { echo "skip: $why"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/pt-mpi-smoke-XXXXXX") || exit 2
trap 'rm -rf "$W"' EXIT
# mpi_run's session directories go under $W, to check they are removed.
export TMPDIR=$W

fail() { echo "FAIL mpi_smoke: $*"; exit 1; }

now() { echo "${EPOCHREALTIME:-$(date +%s.%N)}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

export MPI_SMOKE_VAR="exported value"
# shellcheck disable=SC2034 # must not reach the copies
NOT_EXPORTED=1

# 1. Ranks, sizes, environment, working directory.
mkdir -p "$W/wd" && cd "$W/wd" || exit 2
t0=$(now)
# shellcheck disable=SC2016
CI=true mpi_run 3 bash -c '
	echo "$OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE" \
		"$OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE" \
		"$PMIX_RANK|$MPI_SMOKE_VAR|${NOT_EXPORTED-unset}|$CI|$(pwd)"
	echo "$OMPI_COMM_WORLD_RANK ${OMPI_MCA_orte_hnp_uri-}" >"uri.$OMPI_COMM_WORLD_RANK"
' </dev/null >"$W/ranks.out" 2>"$W/ranks.err" ||
	fail "mpi_run 3: $(cat "$W/ranks.out" "$W/ranks.err")"
run_ms=$(since "$t0")
cd - >/dev/null || exit 2
want="0 3 0 3 0|exported value|unset|true|$W/wd
1 3 1 3 1|exported value|unset|true|$W/wd
2 3 2 3 2|exported value|unset|true|$W/wd"
[ "$(sort "$W/ranks.out")" = "$want" ] ||
	fail "copies saw: $(cat "$W/ranks.out" "$W/ranks.err")"
[ -s "$W/ranks.err" ] && fail "stderr not empty: $(cat "$W/ranks.err")"
echo "mpi_run 3 (ranks 0..2 of 3, env and cwd kept) took $run_ms ms"

# 2. The launcher told the copies loopback addresses only (Open MPI 4).
for r in 0 1 2; do
	uri=$(cut -d' ' -f2- "$W/wd/uri.$r")
	[ -z "$uri" ] && continue
	echo "$uri" | tr ';' '\n' | grep '://' |
		grep -qv -e '//127\.[0-9.]*:' -e '//\[::1\]:' &&
		fail "rank $r was given a non-loopback address: $uri"
done

# 3. Timing of the plain case.
t0=$(now)
mpi_run 3 true </dev/null || fail "mpi_run 3 true"
echo "mpi_run 3 true took $(since "$t0") ms"

# 4. A failing copy fails the run, with its status.
# shellcheck disable=SC2016
mpi_run 3 bash -c '[ "$OMPI_COMM_WORLD_RANK" != 1 ] || exit 3' \
	</dev/null >"$W/fail.out" 2>&1
rc=$?
[ "$rc" = 3 ] || fail "a copy exiting 3 gave $rc: $(cat "$W/fail.out")"

# 5. MPI_TIMEOUT ends a hung run and every copy.
t0=$(now)
# shellcheck disable=SC2016
MPI_TIMEOUT=1 mpi_run 3 sh -c 'echo $$ >"$1.$OMPI_COMM_WORLD_RANK"
	exec sleep 60' - "$W/pid" </dev/null >"$W/timeout.out" 2>&1
rc=$?
[ "$rc" != 0 ] || fail "a hung run with MPI_TIMEOUT=1 succeeded"
echo "MPI_TIMEOUT=1 ended a hung run in $(since "$t0") ms (status $rc)"
for r in 0 1 2; do
	p=$(cat "$W/pid.$r" 2>/dev/null) || fail "copy $r never started"
	# A copy being killed may take a moment to go: waited for, 10 s.
	i=0
	while [ "$i" -lt 200 ]; do
		st=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)
		{ [ -z "$st" ] || [ "$st" = Z ]; } && break
		sleep 0.05
		i=$((i + 1))
	done
	if [ -n "$st" ] && [ "$st" != Z ]; then
		kill -KILL "$p"
		fail "copy $r (pid $p) outlived MPI_TIMEOUT"
	fi
done

# 6. No session directory left behind.
left=$(find "$W" -mindepth 1 -maxdepth 1 -name 'pt-mpi-*')
[ -z "$left" ] || fail "session directories left: $left"
echo "ok mpi_smoke"
