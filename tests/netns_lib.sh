# tests/netns_lib.sh - several "hosts" on one machine for multi-host tests
# (sourced, not run; bash). Each host is a Linux network namespace with its
# loopback up and one address on a private L2 segment: a bridge that lives
# in an extra "hub" namespace, one veth pair per host. Nothing is made in
# the root namespace: every link is created with `ip -n NS`, so no
# interface, address or route of a test ever appears there, and the
# segment's subnet is checked to be unused (no address, no route other than
# the default one) in the root namespace first. Needs root and iproute2.
#
#   . tests/netns_lib.sh
#   why=$(netns_available) || { echo "skip: $why"; exit 77; }
#   trap netns_down EXIT
#   netns_up 3 || exit 1
#   netns_bg 0 ./server --listen "$NETNS_ADDR_0:7000" >server.log 2>&1
#   netns_exec 1 ./client --connect "$NETNS_ADDR_0:7000"
#   netns_exec 2 ./client --connect "$NETNS_ADDR_0:7000"
#   netns_down
#
# Functions:
#   netns_available     prints why not and returns 1 where namespaces
#                       cannot be made here: not root, no `ip`, `ip netns
#                       add` fails, or veth or bridge links cannot be made.
#                       Makes and deletes one probe namespace.
#   netns_up N          makes N host namespaces (1..250) plus the hub and
#                       exports what they are (below). Returns 1, with the
#                       reason on stderr and whatever it made deleted, on
#                       failure. One set per shell at a time: call
#                       netns_down before another netns_up. It first deletes
#                       namespaces of this library whose owning shell is
#                       dead (see netns_reap).
#   netns_exec I CMD... runs CMD (a program, not a shell function: use
#                       `bash -c '...'` for those) in host I (0..N-1) with
#                       `ip netns exec`; environment, working directory and
#                       standard streams are the caller's. Returns CMD's
#                       status. `netns_exec I CMD &` works, but $! is
#                       then a subshell running the function, not CMD:
#                       killing it leaves CMD running (use netns_bg).
#   netns_bg I CMD...   starts CMD in host I in the background, as a job
#                       of the calling shell, and sets NETNS_PID to CMD's
#                       own pid (`ip netns exec` execs CMD), so `kill
#                       "$NETNS_PID"` and `wait "$NETNS_PID"` reach CMD
#                       itself. Redirect its output as for any job:
#                       netns_bg 0 server >log 2>&1
#   netns_down          kills every process still inside the namespaces
#                       (TERM, then KILL after $NETNS_TERM_WAIT s, default
#                       5), deletes the host namespaces (their veth pairs go
#                       with them) and the hub (the bridge goes with it),
#                       and unsets the variables. Idempotent, returns 0; safe in an EXIT
#                       trap (bash runs that trap on TERM and HUP too).
#   netns_reap          deletes namespaces named by this library whose
#                       owning shell (the pid in the name) no longer runs,
#                       killing what runs inside them: leftovers of a run
#                       that was killed with SIGKILL.
#
# Variables netns_up exports (plain variables, so that child processes and
# `bash -c` scripts see them too):
#   NETNS_N            number of hosts
#   NETNS_PREFIX       prefix of every namespace name, pstn-<pid>-<k>: the
#                      pid of the shell that called netns_up (so parallel
#                      runs never collide) and a counter
#   NETNS_HUB          the hub namespace (bridge br0, ports h0..h<N-1>)
#   NETNS_SUBNET       the segment, e.g. 10.250.0.0/24
#   NETNS_NAME_<i>     host i's namespace, <prefix>-h<i>
#   NETNS_ADDR_<i>     host i's address, <subnet>.<i+1>, on its eth0
# and bash arrays NETNS_NAMES and NETNS_ADDRS (not inherited by children).
#
# The subnet is 10.250.0.0/24, or the first 10.250.K.0/24 the root namespace
# does not use; NETNS_NET=A.B.C set before netns_up asks for A.B.C.0/24
# instead (refused if the root namespace uses it). Keep it a private range.
# IPv6 is disabled in every namespace: the segment carries IPv4 only.

_netns_ip=""        # path of the ip command
_netns_made=""      # namespaces made by netns_up, newest first
_netns_active=""    # set from netns_up's start until netns_down
_netns_prefix=""    # NETNS_PREFIX and NETNS_N, kept from the caller's edits
_netns_n=0
_netns_seq=0        # netns_up calls in this shell, for unique names

# _netns_find_ip: sets _netns_ip; sbin is not always on a non-login PATH.
_netns_find_ip() {
	local p
	[ -n "$_netns_ip" ] && return 0
	for p in "$(command -v ip 2>/dev/null)" /usr/sbin/ip /sbin/ip \
		/usr/bin/ip /bin/ip; do
		if [ -n "$p" ] && [ -x "$p" ]; then
			_netns_ip=$p
			return 0
		fi
	done
	return 1
}

netns_available() {
	local p err
	if [ "$(id -u)" != 0 ]; then
		echo "netns: not root"
		return 1
	fi
	if ! _netns_find_ip; then
		echo "netns: no ip command (iproute2 not installed)"
		return 1
	fi
	p=pstn-probe-$BASHPID
	"$_netns_ip" netns del "$p" >/dev/null 2>&1
	if ! err=$("$_netns_ip" netns add "$p" 2>&1); then
		echo "netns: ip netns add failed: $err"
		return 1
	fi
	if ! err=$("$_netns_ip" -n "$p" link add name a type veth peer name b 2>&1)
	then
		"$_netns_ip" netns del "$p" >/dev/null 2>&1
		echo "netns: no veth links: $err"
		return 1
	fi
	if ! err=$("$_netns_ip" -n "$p" link add name br0 type bridge 2>&1); then
		"$_netns_ip" netns del "$p" >/dev/null 2>&1
		echo "netns: no bridge links: $err"
		return 1
	fi
	if ! err=$("$_netns_ip" netns del "$p" 2>&1); then
		echo "netns: ip netns del failed: $err"
		return 1
	fi
	return 0
}

# _netns_list: names of all namespaces, one a line.
_netns_list() {
	"$_netns_ip" netns list 2>/dev/null | awk '{ print $1 }'
}

# _netns_kill NS: TERM every process inside NS, then KILL what is left
# after NETNS_TERM_WAIT (default 5) s. Children of this shell among them
# are reaped by it as usual.
_netns_kill() {
	local ns=$1 pids i
	pids=$("$_netns_ip" netns pids "$ns" 2>/dev/null)
	[ -n "$pids" ] || return 0
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null
	for i in $(seq 1 $((${NETNS_TERM_WAIT:-5} * 10))); do
		pids=$("$_netns_ip" netns pids "$ns" 2>/dev/null)
		[ -n "$pids" ] || return 0
		sleep 0.1
	done
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null
	for i in $(seq 1 20); do
		[ -n "$("$_netns_ip" netns pids "$ns" 2>/dev/null)" ] || return 0
		sleep 0.1
	done
	echo "netns_down: processes still in $ns: $pids" >&2
	return 1
}

# _netns_del NS: kill what runs in NS and delete it.
_netns_del() {
	_netns_kill "$1"
	"$_netns_ip" netns del "$1" 2>/dev/null
	return 0
}

netns_reap() {
	local ns pid
	_netns_find_ip || return 0
	for ns in $(_netns_list); do
		case $ns in
		pstn-probe-*) pid=${ns#pstn-probe-} ;;
		pstn-*-*) pid=${ns#pstn-}; pid=${pid%%-*} ;;
		*) continue ;;
		esac
		case $pid in '' | *[!0-9]*) continue ;; esac
		kill -0 "$pid" 2>/dev/null && continue
		[ -d "/proc/$pid" ] && continue
		_netns_del "$ns"
	done
	return 0
}

# _netns_root_uses A.B.C: true when the root namespace has an address in
# A.B.C.0/24, a route inside it, or a route other than a default one that
# covers it.
_netns_root_uses() {
	local sub=$1.0/24
	[ -n "$("$_netns_ip" -4 -o addr show to "$sub" 2>/dev/null)" ] &&
		return 0
	[ -n "$("$_netns_ip" -4 route show table all root "$sub" 2>/dev/null)" ] &&
		return 0
	"$_netns_ip" -4 route show table all match "$sub" 2>/dev/null |
		grep -qvE '^(default|unreachable|blackhole|prohibit|throw) '
}

# _netns_sysctl NS: no IPv6 in NS (no link-local chatter, no DAD wait).
_netns_sysctl() {
	# shellcheck disable=SC2016
	"$_netns_ip" netns exec "$1" sh -c '
		for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 \
			/proc/sys/net/ipv6/conf/default/disable_ipv6; do
			[ -w "$f" ] && echo 1 >"$f"
		done; true' >/dev/null 2>&1
}

# _netns_fail MSG: report, undo what netns_up made, return 1.
_netns_fail() {
	echo "netns_up: $*" >&2
	netns_down
	return 1
}

netns_up() {
	local n=${1:?netns_up N} why net k i prefix ns hub err
	case $n in '' | *[!0-9]*) echo "netns_up: N must be a number" >&2
		return 1 ;;
	esac
	if [ "$n" -lt 1 ] || [ "$n" -gt 250 ]; then
		echo "netns_up: N must be 1..250" >&2
		return 1
	fi
	if [ -n "$_netns_active" ]; then
		echo "netns_up: already up ($_netns_prefix); netns_down first" >&2
		return 1
	fi
	why=$(netns_available) || { echo "netns_up: $why" >&2; return 1; }
	netns_reap

	# The subnet: never one the root namespace has.
	if [ -n "${NETNS_NET-}" ]; then
		net=$NETNS_NET
		if ! [[ $net =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]]; then
			echo "netns_up: NETNS_NET must be A.B.C, not '$net'" >&2
			return 1
		fi
		if _netns_root_uses "$net"; then
			echo "netns_up: the root namespace uses $net.0/24" >&2
			return 1
		fi
	else
		net=""
		for k in $(seq 0 255); do
			if ! _netns_root_uses "10.250.$k"; then
				net=10.250.$k
				break
			fi
		done
		if [ -z "$net" ]; then
			echo "netns_up: every 10.250.K.0/24 is used" >&2
			return 1
		fi
	fi

	# A prefix no namespace has yet: a stale one of a dead shell with the
	# same pid is never reused.
	while :; do
		prefix=pstn-$BASHPID-$_netns_seq
		_netns_seq=$((_netns_seq + 1))
		_netns_list | grep -q "^$prefix-" || break
	done
	hub=$prefix-hub
	NETNS_NAMES=()
	NETNS_ADDRS=()
	export NETNS_N=$n NETNS_PREFIX=$prefix NETNS_HUB=$hub \
		NETNS_SUBNET=$net.0/24
	_netns_active=1
	_netns_prefix=$prefix
	_netns_n=$n

	err=$("$_netns_ip" netns add "$hub" 2>&1) ||
		_netns_fail "ip netns add $hub: $err" || return 1
	_netns_made=$hub
	_netns_sysctl "$hub"
	"$_netns_ip" -n "$hub" link set lo up &&
		"$_netns_ip" -n "$hub" link add name br0 type bridge &&
		"$_netns_ip" -n "$hub" link set br0 up ||
		_netns_fail "no bridge in $hub" || return 1
	for ((i = 0; i < n; i++)); do
		ns=$prefix-h$i
		err=$("$_netns_ip" netns add "$ns" 2>&1) ||
			_netns_fail "ip netns add $ns: $err" || return 1
		_netns_made="$ns $_netns_made"
		_netns_sysctl "$ns"
		# Both ends are made where they live: h<i> in the hub, eth0 in
		# the host; neither is ever in the root namespace.
		err=$({ "$_netns_ip" -n "$hub" link add name "h$i" type veth \
			peer name eth0 netns "$ns" &&
			"$_netns_ip" -n "$hub" link set "h$i" master br0 &&
			"$_netns_ip" -n "$hub" link set "h$i" up &&
			"$_netns_ip" -n "$ns" link set lo up &&
			"$_netns_ip" -n "$ns" addr add "$net.$((i + 1))/24" \
				dev eth0 &&
			"$_netns_ip" -n "$ns" link set eth0 up; } 2>&1) ||
			_netns_fail "links of $ns: $err" || return 1
		# shellcheck disable=SC2034 # for the caller
		NETNS_NAMES[i]=$ns
		# shellcheck disable=SC2034
		NETNS_ADDRS[i]=$net.$((i + 1))
		export "NETNS_NAME_$i=$ns" "NETNS_ADDR_$i=$net.$((i + 1))"
	done
	return 0
}

netns_exec() {
	local i=${1:?netns_exec I CMD...} v
	shift
	case $i in '' | *[!0-9]*) echo "netns_exec: bad host '$i'" >&2
		return 2 ;;
	esac
	v=NETNS_NAME_$i
	if [ -z "$_netns_active" ] || [ -z "${!v-}" ]; then
		echo "netns_exec: no host $i (netns_up first)" >&2
		return 2
	fi
	[ $# -gt 0 ] || { echo "netns_exec: no command" >&2; return 2; }
	"$_netns_ip" netns exec "${!v}" "$@"
}

netns_bg() {
	local i=${1:?netns_bg I CMD...} v
	shift
	NETNS_PID=""
	case $i in '' | *[!0-9]*) echo "netns_bg: bad host '$i'" >&2
		return 2 ;;
	esac
	v=NETNS_NAME_$i
	if [ -z "$_netns_active" ] || [ -z "${!v-}" ]; then
		echo "netns_bg: no host $i (netns_up first)" >&2
		return 2
	fi
	[ $# -gt 0 ] || { echo "netns_bg: no command" >&2; return 2; }
	"$_netns_ip" netns exec "${!v}" "$@" &
	# shellcheck disable=SC2034 # for the caller
	NETNS_PID=$!
	return 0
}

netns_down() {
	local ns i
	[ -n "$_netns_active" ] || return 0
	# Hosts first (newest first), the hub last; then whatever else has the
	# prefix (a netns_up that failed half-way).
	for ns in $_netns_made; do
		_netns_del "$ns"
	done
	for ns in $(_netns_list | grep "^$_netns_prefix-"); do
		_netns_del "$ns"
	done
	for ((i = 0; i < _netns_n; i++)); do
		unset "NETNS_NAME_$i" "NETNS_ADDR_$i"
	done
	unset NETNS_N NETNS_PREFIX NETNS_HUB NETNS_SUBNET NETNS_NAMES \
		NETNS_ADDRS
	_netns_made=""
	_netns_active=""
	_netns_prefix=""
	_netns_n=0
	return 0
}
