# tests/slurm_lib.sh - a real, private, single-node Slurm cluster for tests
# (sourced, not run). Everything it makes lives under one directory: its own
# munged, slurmctld and slurmd, on 127.0.0.1 only; /etc/slurm and /etc/munge
# are never read or written and no service manager is used. Needs root and
# Debian's slurmd and slurmctld packages (they bring slurm-client and munge).
#
#   why=$(slurm_available) || { echo "skip: $why"; exit 77; }
#   W=$(mktemp -d "${TMPDIR:-/tmp}/slurm-XXXXXX")
#   trap 'slurm_down; rm -rf "$W"' EXIT
#   slurm_up "$W" 8 || exit 1
#   srun -n 3 hostname
#
# Functions:
#   slurm_available       print why not and return 1 where no cluster can
#                         start here (not root, a program missing).
#   slurm_up DIR [NCPUS]  start munged, slurmctld and slurmd with every file
#                         under DIR and wait until the node takes jobs. NCPUS
#                         (default 8) may exceed the real cores: that many
#                         tasks run at once, several to a core. Call it in the
#                         test's own shell, not in $(...) or a pipeline: it
#                         exports variables and keeps the daemons' pids
#                         (and opens stdin on /dev/null if it is closed).
#   slurm_down            cancel our jobs, stop our daemons, wait for them.
#                         Safe to call twice and from an EXIT trap.
#
# slurm_up exports SLURM_CONF (read by srun, sbatch, squeue, sinfo, scontrol,
# scancel and, through srun's environment, by the tasks), SLURMLIB_DIR,
# SLURMLIB_NODE (the node's name: localhost) and SLURMLIB_NCPUS. The names
# avoid the SLURM_ prefix on purpose: srun and sbatch read many SLURM_*
# variables as options; slurm_up unsets every SLURM_*, SBATCH_*, SALLOC_*
# and SRUN_* variable it inherits for the same reason.
#
# What jobs see: the node is named localhost, so SLURM_STEP_NODELIST and
# SLURM_JOB_NODELIST are "localhost" and `scontrol show hostnames` turns
# them into a name that resolves to the loopback address on any machine.
# srun and sbatch pass the caller's whole environment (--export=ALL) and run
# tasks in the caller's working directory unless --chdir says otherwise.
# No cgroups and no CPU binding (task/none): every task may use every core.
# Two steps at once in one allocation (a server step and a worker step in
# an sbatch script) need `srun --exact` or `srun --overlap`: without, the
# first step takes all the job's CPUs and the second waits for it to end.
#
# The daemons are children of the calling shell but are disowned, so a bare
# `wait` in the test does not wait for them.

_slurmlib_pids=""	# daemons we started, newest first; slurm_down stops them
_slurmlib_dir=""

# slurm_available: prints why not and returns 1 when a cluster cannot be
# started here (slurmd must be root to start job steps as their user).
slurm_available() {
	local c
	if [ "$(id -u)" != 0 ]; then
		echo "slurm: not root"
		return 1
	fi
	for c in munged slurmctld slurmd srun sbatch sinfo squeue scancel \
		scontrol timeout; do
		if ! command -v "$c" >/dev/null 2>&1 &&
			! [ -x "/usr/sbin/$c" ]; then
			echo "slurm: $c not installed"
			return 1
		fi
	done
	return 0
}

# sbin dirs are not always on a non-login root PATH.
_slurmlib_path() {
	case ":$PATH:" in
	*:/usr/sbin:*) ;;
	*) PATH="$PATH:/usr/sbin:/sbin" ;;
	esac
}

# _slurmlib_busy PORT: true when something listens on TCP PORT.
_slurmlib_busy() {
	local hex
	if command -v ss >/dev/null 2>&1; then
		[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
		return
	fi
	# Without iproute2: listening sockets are state 0A in /proc/net/tcp*.
	hex=$(printf '%04X' "$1")
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" { f = 1 } END { exit !f }'
}

# _slurmlib_ports: prints two free adjacent ports (controller, slurmd),
# starting from a random point so parallel clusters rarely collide. The
# range stays below the kernel's ephemeral ports (32768 and up by default).
_slurmlib_ports() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + (RANDOM % 4000) * 2))
		if ! _slurmlib_busy "$p" && ! _slurmlib_busy $((p + 1)); then
			echo "$p $((p + 1))"
			return 0
		fi
	done
	return 1
}

# _slurmlib_tails: the logs' last lines, for a cluster that did not come up.
_slurmlib_tails() {
	local f
	for f in "$_slurmlib_dir"/log/*.log; do
		[ -f "$f" ] || continue
		echo "--- ${f##*/} (last 15 lines)" >&2
		tail -n 15 "$f" | sed 's/^/    | /' >&2
	done
}

# _slurmlib_wait SECS CMD...: run CMD every 0.2 s until it succeeds or SECS
# pass.
_slurmlib_wait() {
	local end=$((SECONDS + $1))
	shift
	while :; do
		"$@" && return 0
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.2
	done
}

# _slurmlib_spawn LOGNAME CMD...: start daemon CMD in the background with no
# stdin and its output in log/LOGNAME.out (a daemon holding the caller's
# stdout would keep a pipe open), add its pid to _slurmlib_pids and disown
# it: a bare `wait` in the caller then does not wait for it, and bash still
# reaps it when it exits, so no zombie is left.
_slurmlib_spawn() {
	local name=$1
	shift
	"$@" </dev/null >>"$_slurmlib_dir/log/$name.out" 2>&1 &
	_slurmlib_pids="$! $_slurmlib_pids"
	disown $!
}

# _slurmlib_ours PID: true while PID runs and is one of this cluster's
# daemons (every one has our directory on its command line), so a pid that
# was reused by an unrelated process is never signalled.
_slurmlib_ours() {
	local cmd
	cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 1
	case $cmd in
	*"$_slurmlib_dir"*) return 0 ;;
	esac
	return 1
}

# _slurmlib_gone PID: exited (a zombie not yet reaped counts as gone).
_slurmlib_gone() {
	local st
	kill -0 "$1" 2>/dev/null || return 0
	st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 0
	[ "$st" = Z ]
}

# _slurmlib_all_alive: true while every daemon we started still runs.
_slurmlib_all_alive() {
	local p
	for p in $_slurmlib_pids; do
		_slurmlib_gone "$p" && return 1
	done
	return 0
}

# _slurmlib_stop SECS PID...: TERM each of our daemons, KILL it after SECS.
_slurmlib_stop() {
	local p secs=$1
	shift
	for p in "$@"; do
		_slurmlib_ours "$p" || continue
		kill -TERM "$p" 2>/dev/null
		_slurmlib_wait "$secs" _slurmlib_gone "$p" ||
			kill -KILL "$p" 2>/dev/null
		_slurmlib_wait 5 _slurmlib_gone "$p"
	done
}

_slurmlib_node_idle() {
	[ "$(timeout 5 sinfo -h -n "$SLURMLIB_NODE" -o %T 2>/dev/null)" = idle ]
}

# _slurmlib_settled: the node is idle, or a daemon died (no use waiting).
_slurmlib_settled() {
	! _slurmlib_all_alive || _slurmlib_node_idle
}

# _slurmlib_conf CPORT DPORT COMM: write slurm.conf for the current cluster.
_slurmlib_conf() {
	local dir=$_slurmlib_dir sock=$_slurmlib_dir/run/munge.socket
	# SlurmctldHost "localhost" is accepted as this host whatever its
	# name; the address in () spares a name lookup.
	# NodeName=localhost: the node list tasks see resolves to loopback
	# everywhere (slurmd is told its name with -N); NodeAddr is where
	# slurmctld and srun reach slurmd.
	# CPUs=NCPUS with SlurmdParameters=config_overrides: slurmd takes the
	# count as given instead of draining the node for having fewer real
	# cores, so more tasks than cores run at once. CR_CPU: CPUs are the
	# only consumable; memory is not tracked, so steps never wait for it.
	# proctrack/linuxproc and task/none: no cgroups, no CPU binding.
	# MinJobAge=5: sbatch --wait polls every 2 s while MinJobAge <= 5
	# and backs off to 8 s and more above (at 10, a job of 1 s kept it
	# waiting 10 s). Not less: a job purged before sbatch --wait polls
	# again makes it exit 0 whatever the job did, and slurmctld takes
	# anything under 2 as 2. Finished jobs stay in `scontrol show job`
	# for at least 5 s.
	# batch_sched_delay=0: a batch job starts within 1 s of sbatch, not 3.
	# PlugStackConfig and the other optional files (cgroup.conf, gres.conf
	# ...) are looked for next to slurm.conf, i.e. in DIR, where there
	# are none.
	cat >"$dir/slurm.conf" <<EOF
ClusterName=pstrain
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
CommunicationParameters=$3
InactiveLimit=0
KillWait=5
MinJobAge=5
SchedulerParameters=batch_sched_delay=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$SLURMLIB_NODE NodeAddr=127.0.0.1 NodeHostname=$SLURMLIB_NODE CPUs=$SLURMLIB_NCPUS State=UNKNOWN
PartitionName=debug Nodes=$SLURMLIB_NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

# slurm_up WORKDIR [NCPUS]: start munged, slurmctld and slurmd with all
# their files under WORKDIR (an empty directory the caller owns and later
# removes) and wait up to 30 s for the node to be idle. NCPUS (default 8) may
# exceed the real core count: that many tasks can run at once. A daemon that
# dies while starting (say another process took its port in between) is
# retried on new ports, up to 3 times. On failure it prints the logs'
# tails, stops what it started and returns 1.
slurm_up() {
	local dir=${1:?slurm_up WORKDIR [NCPUS]} ncpus=${2:-8}
	local why ports comm try v
	why=$(slurm_available) || { echo "slurm_up: $why" >&2; return 1; }
	if [ -n "$_slurmlib_pids" ]; then
		echo "slurm_up: a cluster is already up in $_slurmlib_dir" >&2
		return 1
	fi
	case $ncpus in
	'' | *[!0-9]* | 0)
		echo "slurm_up: NCPUS must be a positive number: $ncpus" >&2
		return 1
		;;
	esac
	# With stdin closed, the first file or socket a program opens becomes
	# its fd 0: srun in $(...) then prints nothing and exits 0. Make it
	# /dev/null (only when closed) for the caller, the daemons and srun.
	{ true 3<&0; } 2>/dev/null || exec </dev/null
	_slurmlib_path
	mkdir -p "$dir" && dir=$(cd "$dir" && pwd) || return 1
	# Unix socket paths hold at most 107 bytes; slurmd's step sockets are
	# DIR/spool/localhost_JOBID.STEPID.
	if [ "${#dir}" -gt 60 ]; then
		echo "slurm_up: $dir: longer than 60 bytes, too long for" \
			"the sockets under it" >&2
		return 1
	fi
	_slurmlib_dir=$dir
	# An outer allocation's variables (this may itself run under Slurm),
	# or any SLURM_*/SBATCH_*/SALLOC_* option left in the environment,
	# would point srun and sbatch at a job or a setting our cluster never
	# had.
	for v in $(compgen -e); do
		case $v in
		SLURM_* | SBATCH_* | SALLOC_* | SRUN_*) unset "$v" ;;
		esac
	done
	# munged refuses a key that others could read or replace.
	mkdir -p "$dir/munge" "$dir/log" "$dir/spool" "$dir/state" "$dir/run" ||
		return 1
	chmod 0700 "$dir/munge" || return 1
	if command -v mungekey >/dev/null 2>&1; then
		mungekey --create --keyfile="$dir/munge/munge.key" ||
			return 1
	else
		dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 \
			2>/dev/null || return 1
	fi
	chmod 0400 "$dir/munge/munge.key"
	# -F: foreground, so $! is its pid. -f: munged wants every dir above
	# its socket searchable by all (mktemp -d makes 0700); only root talks
	# to it here, so that check may be a warning.
	_slurmlib_spawn munged munged -F -f --socket="$dir/run/munge.socket" \
		--key-file="$dir/munge/munge.key" \
		--pid-file="$dir/munge/munged.pid" \
		--log-file="$dir/log/munged.log" \
		--seed-file="$dir/munge/munged.seed"
	if ! _slurmlib_wait 10 test -S "$dir/run/munge.socket"; then
		echo "slurm_up: munged did not start" >&2
		_slurmlib_tails
		slurm_down
		return 1
	fi

	export SLURM_CONF=$dir/slurm.conf SLURMLIB_DIR=$dir \
		SLURMLIB_NODE=localhost SLURMLIB_NCPUS=$ncpus
	# Listen on 127.0.0.1, not on every interface: slurmctld binds to
	# SlurmctldHost, slurmd to NodeAddr, srun to what this host's name
	# resolves to, so srun's part only where that is a loopback address.
	comm=NoCtldInAddrAny
	case $(getent ahostsv4 "$(hostname)" 2>/dev/null |
		awk 'NR == 1 { print $1 }') in
	127.*) comm=$comm,NoInAddrAny ;;
	esac
	for try in 1 2 3; do
		ports=$(_slurmlib_ports) || {
			echo "slurm_up: no free ports" >&2
			slurm_down
			return 1
		}
		_slurmlib_conf "${ports% *}" "${ports#* }" "$comm" || {
			slurm_down
			return 1
		}
		# -D: foreground, known pids; -c: no saved state; -i:
		# slurmctld ignores a state dir it never had.
		_slurmlib_spawn slurmctld slurmctld -D -c -i -f "$SLURM_CONF"
		_slurmlib_spawn slurmd slurmd -D -N "$SLURMLIB_NODE" \
			-f "$SLURM_CONF"
		_slurmlib_wait 30 _slurmlib_settled
		if _slurmlib_all_alive && _slurmlib_node_idle; then
			return 0
		fi
		# All up but the node not idle in 30 s: no use trying again.
		_slurmlib_all_alive && break
		[ "$try" = 3 ] && break
		# A daemon exited at start (its port taken since we chose
		# it, say): kill slurmd and slurmctld, the list's first two,
		# which hold no job yet, and try new ports.
		echo "slurm_up: a daemon exited at start (try $try), retrying" >&2
		# shellcheck disable=SC2086
		set -- $_slurmlib_pids
		_slurmlib_stop 0 "$1" "$2"
		_slurmlib_pids=$3
	done
	echo "slurm_up: node $SLURMLIB_NODE not idle in 30 s, or a daemon" \
		"exited" >&2
	timeout 5 sinfo >&2
	_slurmlib_tails
	slurm_down
	return 1
}

# _slurmlib_steps: pids of slurmstepd processes of this cluster (their
# environment names our slurm.conf, which slurmd passes on to them).
_slurmlib_steps() {
	local f p
	for f in /proc/[0-9]*/comm; do
		[ "$(cat "$f" 2>/dev/null)" = slurmstepd ] || continue
		p=${f%/comm}
		tr '\0' '\n' 2>/dev/null <"$p/environ" |
			grep -qxF "SLURM_CONF=$_slurmlib_dir/slurm.conf" &&
			echo "${p#/proc/}"
	done
}

_slurmlib_no_steps() {
	[ -z "$(_slurmlib_steps)" ]
}

# _slurmlib_reaped PID...: none of these is a slurmstepd zombie any more.
_slurmlib_reaped() {
	local p st
	for p in "$@"; do
		st=$(cut -d' ' -f2,3 "/proc/$p/stat" 2>/dev/null)
		[ "$st" = "(slurmstepd) Z" ] && return 1
	done
	return 0
}

_slurmlib_no_jobs() {
	[ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ]
}

# slurm_down: cancel our jobs, stop slurmd, slurmctld and munged by pid and
# wait for them (TERM, then KILL after 10 s). Safe to call twice or from an
# EXIT trap; returns 0 once nothing of ours runs.
slurm_down() {
	local jobs steps
	[ -n "$_slurmlib_pids" ] || return 0
	steps=$(_slurmlib_steps)
	# Cancel first: slurmstepd and job tasks are not our children and
	# would outlive slurmd.
	if [ "${SLURM_CONF-}" = "$_slurmlib_dir/slurm.conf" ]; then
		jobs=$(timeout 5 squeue -h -o %A 2>/dev/null)
		if [ -n "$jobs" ]; then
			# shellcheck disable=SC2086
			timeout 5 scancel $jobs 2>/dev/null
			_slurmlib_wait 15 _slurmlib_no_jobs
		fi
	fi
	# A slurmstepd still running after that (hung, or its job was lost)
	# would outlive slurmd: give it 10 s, then kill it.
	if ! _slurmlib_wait 10 _slurmlib_no_steps; then
		# shellcheck disable=SC2046
		kill -KILL $(_slurmlib_steps) 2>/dev/null
	fi
	# $_slurmlib_pids is newest first: slurmd, slurmctld, munged.
	# shellcheck disable=SC2086
	_slurmlib_stop 10 $_slurmlib_pids
	# An exited slurmstepd is not our child but init's, and shows as
	# <defunct> until init reaps it, which some inits do only now and
	# then: give the ones that ran when we were called 3 s to go.
	# shellcheck disable=SC2086
	_slurmlib_wait 3 _slurmlib_reaped $steps
	_slurmlib_pids=""
	return 0
}
