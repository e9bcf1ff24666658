#!/bin/sh
# tests/link_test.sh - pstrain run --link and --placement: emulated hosts
# (network namespaces on a bridge, cli/run/hosts.h) with shaped links.
# While a job runs its hosts exist, each process in its own, and each
# host's link is a tbf at the rate asked for, both ways; the record says
# the link, the placement and each process's host; the namespaces are
# gone when the job ends, after Ctrl-C, and after kill -9 of the
# launcher at the next job's start; a delay (netem, or each process's
# --send-delay) costs a sync step two delays and changes no value; a user
# other than root gets the same hosts in a user namespace; the ring
# across hosts gives the ipc ring's model; bad set-ups are refused by
# name. Needs root: elsewhere it says "skip" and counts no case. Prints "ok NAME" / "FAIL NAME" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
# The test hooks (PSTRAIN_TEST_EVAL_HOLD holds a job up) are only in the
# tests' build.
H=build/tests/pstrain
. tests/lib.sh

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1 ||
	! command -v tc >/dev/null 2>&1; then
	echo "skip: emulated hosts need root and iproute2 (ip, tc)"
	exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-link-XXXXXX")
trap 'rm -rf "$T"' EXIT
D="--data synthetic:1200 --model mlp:32 --seed 7 --lr 0.2 --batch 48"

# ours PID: the namespaces of the launcher PID, one a line.
ours() { ip netns list | sed -n "s/^\(pstrain-$1-[0-9]*-[a-z0-9]*\).*/\1/p"; }

# held NAME ARGS...: a job of H into $T/NAME that stays up, all its
# processes alive, until $T/NAME.go exists (its evaluations are held,
# and worker 0's final one waits for them); sets pid once worker 0 has
# done its last step.
held() {
	name=$1
	shift
	PSTRAIN_TEST_EVAL_HOLD=$T/$name.go $H run $D --steps 20 \
		--eval-every 5 --out "$T/$name" "$@" >"$T/$name.log" 2>&1 &
	pid=$!
	wait_rows "$T/$name/worker-0.csv" 21
}

test_link_hosts_while_running() {
	# 1 server and 2 workers, dedicated: 3 hosts and the hub while the
	# job runs, each host's eth0 and its bridge port a tbf of 100Mbit,
	# worker 0 heard from host 1's address; afterwards the record and
	# no namespace left.
	n=test_link_hosts_while_running
	held run1 --servers 1 --workers 2 --link 100mbit \
		--placement dedicated ||
		{ no $n "no steps" "$T/run1.log"; touch "$T/run1.go"; return; }
	names=$(ours $pid | sort | tr '\n' ' ')
	pre=$(ours $pid | head -n 1 | sed 's/-[a-z0-9]*$//')
	eth=$(tc -n "$pre-h2" qdisc show dev eth0 2>&1)
	port=$(tc -n "$pre-hub" qdisc show dev p2 2>&1)
	touch "$T/run1.go"
	wait $pid
	rc=$?
	left=$(ours $pid | wc -l)
	s="$T/run1/summary.json"
	if [ "$names" != "$pre-h0 $pre-h1 $pre-h2 $pre-hub " ]; then
		no $n "namespaces while running: '$names'" "$T/run1.log"
	elif ! echo "$eth" | grep -q "tbf .*rate 100Mbit" ||
		! echo "$port" | grep -q "tbf .*rate 100Mbit"; then
		no $n "host 2's link: '$eth' / '$port'" "$T/run1.log"
	elif [ "$rc" != 0 ] || [ "$left" != 0 ]; then
		no $n "exit $rc, $left namespaces left" "$T/run1.log"
	elif ! grep -q "by worker 0 (10.250.0.2:" "$T/run1/server-0.log"; then
		no $n "server 0 did not hear from host 1" "$T/run1/server-0.log"
	else
		$PY - "$s" <<'PYEOF' && ok $n || no $n "the record" "$s"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["placement"] == "dedicated", j["placement"]
assert j["link"]["rate_bits_per_s"] == 1e8 and j["link"]["delay_s"] is None
assert j["link"]["shaped_by"] == "tbf both ways", j["link"]
assert j["hosts"] == {"server-0": "10.250.0.1", "worker-0": "10.250.0.2",
                      "worker-1": "10.250.0.3"}, j["hosts"]
assert j["config"]["transport"] == "tcp", j["config"]["transport"]
assert j["addresses"][0].startswith("tcp://10.250.0.1:"), j["addresses"]
# mlp:32 on 64 features: 2,410 parameters, 9,640 bytes; the server's host
# sends W / S = 2 of them a step: 19,280 bytes at 100 Mbit/s.
assert abs(j["comm_bound_ms"] - 1.5424) < 1e-6, j["comm_bound_ms"]
assert j["step_ms_median"] > 0, j["step_ms_median"]
PYEOF
	fi
}

test_link_cleanup() {
	# Ctrl-C: the launcher deletes its namespaces. kill -9: they stay
	# (its processes die with it), and the next job's launcher deletes
	# them before it makes its own, saying so.
	n=test_link_cleanup
	held int --servers 1 --workers 2 --placement colocated ||
		{ no $n "no steps" "$T/int.log"; touch "$T/int.go"; return; }
	before=$(ours $pid | wc -l)
	kill -INT $pid
	wait $pid
	after_int=$(ours $pid | wc -l)
	touch "$T/int.go"
	held kill --servers 1 --workers 2 --link 1gbit ||
		{ no $n "no steps" "$T/kill.log"; touch "$T/kill.go"; return; }
	kill -9 $pid
	wait $pid 2>/dev/null
	killed=$pid
	after_kill=$(ours $killed | wc -l)
	touch "$T/kill.go"
	$P run $D --steps 5 --servers 1 --workers 1 --placement dedicated \
		--out "$T/next" >"$T/next.log" 2>&1
	rc=$?
	if [ "$before" = 3 ] && [ "$after_int" = 0 ] &&
		[ "$after_kill" = 4 ] && [ "$rc" = 0 ] &&
		[ "$(ours $killed | wc -l)" = 0 ] &&
		grep -q "deleting namespace pstrain-$killed-" "$T/next.log"; then
		ok $n
	else
		no $n "namespaces: $before running, $after_int after Ctrl-C, $after_kill after kill -9, $(ours $killed | wc -l) after the next job (exit $rc)" \
			"$T/next.log"
	fi
}

test_link_ring_across_hosts() {
	# All-reduce, a worker per host at 1gbit: the ipc ring's model.
	n=test_link_ring_across_hosts
	a="--mode allreduce --workers 3 --steps 30"
	# shellcheck disable=SC2086
	$P run $D $a --link 1gbit --out "$T/ar" --save-model "$T/ar/m.bin" \
		>"$T/ar.log" 2>&1 &&
		$P run $D $a --out "$T/ari" --save-model "$T/ari/m.bin" \
			>"$T/ari.log" 2>&1 ||
		{ no $n "a job failed" "$T/ar.log"; return; }
	cmp -s "$T/ar/m.bin" "$T/ari/m.bin" &&
		grep -q '"tcp://10.250.0.3:' "$T/ar/summary.json" && ok $n ||
		no $n "another model, or ring not on the hosts" "$T/ar/summary.json"
}

test_link_refusals() {
	# Each refused by name, exit 2, nothing made.
	n=test_link_refusals
	bad=""
	for f in "--link fast:--link fast: expected RATE" \
		"--link 1gbit --transport ipc:not ipc" \
		"--link 1gbit --placement none:not none" \
		"--placement colocated --servers 3 --workers 2:--servers 3 is more"; do
		# shellcheck disable=SC2086
		$P run $D --steps 5 ${f%%:*} --out "$T/ref" >"$T/ref.log" 2>&1
		rc=$?
		[ "$rc" = 2 ] && grep -q -- "${f#*:}" "$T/ref.log" ||
			bad="$bad [${f%%:*}: exit $rc]"
	done
	# A server's --send-delay without a unit.
	$P server --send-delay 20 --listen "ipc://$T/sock" $D --out "$T/ref" \
		>"$T/ref.log" 2>&1
	rc=$?
	[ "$rc" = 2 ] && grep -q -- "--send-delay 20: expected" "$T/ref.log" ||
		bad="$bad [--send-delay 20: exit $rc]"
	[ "$(ip netns list | grep -c "^pstrain-$$-")" = 0 ] ||
		bad="$bad [namespaces left]"
	[ -z "$bad" ] && ok $n || no $n "$bad" "$T/ref.log"
}

test_link_send_delay() {
	# --link RATE,DELAY: netem on each host's eth0 where the kernel has
	# it, else every process holds each message it sends (--send-delay).
	# A sync step is a request and its reply, so it takes at least two
	# delays either way; the model is the one without the delay.
	n=test_link_send_delay
	a="--servers 1 --workers 2 --steps 12"
	# shellcheck disable=SC2086
	$P run $D $a --link 1gbit,25ms --out "$T/sd" \
		--save-model "$T/sd/m.bin" >"$T/sd.log" 2>&1 &&
		$P run $D $a --out "$T/sd0" --save-model "$T/sd0/m.bin" \
			>"$T/sd0.log" 2>&1 ||
		{ no $n "a job failed" "$T/sd.log"; return; }
	if ! cmp -s "$T/sd/m.bin" "$T/sd0/m.bin"; then
		no $n "the delay changed the model" "$T/sd.log"
		return
	fi
	$PY - "$T/sd" <<'PYEOF' && ok $n || no $n "the record" "$T/sd/summary.json"
import json, os, sys
d = sys.argv[1]
j = json.load(open(d + "/summary.json"))
link = j["link"]
assert link["delay_s"] == 0.025, link
by = link["shaped_by"]
if "send-delay" in by:
    assert by == "tbf both ways, each process's --send-delay", by
    for f in ("server-0.log", "worker-0.log", "worker-1.log"):
        t = open(os.path.join(d, f)).read()
        assert "waits 25000us first (--send-delay)" in t, f
else:
    assert by == "tbf both ways, netem", by
# Two delays a step at least: a lower bound, which a busy machine only
# raises.
assert j["step_ms_median"] >= 50, j["step_ms_median"]
PYEOF
}

test_link_unprivileged() {
	# A user other than root: the job runs in a user namespace of its
	# own, same hosts and links, and leaves nothing behind, also after
	# kill -9 of its launcher (its processes and namespaces go with it).
	n=test_link_unprivileged
	U="setpriv --reuid=65534 --regid=65534 --clear-groups"
	if ! $U true 2>/dev/null || ! $U test -x "$H" || ! $U test -r tests/lib.sh ||
		! $U unshare -Urn true 2>/dev/null; then
		echo "skip $n: no user nobody that can run $H, or no user namespaces"
		return
	fi
	chmod 755 "$T"
	mkdir -m 777 "$T/u"
	$U $P run $D --steps 10 --servers 1 --workers 2 --link 100mbit \
		--out "$T/u/job" >"$T/u/job.log" 2>&1
	rc=$?
	if [ "$rc" != 0 ]; then
		no $n "exit $rc" "$T/u/job.log"
		return
	fi
	if ! $PY -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['link']['namespaces'] == 'user namespace', j['link']
assert j['link']['shaped_by'] == 'tbf both ways', j['link']
assert j['hosts']['worker-1'] == '10.250.0.3', j['hosts']
assert j['addresses'][0].startswith('tcp://10.250.0.1:'), j['addresses']
" "$T/u/job/summary.json"; then
		no $n "the record" "$T/u/job/summary.json"
		return
	fi
	PSTRAIN_TEST_EVAL_HOLD=$T/u/held.go $U $H run $D --steps 20 \
		--eval-every 5 --servers 1 --workers 2 --link 100mbit \
		--out "$T/u/held" >"$T/u/held.log" 2>&1 &
	pid=$!
	if ! wait_rows "$T/u/held/worker-0.csv" 21; then
		touch "$T/u/held.go"
		no $n "the held job made no steps" "$T/u/held.log"
		return
	fi
	kill -9 $pid
	wait $pid 2>/dev/null
	# Its processes die with it (each has the launcher's death signal).
	left=1
	for _ in $(seq 600); do
		pgrep -f -- "--out $T/u/held" >/dev/null || { left=0; break; }
		sleep 0.1
	done
	touch "$T/u/held.go"
	[ "$left" = 0 ] && ok $n ||
		no $n "processes left after kill -9: $(pgrep -af -- "--out $T/u/held")" "$T/u/held.log"
}

test_link_hosts_while_running
test_link_send_delay
test_link_unprivileged
test_link_cleanup
test_link_ring_across_hosts
test_link_refusals
