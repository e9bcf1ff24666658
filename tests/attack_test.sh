#!/bin/sh
# tests/attack_test.sh - jobs under attack by a local process that does not
# hold their secret (build/tests/proc_attack): anonymous shutdown and
# stats, impersonated pushes with INT64 steps, NaN and infinity, wrong and
# replayed hellos, a flood of parked pulls, an oversized message and many
# half-sent ones, over tcp while the job trains. A sync job must end
# bit-identical to the same job left alone; an async one must end with
# finite parameters and its counters showing the refusals. A TLS job must
# turn away clients without a certificate, or with another CA's, and
# plain-text speakers, and also end bit-identical.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
A=build/tests/proc_attack
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-attack-XXXXXX")
trap 'rm -rf "$T"' EXIT
. tests/lib.sh

# A straggling worker 0 keeps the job running while the attack goes on;
# it changes no value in sync mode. --auth-timeout 2: half-sent messages
# are closed within the job.
J="--servers 2 --workers 2 --model mlp:64 --data synthetic:1200 --seed 3 --batch 64 --steps 300 --straggler 0:40 --auth-timeout 2"

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
	$P run $J --transport tcp --mode "$1" --out "$2" \
		--save-model "$2/m.bin" >"$2.log" 2>&1 &
	job=$!
	u=$(urls "$2")
	$A "$u" 1 2 >"$2.attack" 2>&1
	arc=$?
	kill -0 $job 2>/dev/null && alive=1 || alive=0
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
	$P run $J $tls --mode sync --out "$T/tref" --save-model "$T/tref/m.bin" \
		>"$T/tref.log" 2>&1
	r0=$?
	$P run $J $tls --mode sync --out "$T/tls" --save-model "$T/tls/m.bin" \
		>"$T/tls.log" 2>&1 &
	job=$!
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
	wait $job
	rc=$?
	refused=$(grep -c '^refused' "$T/tls.attack")
	if [ "$r0" = 0 ] && [ "$rc" = 0 ] && [ "$bad" = 0 ] &&
		[ "$alive" = 1 ] && [ "$refused" -ge 4 ] &&
		! grep -q '^ACCEPTED' "$T/tls.attack" &&
		cmp -s "$T/tref/m.bin" "$T/tls/m.bin"; then
		ok $n
	else
		no $n "exits $r0 $rc, $bad attacks got through, alive $alive, $refused refused, or models differ" \
			"$T/tls.attack"
	fi
}

test_attack_sync_bit_identical
test_attack_async_finite
test_attack_tls_bit_identical
