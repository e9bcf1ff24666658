#!/bin/sh
# tests/attack_test.sh - jobs under attack by a local process that does not
# hold their secret (build/tests/proc_attack): anonymous shutdown and
# stats, impersonated pushes with INT64 steps, NaN and infinity, wrong and
# replayed hellos, a flood of parked pulls, an oversized message and many
# half-sent ones, over tcp while the job trains. A sync job must end
# bit-identical to the same job left alone; an async one must end with
# finite parameters and its counters showing the refusals.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
A=build/tests/proc_attack
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-attack-XXXXXX")
trap 'rm -rf "$T"' EXIT
. tests/lib.sh

# A straggling worker 0 keeps the job running while the attack goes on;
# it changes no value in sync mode. --auth-timeout 2: half-sent messages
# are closed within the job.
J="--transport tcp --servers 2 --workers 2 --model mlp:64 --data synthetic:1200 --seed 3 --batch 64 --steps 300 --straggler 0:40 --auth-timeout 2"

# urls DIR: the servers' tcp addresses, once both listen (bounded wait)
urls() {
	i=0
	while [ "$i" -lt 200 ]; do
		u=$(sed -n 's/.*listening on \(tcp:[^,]*\),.*/\1/p' \
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
	$P run $J --mode "$1" --out "$2" --save-model "$2/m.bin" \
		>"$2.log" 2>&1 &
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
	$P run $J --mode sync --out "$T/ref" --save-model "$T/ref/m.bin" \
		>"$T/ref.log" 2>&1
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

test_attack_sync_bit_identical
test_attack_async_finite
