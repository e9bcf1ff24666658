# tests/mpi_lib.sh - N copies of one command on this machine, started by
# Open MPI's mpirun (sourced, not run; bash). Works as root, with more
# copies than cores, without a terminal (stdin /dev/null or closed), under
# CI=true, and with no network but loopback. Debian: apt-get install -y
# --no-install-recommends openmpi-bin (no other package is needed; ssh is
# not used for copies on this machine).
#
#   . tests/mpi_lib.sh
#   why=$(mpi_available) || { echo "skip: $why"; exit 77; }
#   MPI_TIMEOUT=60 mpi_run 3 bin/prog --flag >out.log 2>&1 || fail
#
# Functions:
#   mpi_available      prints why not and returns 1 where copies cannot be
#                      started: no mpirun, an mpirun that is not Open MPI's,
#                      Open MPI older than 4, or a 1-copy probe run that
#                      fails (about 40 ms).
#   mpi_run N CMD...   runs N copies of CMD (a program; `bash -c '...'` for
#                      shell code) and returns mpirun's status: 0 when all
#                      exit 0; else the status of a copy that failed (the
#                      others are then killed) or mpirun's own error (1;
#                      110 after MPI_TIMEOUT). Each copy gets the caller's
#                      exported environment and working directory (no -x
#                      needed on one machine), stdout and stderr forwarded
#                      line by line (copies interleave; --tag-output in
#                      MPI_FLAGS prefixes them), stdin to copy 0 only, and:
#                        OMPI_COMM_WORLD_RANK        0..N-1
#                        OMPI_COMM_WORLD_SIZE        N
#                        OMPI_COMM_WORLD_LOCAL_RANK  0..N-1 (one machine)
#                        OMPI_COMM_WORLD_LOCAL_SIZE  N
#                        OMPI_COMM_WORLD_NODE_RANK   0..N-1
#                        OMPI_UNIVERSE_SIZE          the machine's cores
#                        PMIX_RANK                   0..N-1
#                      plus OMPI_MCA_*, PMIX_* and OMPI_* (ARGV, COMMAND,
#                      FILE_LOCATION...) wiring that MPI_Init reads.
#
# Knobs (environment, read by mpi_run):
#   MPI_TIMEOUT   seconds; mpirun's own --timeout kills every copy and
#                 returns 110 about 1 s after it. Prefer it to wrapping
#                 mpi_run in timeout(1): a plain `timeout N mpirun` (which
#                 signals mpirun twice at once) was seen to leave all the
#                 copies running; `timeout --foreground` did not.
#   MPI_FLAGS     extra mpirun options, split on spaces (e.g. --tag-output).
#   OMPI_MCA_*    respected: a value the caller set wins over the defaults
#                 below. An MCA parameter may not be given twice on
#                 mpirun's command line (it refuses to start), so defaults
#                 go in the environment, never as --mca.
#
# What mpi_run passes, for Open MPI 4 (tested with 4.1.4):
#   --allow-run-as-root   else mpirun refuses to run as root
#   --oversubscribe       else more copies than cores (2 here) is an error
#   --bind-to none        else N <= cores pins each copy to one core
#   OMPI_MCA_btl=self,vader            MPI traffic in shared memory only
#   OMPI_MCA_btl_tcp_if_include=lo     (and loopback if tcp is chosen)
#   OMPI_MCA_oob_tcp_if_include=lo     launcher's control traffic and the
#                 address it tells the copies: 127.0.0.1 only (it still
#                 binds its listener to every address, unused)
#   OMPI_MCA_orte_tmpdir_base=<new temporary dir>, removed afterwards:
#                 concurrent mpiruns sharing /tmp/ompi.<host>.<uid> failed
#                 about 1 time in 200 ("mkdir ... File exists"), and an
#                 mpirun killed hard leaves its session directory there.
# Debian's /etc/openmpi/openmpi-mca-params.conf already turns off the
# InfiniBand/UCX/libfabric components, so nothing warns in a container
# without them. Open MPI 5 (untested here): --map-by :OVERSUBSCRIBE instead
# of --oversubscribe, btl self,sm, no oob or tmpdir settings.

_mpi_major=""    # Open MPI's major version, set by mpi_available

# _mpi_version: sets _mpi_major from `mpirun --version`; 1 if not Open MPI.
_mpi_version() {
	local line v
	line=$(mpirun --version 2>&1 </dev/null | head -n 1)
	case $line in
	*"Open MPI"*) ;;
	*) echo "mpi: mpirun is not Open MPI's: $line"; return 1 ;;
	esac
	v=${line##* }
	_mpi_major=${v%%.*}
	case $_mpi_major in
	'' | *[!0-9]*) echo "mpi: cannot read the version in: $line"
		return 1 ;;
	esac
	return 0
}

mpi_available() {
	local out
	if ! command -v mpirun >/dev/null 2>&1; then
		echo "mpi: mpirun not installed (Debian: openmpi-bin)"
		return 1
	fi
	_mpi_version || return 1
	if [ "$_mpi_major" -lt 4 ]; then
		echo "mpi: Open MPI $_mpi_major.x is older than 4"
		return 1
	fi
	if ! out=$(MPI_TIMEOUT=30 mpi_run 1 true 2>&1 </dev/null); then
		# The first line of mpirun's message, without its rules.
		echo "mpi: mpirun cannot start a process: $(echo "$out" |
			grep -v -e '^---' -e '^ *$' | head -n 1)"
		return 1
	fi
	return 0
}

mpi_run() {
	local n=${1:?mpi_run N CMD...} base sess rc
	local -a flags env
	shift
	case $n in '' | *[!0-9]*) echo "mpi_run: N must be a number" >&2
		return 2 ;;
	esac
	[ "$n" -ge 1 ] || { echo "mpi_run: N must be at least 1" >&2; return 2; }
	[ $# -gt 0 ] || { echo "mpi_run: no command" >&2; return 2; }
	[ -n "$_mpi_major" ] || _mpi_version >&2 || return 1
	flags=(--allow-run-as-root --bind-to none)
	if [ "$_mpi_major" -ge 5 ]; then
		flags+=(--map-by :OVERSUBSCRIBE)
		env=("OMPI_MCA_btl=${OMPI_MCA_btl-self,sm}")
	else
		flags+=(--oversubscribe)
		# Session directories live in a short private directory: their
		# paths hold Unix socket names, which must stay short.
		base=${TMPDIR:-/tmp}
		[ "${#base}" -le 60 ] && [ -d "$base" ] || base=/tmp
		sess=$(mktemp -d "$base/pt-mpi-XXXXXX") || return 1
		env=("OMPI_MCA_btl=${OMPI_MCA_btl-self,vader}"
			"OMPI_MCA_btl_tcp_if_include=${OMPI_MCA_btl_tcp_if_include-lo}"
			"OMPI_MCA_oob_tcp_if_include=${OMPI_MCA_oob_tcp_if_include-lo}"
			"OMPI_MCA_orte_tmpdir_base=${OMPI_MCA_orte_tmpdir_base-$sess}")
	fi
	[ -n "${MPI_TIMEOUT-}" ] && flags+=(--timeout "$MPI_TIMEOUT")
	# shellcheck disable=SC2086 # MPI_FLAGS is split on purpose
	env "${env[@]}" mpirun "${flags[@]}" ${MPI_FLAGS-} -np "$n" "$@"
	rc=$?
	[ -n "${sess-}" ] && rm -rf "$sess"
	return $rc
}
