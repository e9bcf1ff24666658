#!/bin/bash
# tests/netns_smoke.sh - make 3 hosts with tests/netns_lib.sh and prove:
# hosts 1 and 2 reach a TCP listener on host 0 over the shared segment, from
# their own addresses; the root namespace gains no interface, address or
# route and has no way to the segment; netns_down kills what still runs in
# the hosts and leaves no namespace or link behind. Exit 0 on success, 77
# ("skip: ...") where namespaces cannot be made, 1 on failure.
#
# "The root namespace cannot reach them" is shown without sending it a
# packet: a connection attempt from the root namespace to the segment's
# private addresses would leave through the machine's real uplink. Instead:
# no interface, address or route of the test appears in the root namespace,
# and `ip route get` there resolves a host's address to no device of ours.
[ -n "${BASH_VERSION-}" ] || exec bash "$0" "$@"	# also when run with sh
set -u
cd "$(dirname "$0")/.." || exit 2
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac
. tests/netns_lib.sh

why=$(netns_available) || { echo "skip: $why"; exit 77; }
command -v python3 >/dev/null 2>&1 ||
	{ echo "skip: netns_smoke: python3 not installed"; exit 77; }
command -v timeout >/dev/null 2>&1 ||
	{ echo "skip: netns_smoke: timeout not installed"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/pt-netns-XXXXXX") || exit 2
trap 'netns_down; rm -rf "$W"' EXIT

fail() { echo "FAIL netns_smoke: $*"; exit 1; }

# now: seconds since the epoch with microseconds.
now() { echo "${EPOCHREALTIME:-$(date +%s.%N)}"; }
# since T0: milliseconds from T0 to now.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

# root_state: the root namespace's links, addresses and routes.
root_state() {
	ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort
	ip -o addr show | awk '{ print $2, $3, $4 }' | sort
	ip route show table all | sort
	ip -6 route show table all | sort
}

export NETNS_SMOKE_EXPORTED=yes
root_state >"$W/root.before"
ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' >"$W/links"
ip netns list | awk '{ print $1 }' | sort >"$W/netns.before"

t0=$(now)
netns_up 3 2>"$W/up.err" || fail "netns_up: $(cat "$W/up.err")"
up_ms=$(since "$t0")
echo "netns_up 3 took $up_ms ms: $NETNS_PREFIX on $NETNS_SUBNET"

# Every host: loopback up, its own address on eth0.
for i in 0 1 2; do
	ns=NETNS_NAME_$i
	addr=NETNS_ADDR_$i
	if [ "${NETNS_NAMES[i]}" != "${!ns}" ] ||
		[ "${NETNS_ADDRS[i]}" != "${!addr}" ]; then
		fail "arrays and NETNS_*_$i differ"
	fi
	ip -n "${!ns}" -o link show lo | grep -q ',UP' ||
		fail "host $i: lo is not up"
	ip -n "${!ns}" -4 -o addr show dev eth0 | grep -q " ${!addr}/24 " ||
		fail "host $i: no ${!addr} on eth0: $(ip -n "${!ns}" -o addr)"
	# shellcheck disable=SC2016
	out=$(NETNS_SMOKE_VAR=$i netns_exec "$i" sh -c \
		'pwd; echo "$NETNS_SMOKE_VAR $NETNS_SMOKE_EXPORTED"' 2>&1)
	[ "$out" = "$(pwd)
$i yes" ] || fail "host $i: netns_exec lost the cwd or environment: $out"
done

# A listener on host 0 answers two connections with the peer's address.
port=7000
netns_bg 0 timeout 30 python3 -c '
import socket, sys
addr, port, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(4)
open(ready, "w").close()
for _ in range(2):
    c, peer = s.accept()
    c.settimeout(10)
    line = c.makefile().readline().strip()
    c.sendall(("pong %s %s\n" % (peer[0], line)).encode())
    print(peer[0], line, flush=True)
    c.close()
' "$NETNS_ADDR_0" "$port" "$W/ready" >"$W/listener.out" 2>&1
lpid=$NETNS_PID
for _ in $(seq 1 100); do
	[ -e "$W/ready" ] && break
	kill -0 "$lpid" 2>/dev/null || break
	sleep 0.05
done
[ -e "$W/ready" ] || fail "listener did not start: $(cat "$W/listener.out")"
# NETNS_PID is the command itself (ip netns exec execs it).
if [ -z "$lpid" ] || [ "$(readlink "/proc/$lpid/exe")" != \
	"$(readlink -f "$(command -v timeout)")" ]; then
	fail "NETNS_PID '$lpid' is not the listener's timeout process"
fi

t0=$(now)
for i in 1 2; do
	addr=NETNS_ADDR_$i
	# shellcheck disable=SC2016
	out=$(netns_exec "$i" timeout 10 bash -c '
		exec 3<>"/dev/tcp/$1/$2" || exit 1
		echo "hello from $3" >&3
		read -r line <&3 && echo "$line"' - \
		"$NETNS_ADDR_0" "$port" "$i" 2>&1) ||
		fail "host $i cannot reach $NETNS_ADDR_0:$port: $out"
	[ "$out" = "pong ${!addr} hello from $i" ] ||
		fail "host $i: reply '$out', not 'pong ${!addr} hello from $i'"
done
tcp_ms=$(since "$t0")
wait "$lpid" || fail "listener failed: $(cat "$W/listener.out")"
# shellcheck disable=SC2153
[ "$(sort "$W/listener.out")" = "$NETNS_ADDR_1 hello from 1
$NETNS_ADDR_2 hello from 2" ] || fail "listener saw: $(cat "$W/listener.out")"
echo "hosts 1 and 2 reached host 0 over TCP in $tcp_ms ms"

# The root namespace: nothing of ours, no way in.
root_state >"$W/root.during"
diff "$W/root.before" "$W/root.during" >"$W/root.diff" ||
	fail "the root namespace changed: $(cat "$W/root.diff")"
[ -z "$(ip -4 -o addr show to "$NETNS_SUBNET")" ] ||
	fail "the root namespace has an address in $NETNS_SUBNET"
[ -z "$(ip -4 route show table all root "$NETNS_SUBNET")" ] ||
	fail "the root namespace has a route into $NETNS_SUBNET"
for i in 0 1 2; do
	addr=NETNS_ADDR_$i
	# Only a lookup: no packet is sent. Unreachable, or a device the
	# root namespace had before (its uplink), never one of ours.
	r=$(ip route get "${!addr}" 2>&1) || continue
	dev=$(echo "$r" | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)
	case $r in local* | *" dev lo "*)
		fail "root: ${!addr} is local there: $r" ;;
	esac
	[ -n "$dev" ] && grep -qx "$dev" "$W/links" && continue
	fail "root: ${!addr} routes via a device of the test: $r"
done
if command -v ss >/dev/null 2>&1; then
	ss -Htln | grep -q "$NETNS_ADDR_0:$port" &&
		fail "the listener is visible in the root namespace"
fi

# netns_down kills what still runs inside, removes everything, and is
# idempotent.
# Disowned: no job notices when netns_down kills them.
netns_bg 2 sh -c ': >"$1"; exec sleep 300' - "$W/up.2" >/dev/null 2>&1
spid=$NETNS_PID
disown "$spid"
netns_bg 1 sh -c 'trap "" TERM; : >"$1"; while :; do sleep 1; done' - \
	"$W/up.1" >/dev/null 2>&1
tpid=$NETNS_PID
disown "$tpid"
# Both running (the second ignoring TERM) before netns_down.
i=0
while [ "$i" -lt 600 ] && ! { [ -e "$W/up.1" ] && [ -e "$W/up.2" ]; }; do
	sleep 0.05
	i=$((i + 1))
done
[ -e "$W/up.1" ] && [ -e "$W/up.2" ] || fail "processes in the namespaces did not start"
prefix=$NETNS_PREFIX
t0=$(now)
NETNS_TERM_WAIT=1 netns_down
down_ms=$(since "$t0")
netns_down || fail "second netns_down failed"
for p in $spid $tpid; do
	st=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)
	[ -z "$st" ] || [ "$st" = Z ] || fail "process $p survived netns_down"
done
ip netns list | grep -q "^$prefix-" &&
	fail "namespaces left: $(ip netns list | grep "^$prefix-")"
[ -z "${NETNS_N-}${NETNS_NAME_0-}${NETNS_ADDR_0-}" ] ||
	fail "variables left set"
root_state >"$W/root.after"
diff "$W/root.before" "$W/root.after" >"$W/root.diff" ||
	fail "the root namespace changed: $(cat "$W/root.diff")"
echo "netns_down took $down_ms ms (one process ignored TERM for 1 s)"
echo "ok netns_smoke"
