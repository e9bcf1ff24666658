#!/bin/sh
# tests/attack_test.sh - jobs under attack by a local process that does not
# hold their secret (build/tests/proc_attack): anonymous shutdown and
# stats, impersonated pushes with INT64 steps, NaN and infinity, wrong and
# replayed hellos, a flood of parked pulls, an oversized message and many
# half-sent ones, over tcp while the job trains. A sync job must end
# bit-identical to the same job left alone; an async one must end with
# finite parameters and its counters showing the refusals. A TLS job must
# turn away clients without a certificate, or with another CA's, and
# plain-text speakers, and also end bit-identical. A worker's poisoned
# push is refused over --grad-bound and the job ends "damaged".
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
# The test hooks (PSTRAIN_TEST_*) are only in the tests' build.
H=${PSTRAIN:-build/tests/pstrain}
A=build/tests/proc_attack
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-attack-XXXXXX")
trap 'rm -rf "$T"' EXIT
. tests/lib.sh

# --auth-timeout 2: half-sent messages are closed within the job.
J="--servers 2 --workers 2 --model mlp:64 --data synthetic:1200 --seed 3 --batch 64 --steps 300 --auth-timeout 2"

# held NAME CMD...: CMD (a job of the tests' build) with worker 0 held
# before step 20 until the file NAME.go exists (PSTRAIN_TEST_STEP_HOLD),
# in the background with its pid in $job: the job trains while an attack
# goes on, however long that takes, and no longer. Holding a worker
# changes no value in sync mode. go NAME lets it go.
held() {
	f=$1
	shift
	rm -f "$f.go"
	PSTRAIN_TEST_STEP_HOLD="0:20:$f.go" "$@" &
	job=$!
}
go() { : >"$1.go"; }

# urls DIR: the servers' tcp addresses, once both listen (bounded wait)
urls() {
	i=0
	while [ "$i" -lt 2400 ]; do
		u=$(sed -n 's/.*listening on \([a-z+]*:[^,]*\),.*/\1/p' \
			"$1/server-0.log" "$1/server-1.log" 2>/dev/null | paste -sd, -)
		case $u in *,*) echo "$u"; return 0 ;; esac
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# attacked MODE DIR: run the job in DIR under one round of every attack;
# sets rc (the job's exit), arc (the attack's) and alive (1 when the job
# was still running once the attack had finished).
attacked() {
	held "$2" $H run $J --transport tcp --mode "$1" --out "$2" \
		--save-model "$2/m.bin" >"$2.log" 2>&1
	u=$(urls "$2")
	$A "$u" 1 2 >"$2.attack" 2>&1
	arc=$?
	kill -0 $job 2>/dev/null && alive=1 || alive=0
	go "$2"
	wait $job
	rc=$?
}

test_attack_sync_bit_identical() {
	n=test_attack_sync_bit_identical
	$P run $J --transport tcp --mode sync --out "$T/ref" \
		--save-model "$T/ref/m.bin" >"$T/ref.log" 2>&1
	r0=$?
	attacked sync "$T/sync"
	refused=$(grep -c '^refused' "$T/sync.attack")
	un=$(json unauthenticated_requests "$T/sync/summary.json")
	if [ "$r0" = 0 ] && [ "$rc" = 0 ] && [ "$arc" = 0 ] &&
		[ "$alive" = 1 ] && [ "$refused" -ge 20 ] &&
		! grep -q '^no answer' "$T/sync.attack" &&
		cmp -s "$T/ref/m.bin" "$T/sync/m.bin" &&
		[ "${un:-0}" -gt 0 ] &&
		grep -q "refused shutdown from 127.0.0.1:" "$T/sync/server-0.log"
	then
		ok $n
	else
		no $n "exits $r0 $rc, attack $arc, alive $alive, $refused refused, unauthenticated '$un', or models differ" \
			"$T/sync.attack"
	fi
}

test_attack_async_finite() {
	n=test_attack_async_finite
	attacked async "$T/async"
	un=$(json unauthenticated_requests "$T/async/summary.json")
	af=$(json auth_failures "$T/async/summary.json")
	cc=$(json connections_closed "$T/async/summary.json")
	how=$(jstr outcome "$T/async/summary.json")
	loss=$($P eval --model-file "$T/async/m.bin" --data synthetic:1200 \
		--seed 3 2>&1 | sed -n 's/^test_loss //p')
	case $loss in [0-9]*) finite=1 ;; *) finite=0 ;; esac
	if [ "$rc" = 0 ] && [ "$arc" = 0 ] && [ "$alive" = 1 ] &&
		[ "$how" = ok ] && [ "$finite" = 1 ] &&
		[ "${un:-0}" -gt 0 ] && [ "${af:-0}" -gt 0 ] &&
		[ "${cc:-0}" -gt 0 ]; then
		ok $n
	else
		no $n "exit $rc, attack $arc, alive $alive, outcome $how, loss '$loss', counters '$un' '$af' '$cc'" \
			"$T/async.attack"
	fi
}

test_attack_tls_bit_identical() {
	n=test_attack_tls_bit_identical
	sh scripts/certs.sh "$T/ca" >/dev/null 2>&1 &&
		sh scripts/certs.sh "$T/other" >/dev/null 2>&1 || {
		no $n "scripts/certs.sh failed"; return; }
	tls="--transport tls --tls-cert $T/ca/server.crt --tls-key $T/ca/server.key --tls-ca $T/ca/ca.crt"
	# The same job over tcp, left alone, is the reference (the
	# transport changes no value): test_attack_sync_bit_identical's.
	r0=0
	if [ ! -f "$T/ref/m.bin" ]; then
		$P run $J --transport tcp --mode sync --out "$T/ref" \
			--save-model "$T/ref/m.bin" >"$T/ref.log" 2>&1
		r0=$?
	fi
	held "$T/tls" $H run $J $tls --mode sync --out "$T/tls" \
		--save-model "$T/tls/m.bin" >"$T/tls.log" 2>&1
	u=$(urls "$T/tls")
	bad=0
	for url in $(echo "$u" | tr , ' '); do
		# no certificate; another CA's; plain SP over the TLS port
		build/tests/proc_tlsdial "$url" "$T/ca/ca.crt" >>"$T/tls.attack" 2>&1 &&
			bad=$((bad + 1))
		build/tests/proc_tlsdial "$url" "$T/ca/ca.crt" \
			"$T/other/client.crt" "$T/other/client.key" \
			>>"$T/tls.attack" 2>&1 && bad=$((bad + 1))
		$A "tcp://${url#tls+tcp://}" 1 2 >>"$T/tls.attack" 2>&1 ||
			bad=$((bad + 1))
	done
	kill -0 $job 2>/dev/null && alive=1 || alive=0
	go "$T/tls"
	wait $job
	rc=$?
	refused=$(grep -c '^refused' "$T/tls.attack")
	if [ "$r0" = 0 ] && [ "$rc" = 0 ] && [ "$bad" = 0 ] &&
		[ "$alive" = 1 ] && [ "$refused" -ge 4 ] &&
		! grep -q '^ACCEPTED' "$T/tls.attack" &&
		cmp -s "$T/ref/m.bin" "$T/tls/m.bin"; then
		ok $n
	else
		no $n "exits $r0 $rc, $bad attacks got through, alive $alive, $refused refused, or models differ" \
			"$T/tls.attack"
	fi
}

# flood URL N S: N connections to tcp URL that finish nng's handshake
# (so each is a connection the server must follow) and never
# authenticate, all held open S seconds, then closed. Prints how many
# were made and how many the server closed meanwhile.
flood() {
	$PY - "$1" "$2" "$3" <<'EOF'
import resource, select, socket, sys, time
url, n, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
host, port = url[len("tcp://"):].rsplit(":", 1)
socks = []
for i in range(n):
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(b"\0SP\0\0\x30\0\0")  # SP over TCP, a REQ peer
        socks.append(s)
    except OSError:
        break
end, closed = time.time() + hold, set()
while time.time() < end:
    live = [s for s in socks if s.fileno() not in closed]
    for s in select.select(live, [], [], 0.2)[0] if live else []:
        try:
            if s.recv(64) == b"":
                closed.add(s.fileno())
        except OSError:
            closed.add(s.fileno())
for s in socks:
    s.close()
print("flood: %d connections held %.0f s, %d closed by the server"
      % (len(socks), hold, len(closed)))
EOF
}

# listening LOG: the tcp address a server started by hand says it
# listens on, once it does (bounded wait).
listening() {
	i=0
	while [ "$i" -lt 2400 ]; do
		u=$(sed -n 's/.*listening on \(tcp:[^,]*\),.*/\1/p' "$1" 2>/dev/null)
		[ -n "$u" ] && { echo "$u"; return 0; }
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

test_attack_flood_descriptors() {
	# 1,000 connections that never authenticate, held 6 s: the server
	# closes the oldest as they come (from its serve loop, never from
	# nng's pipe callback) and its descriptors come back below 100.
	n=test_attack_flood_descriptors
	$P secret "$T/fs" >/dev/null 2>&1
	$P server --listen tcp://127.0.0.1:0 --servers 1 --workers 2 \
		--model mlp:64 --data synthetic:4000 --secret-file "$T/fs" \
		--alone-timeout 0 --out "$T/fsrv" >"$T/fsrv.log" 2>&1 &
	spid=$!
	u=$(listening "$T/fsrv.log") || {
		no $n "the server did not listen" "$T/fsrv.log"; kill $spid; return; }
	flood "$u" 1000 6 >"$T/flood1.log" 2>&1
	fds=9999
	for _ in $(seq 600); do
		fds=$(ls /proc/$spid/fd 2>/dev/null | wc -l)
		[ "$fds" -lt 100 ] && break
		sleep 0.1
	done
	kill -TERM $spid
	wait $spid
	src=$?
	cc=$(json connections_closed "$T/fsrv/server-0.json")
	if [ "$fds" -lt 100 ] && [ "$src" = 0 ] && [ "${cc:-0}" -gt 900 ]; then
		ok $n
	else
		no $n "$fds descriptors left, server exit $src, $cc connections closed ($(cat "$T/flood1.log"))" \
			"$T/fsrv.log"
	fi
}

test_attack_flood_then_restart() {
	# A sync job under the same flood: a worker killed after it is
	# noticed, restarted (--restart-workers 1) and the job ends exit 0.
	n=test_attack_flood_then_restart
	held "$T/fl" $H run $J --transport tcp --mode sync --restart-workers 1 \
		--out "$T/fl" >"$T/fl.log" 2>&1
	u=$(urls "$T/fl")
	flood "${u%%,*}" 1000 6 >"$T/flood2.log" 2>&1
	w=$(pgrep -f -- "worker .*--out $T/fl .*--rank 1 ")
	[ -n "$w" ] && kill -9 $w
	# let worker 0 go once the restarted worker 1 is back
	wait_line "worker 1 failed .*restarting it" "$T/fl.log"
	go "$T/fl"
	wait $job
	rc=$?
	wr=$(json worker_restarts "$T/fl/summary.json")
	# each server lost worker 1 and took it back
	sl=$(json server_worker_losses "$T/fl/summary.json")
	sj=$(json server_worker_rejoins "$T/fl/summary.json")
	if [ -n "$w" ] && [ "$rc" = 0 ] && [ "$wr" = 1 ] && [ "$sl" = 2 ] &&
		[ "$sj" = 2 ]; then
		ok $n
	else
		no $n "worker 1 '$w', exit $rc, worker_restarts '$wr', server losses '$sl' rejoins '$sj' ($(cat "$T/flood2.log"))" \
			"$T/fl.log"
	fi
}

test_attack_rank_taken() {
	# A second process of worker 1's rank, holding the secret, while
	# worker 1 trains: its hello is refused (it gives up after its
	# --rpc-timeout, naming why), the server logs both peers, and the
	# job ends with the model of the same job left alone.
	n=test_attack_rank_taken
	$P secret "$T/rs" >/dev/null 2>&1
	C="--servers 1 --workers 2 --model mlp:64 --data synthetic:1200 --seed 3 --batch 64 --steps 120"
	# shellcheck disable=SC2086
	$P run $C --out "$T/rkref" --save-model "$T/rkref/m.bin" \
		>"$T/rkref.log" 2>&1
	C="$C --secret-file $T/rs"
	# shellcheck disable=SC2086
	$P server $C --listen tcp://127.0.0.1:0 --out "$T/rk" \
		>"$T/rk.srv" 2>&1 &
	spid=$!
	u=$(listening "$T/rk.srv") || {
		no $n "the server did not listen" "$T/rk.srv"; kill $spid; return; }
	# shellcheck disable=SC2086
	held "$T/rk" $H worker $C --rank 0 --connect "$u" \
		--save-model "$T/rk/m.bin" --out "$T/rk" >"$T/rk.w0" 2>&1
	w0=$job
	# shellcheck disable=SC2086
	$P worker $C --rank 1 --connect "$u" --out "$T/rk" >"$T/rk.w1" 2>&1 &
	w1=$!
	wait_rows "$T/rk/worker-1.csv" 5
	# shellcheck disable=SC2086
	$P worker $C --rank 1 --connect "$u" --rpc-timeout 2 \
		--out "$T/rkdup" >"$T/rk.dup" 2>&1
	drc=$?
	go "$T/rk"
	wait $w0
	r0=$?
	wait $w1
	r1=$?
	wait $spid
	refusals=$(json rank_refusals "$T/rk/server-0.json")
	losses=$(json server_worker_losses "$T/rk/summary.json")
	if [ "$drc" != 0 ] && [ "$r0$r1" = 00 ] && [ "$losses" = 0 ] &&
		[ "$(jstr outcome "$T/rk/summary.json")" = ok ] &&
		grep -q "rank 1 is held by the live connection of 127.0.0.1:" "$T/rk.dup" &&
		grep -q "worker 1's hello from 127.0.0.1:[0-9]* refused: the live connection of 127.0.0.1:[0-9]* holds rank 1" "$T/rk.srv" &&
		[ "${refusals:-0}" -ge 1 ] && cmp -s "$T/rkref/m.bin" "$T/rk/m.bin"; then
		ok $n
	else
		no $n "second worker exit $drc, workers $r0 $r1, rank_refusals '$refusals', losses '$losses', or models differ" \
			"$T/rk.dup"
	fi
}

test_attack_impostor_server() {
	# A server that holds another secret and takes any proof (the test
	# build's PSTRAIN_TEST_IMPOSTOR): the worker finds its hello reply
	# does not prove the job's secret and stops, sending no gradient.
	n=test_attack_impostor_server
	$P secret "$T/mine" >/dev/null 2>&1
	$P secret "$T/theirs" >/dev/null 2>&1
	C="--servers 1 --workers 1 --model mlp:64 --data synthetic:1200 --steps 20"
	# shellcheck disable=SC2086
	PSTRAIN_TEST_IMPOSTOR=1 build/tests/pstrain server $C \
		--secret-file "$T/theirs" --listen tcp://127.0.0.1:0 \
		--alone-timeout 0 --out "$T/imp" >"$T/imp.srv" 2>&1 &
	spid=$!
	u=$(listening "$T/imp.srv") || {
		no $n "the server did not listen" "$T/imp.srv"; kill $spid; return; }
	# shellcheck disable=SC2086
	$P worker $C --secret-file "$T/mine" --rank 0 --connect "$u" \
		--rpc-timeout 5 --out "$T/impw" >"$T/imp.w" 2>&1
	wrc=$?
	kill -TERM $spid
	wait $spid
	up=$(json updates "$T/imp/server-0.json")
	if [ "$wrc" != 0 ] && [ "${up:-x}" = 0 ] &&
		grep -q "server 0 at $u did not prove the job secret" "$T/imp.w"; then
		ok $n
	else
		no $n "worker exit $wrc, the server applied '$up' updates" "$T/imp.w"
	fi
}

test_attack_poisoned_push() {
	# Worker 1 pushes a gradient with a value of 3e38 once (the test
	# hook PSTRAIN_TEST_POISON of build/tests/pstrain): the server
	# refuses it over --grad-bound and changes nothing, the worker fails
	# saying why, is restarted, and the job ends exit 0 but "damaged",
	# with the refusal counted.
	n=test_attack_poisoned_push
	PSTRAIN_TEST_POISON="1:40:$T/poisoned" $H run --servers 1 --workers 2 \
		--model mlp:64 --data synthetic:1200 --seed 3 --batch 64 \
		--steps 100 --mode async --restart-workers 1 \
		--out "$T/poison" >"$T/poison.log" 2>&1
	rc=$?
	br=$(json bound_refusals "$T/poison/summary.json")
	if [ "$rc" = 0 ] && [ -f "$T/poisoned" ] && [ "$br" = 1 ] &&
		[ "$(jstr outcome "$T/poison/summary.json")" = damaged ] &&
		grep -q "worker 1 pushed a gradient of RMS .*(--grad-bound 10000)" \
			"$T/poison.log" &&
		grep -q "refused a push of worker 1 at step 40" \
			"$T/poison/server-0.log"; then
		ok $n
	else
		no $n "exit $rc, bound_refusals '$br'" "$T/poison.log"
	fi
}

# idle HOST:PORT... N S: N connections to each address that send
# nothing, held S seconds, then closed. Prints, per address, how many
# were made and how many the other end closed meanwhile.
idle() {
	$PY - "$@" <<'EOF'
import resource, selectors, socket, sys, threading, time
addrs, n, hold = sys.argv[1:-2], int(sys.argv[-2]), float(sys.argv[-1])
t0 = time.time()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
socks, made = {}, {a: 0 for a in addrs}
def open_to(a):  # one thread per address: they fill at once
    host, port = a.rsplit(":", 1)
    for i in range(n):
        try:
            s = socket.create_connection((host, int(port)), timeout=10)
        except OSError:
            break
        socks[s] = a
        made[a] += 1
ts = [threading.Thread(target=open_to, args=(a,)) for a in addrs]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("idle: open after %.1f s" % (time.time() - t0), flush=True)
end, closed = time.time() + hold, {a: 0 for a in addrs}
sel = selectors.DefaultSelector()
for s in socks:
    sel.register(s, selectors.EVENT_READ)
while time.time() < end and sel.get_map():
    for key, _ in sel.select(0.2):
        try:
            gone = key.fileobj.recv(64) == b""
        except OSError:
            gone = True
        if gone:
            closed[socks[key.fileobj]] += 1
            sel.unregister(key.fileobj)
for s in socks:
    s.close()
for a in addrs:
    print("idle: %s %d connections held %.0f s, %d closed by the other end"
          % (a, made[a], hold, closed[a]))
EOF
}

test_attack_idle_at_ulimit() {
	# A TLS job with its dashboard, at ulimit -n 1024: 1,000
	# connections that never start a TLS handshake against server 0
	# and 1,000 idle ones against the dashboard. The server closes them
	# after --auth-timeout (nng 1.5.2 alone never would), the dashboard
	# keeps at most 64; a worker killed meanwhile is restarted and the
	# job ends exit 0.
	n=test_attack_idle_at_ulimit
	sh scripts/certs.sh "$T/ica" >/dev/null 2>&1 || {
		no $n "scripts/certs.sh failed"; return; }
	tls="--transport tls --tls-cert $T/ica/server.crt --tls-key $T/ica/server.key --tls-ca $T/ica/ca.crt"
	# Held until the connections (which nng accepts at about 130 a
	# second over TLS) are closed and worker 1 is restarted.
	held "$T/ul" sh -c 'ulimit -n 1024 && exec "$@"' sh \
		$H run $J $tls --mode sync --restart-workers 1 \
		--dashboard --dashboard-listen 127.0.0.1:0 --out "$T/ul" \
		>"$T/ul.log" 2>&1
	u=$(urls "$T/ul")
	d=$(sed -n 's|.*dashboard at http://\([0-9.:]*\)/.*|\1|p' "$T/ul.log")
	s0=${u%%,*}
	idle "${s0#tls+tcp://}" "$d" 1000 8 >"$T/idle.log" 2>&1 &
	ip=$!
	# Kill worker 1 once the server has begun to close them: its
	# restart reconnects while the rest are held.
	wait_line "no handshake after" "$T/ul/server-0.log"
	w=$(pgrep -f -- "worker .*--out $T/ul .*--rank 1 ")
	[ -n "$w" ] && kill -9 $w
	wait $ip
	go "$T/ul"
	wait $job
	rc=$?
	wr=$(json worker_restarts "$T/ul/summary.json")
	sc=$(sed -n "s/^idle: ${s0#tls+tcp://} \([0-9]*\) .*, \([0-9]*\) closed.*/\1 \2/p" "$T/idle.log")
	dc=$(sed -n "s/^idle: $d \([0-9]*\) .*, \([0-9]*\) closed.*/\1 \2/p" "$T/idle.log")
	if [ -n "$w" ] && [ "$rc" = 0 ] && [ "$wr" = 1 ] &&
		[ "${sc% *}" -ge 900 ] && [ "${sc#* }" -ge 900 ] &&
		[ "${dc% *}" -ge 900 ] && [ "${dc#* }" -ge 900 ] &&
		grep -q "no handshake after" "$T/ul/server-0.log"; then
		ok $n
	else
		no $n "worker 1 '$w', exit $rc, worker_restarts '$wr', server '$sc', dashboard '$dc' ($(cat "$T/idle.log"))" \
			"$T/ul.log"
	fi
}

test_attack_poisoned_push
test_attack_idle_at_ulimit
test_attack_sync_bit_identical
test_attack_async_finite
test_attack_tls_bit_identical
test_attack_flood_descriptors
test_attack_flood_then_restart
test_attack_rank_taken
test_attack_impostor_server
