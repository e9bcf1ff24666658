#!/bin/sh
# tests/tls_test.sh - tls+tcp:// with real processes: certificates from
# scripts/certs.sh; a job through `pstrain run --transport tls` that ends
# as the same job over ipc does; a server started by hand that refuses
# clients with no certificate or one from another CA (and workers that
# refuse a server from another CA), then serves its worker to the end;
# and clear errors for missing flags, needless flags and bad files.
# Prints "ok NAME" / "FAIL NAME" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
DIAL=build/tests/proc_tlsdial
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-tls-XXXXXX")
spid=""
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$T"' EXIT
. tests/lib.sh
# The job secret of the servers and workers started here by hand.
PSTRAIN_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d " \n")
export PSTRAIN_SECRET
J="--servers 1 --workers 1 --data synthetic:1200 --model softmax --seed 7 --batch 32"
C="$T/certs"
O="$T/other" # another CA, and certificates it signed
# The server's certificate names 127.0.0.1 and is good as a client's too.
RUN_TLS="--tls-cert $C/server.crt --tls-key $C/server.key --tls-ca $C/ca.crt"
WRK_TLS="--tls-cert $C/client.crt --tls-key $C/client.key --tls-ca $C/ca.crt"

test_tls_certs_script() {
	n=test_tls_certs_script
	command -v openssl >/dev/null ||
		{ no $n "the openssl command is missing (scripts/deps.sh)"; return 1; }
	sh scripts/certs.sh "$C" >"$T/certs.log" 2>&1 &&
		sh scripts/certs.sh "$O" >>"$T/certs.log" 2>&1 ||
		{ no $n "certs.sh failed" "$T/certs.log"; return 1; }
	for k in ca server client; do
		m=$(stat -c %a "$C/$k.key")
		[ "$m" = 600 ] || { no $n "$k.key has mode $m, not 600"; return 1; }
	done
	openssl verify -CAfile "$C/ca.crt" "$C/server.crt" "$C/client.crt" \
		>>"$T/certs.log" 2>&1 ||
		{ no $n "certificates do not verify against ca.crt" "$T/certs.log"; return 1; }
	# A second run into the same folder keeps the CA.
	cp "$C/ca.crt" "$T/ca.before"
	if sh scripts/certs.sh "$C" >"$T/again.log" 2>&1 ||
		! cmp -s "$C/ca.crt" "$T/ca.before"; then
		no $n "certs.sh replaced an existing CA" "$T/again.log"
		return 1
	fi
	openssl x509 -in "$C/server.crt" -noout -ext subjectAltName \
		>"$T/san.txt" 2>&1
	grep -q "IP Address:127.0.0.1" "$T/san.txt" &&
		grep -q "DNS:localhost" "$T/san.txt" && ok $n ||
		no $n "server.crt does not name 127.0.0.1 and localhost" "$T/san.txt"
}

test_tls_run_job() {
	# The launcher's children get the three flags and tls+tcp://
	# addresses; the job ends with the same model as over ipc. (The
	# timeout only bounds how long a broken build keeps the test.)
	n=test_tls_run_job
	$P run --transport tls $RUN_TLS --servers 2 --workers 2 \
		--data synthetic:1200 --model softmax --seed 7 --batch 32 \
		--steps 10 --out "$T/run" --save-model "$T/run/m.bin" \
		--rpc-timeout 120 >"$T/run.log" 2>&1 ||
		{ no $n "run failed" "$T/run.log"; return; }
	$P run --servers 2 --workers 2 --data synthetic:1200 --model softmax \
		--seed 7 --batch 32 --steps 10 --out "$T/ipc" \
		--save-model "$T/ipc/m.bin" >"$T/ipc.log" 2>&1 ||
		{ no $n "ipc run failed" "$T/ipc.log"; return; }
	ver=$(json final_version "$T/run/summary.json")
	if ! grep -q "listening on tls+tcp://127.0.0.1:[1-9]" \
		"$T/run/server-1.log"; then
		no $n "server 1 did not listen on tls+tcp" "$T/run/server-1.log"
	elif ! [ -s "$T/run/final.csv" ] || ! [ -s "$T/run/summary.json" ]; then
		no $n "no final.csv or summary.json" "$T/run.log"
	elif [ "$ver" != 10 ] || ! cmp -s "$T/run/m.bin" "$T/ipc/m.bin"; then
		no $n "final version '$ver', or the model differs from ipc's"
	else
		ok $n
	fi
}

test_tls_allreduce_job() {
	# --mode allreduce over TLS: each worker's ring listens on a
	# tls+tcp:// address of its own and dials its neighbour's with the
	# same three flags; the model is the ipc ring's.
	n=test_tls_allreduce_job
	a="--mode allreduce --workers 3 --data synthetic:1200 --model mlp:16"
	a="$a --seed 7 --batch 48 --steps 20"
	# shellcheck disable=SC2086
	$P run $a --transport tls $RUN_TLS --out "$T/ar" \
		--save-model "$T/ar/m.bin" --rpc-timeout 120 >"$T/ar.log" 2>&1 ||
		{ no $n "run failed" "$T/ar.log"; return; }
	# shellcheck disable=SC2086
	$P run $a --out "$T/ari" --save-model "$T/ari/m.bin" \
		>"$T/ari.log" 2>&1 || { no $n "ipc run failed" "$T/ari.log"; return; }
	if [ "$(grep -c '"tls+tcp://127.0.0.1:[1-9]' "$T/ar/summary.json")" != 3 ]
	then
		no $n "summary.json lacks 3 tls+tcp ring addresses" "$T/ar/summary.json"
	elif ! cmp -s "$T/ar/m.bin" "$T/ari/m.bin"; then
		no $n "the model differs from the ipc ring's"
	else
		ok $n
	fi
}

# start_server: a TLS server by hand, for one worker, on a free port;
# sets spid and url.
start_server() {
	$P server $J --listen "tls+tcp://127.0.0.1:0" --ready-file "$T/ready" \
		$RUN_TLS --out "$T/hand" >"$T/server.log" 2>&1 &
	spid=$!
	i=0
	while [ "$i" -lt 1200 ] && ! [ -s "$T/ready" ]; do
		kill -0 $spid 2>/dev/null || break
		sleep 0.05
		i=$((i + 1))
	done
	url=$(cat "$T/ready" 2>/dev/null)
	[ -n "$url" ]
}

# refused NAME CA [CERT KEY]: proc_tlsdial must be turned away.
refused() {
	name=$1
	shift
	$DIAL "$url" "$@" >"$T/$name.out" 2>&1
	rc=$?
	[ "$rc" = 1 ] && grep -q "^refused" "$T/$name.out" && ok $name ||
		no $name "tlsdial exit $rc" "$T/$name.out"
}

# worker_refused NAME FLAGS...: a real worker gives up on server 0.
worker_refused() {
	name=$1
	shift
	$P worker $J --rank 0 --connect "$url" --steps 5 --rpc-timeout 2 \
		--out "$T/rogue" "$@" >"$T/$name.log" 2>&1
	rc=$?
	[ "$rc" = 1 ] && grep -q "gave up .* waiting for server 0 at tls+tcp" \
		"$T/$name.log" && ok $name || no $name "worker exit $rc" "$T/$name.log"
}

test_tls_refusals_then_job() {
	mkdir -p "$T/hand" "$T/rogue"
	start_server || { no test_tls_server_starts "no ready file" "$T/server.log"; return; }
	ok test_tls_server_starts
	# No certificate at all: the server requires one.
	refused test_tls_no_client_cert_refused "$C/ca.crt"
	# A certificate that another CA signed.
	refused test_tls_foreign_client_cert_refused "$C/ca.crt" \
		"$O/client.crt" "$O/client.key"
	# The client trusts another CA: it refuses the server.
	refused test_tls_foreign_server_refused "$O/ca.crt" \
		"$C/client.crt" "$C/client.key"
	worker_refused test_tls_foreign_worker_refused \
		--tls-cert "$O/client.crt" --tls-key "$O/client.key" \
		--tls-ca "$C/ca.crt"
	worker_refused test_tls_worker_refuses_foreign_server \
		--tls-cert "$C/client.crt" --tls-key "$C/client.key" \
		--tls-ca "$O/ca.crt"
	# The same dial with the right certificate gets through, so the
	# refusals above were the server's (and it was up all along).
	n=test_tls_client_cert_connects
	$DIAL "$url" "$C/ca.crt" "$C/client.crt" "$C/client.key" \
		>"$T/good.out" 2>&1 && ok $n || no $n "tlsdial failed" "$T/good.out"
	# The job goes on: its own worker trains to the end (the timeout
	# only bounds how long a broken build keeps the test waiting).
	n=test_tls_job_goes_on
	$P worker $J --rank 0 --connect "$url" --steps 5 $WRK_TLS \
		--rpc-timeout 120 --out "$T/hand" >"$T/worker.log" 2>&1
	wrc=$?
	wait $spid
	src=$?
	spid=""
	ver=$(sed -n 's/^ *"version": \([0-9]*\),*$/\1/p' "$T/hand/server-0.json")
	if [ "$wrc" = 0 ] && [ "$src" = 0 ] && [ "$ver" = 5 ] &&
		[ -s "$T/hand/final.csv" ]; then
		ok $n
	else
		no $n "worker exit $wrc, server exit $src, version '$ver'" \
			"$T/worker.log"
	fi
}

test_tls_worker_checks_server_name() {
	# A server whose certificate (signed by the right CA) names another
	# host: the worker dialing 127.0.0.1 refuses it.
	n=test_tls_worker_checks_server_name
	mkdir -p "$T/named"
	printf 'subjectAltName=DNS:elsewhere.invalid\nextendedKeyUsage=serverAuth,clientAuth\n' \
		>"$T/named/ext"
	openssl req -new -key "$C/server.key" -subj "/CN=elsewhere.invalid" \
		-out "$T/named/csr" 2>"$T/named/openssl.log" &&
		openssl x509 -req -in "$T/named/csr" -CA "$C/ca.crt" \
			-CAkey "$C/ca.key" -CAcreateserial -days 30 \
			-extfile "$T/named/ext" -out "$T/named/crt" \
			2>>"$T/named/openssl.log" ||
		{ no $n "openssl failed" "$T/named/openssl.log"; return; }
	rm -f "$T/ready"
	$P server $J --listen "tls+tcp://127.0.0.1:0" --ready-file "$T/ready" \
		--tls-cert "$T/named/crt" --tls-key "$C/server.key" \
		--tls-ca "$C/ca.crt" >"$T/named/server.log" 2>&1 &
	spid=$!
	i=0
	while [ "$i" -lt 1200 ] && ! [ -s "$T/ready" ]; do
		kill -0 $spid 2>/dev/null || break
		sleep 0.05
		i=$((i + 1))
	done
	url=$(cat "$T/ready" 2>/dev/null)
	if [ -z "$url" ]; then
		no $n "no ready file" "$T/named/server.log"
	else
		worker_refused $n $WRK_TLS
	fi
	kill $spid 2>/dev/null
	wait $spid
	spid=""
}

# bad NAME WANT COMMAND...: COMMAND exits 2 and says WANT.
bad() {
	name=$1 want=$2
	shift 2
	"$@" >"$T/$name.out" 2>&1
	rc=$?
	[ "$rc" = 2 ] && grep -q -- "$want" "$T/$name.out" && ok $name ||
		no $name "exit $rc, expected 2 and '$want'" "$T/$name.out"
}

test_tls_bad_flags() {
	bad test_tls_run_needs_cert "--transport tls needs --tls-cert" \
		$P run --transport tls $J --steps 5 --out "$T/bad1"
	bad test_tls_server_needs_ca "needs --tls-ca" \
		$P server $J --listen "tls+tcp://127.0.0.1:0" \
		--tls-cert "$C/server.crt" --tls-key "$C/server.key"
	bad test_tls_worker_needs_key "needs --tls-key" \
		$P worker $J --connect "tls+tcp://127.0.0.1:9" --out "$T/bad2" \
		--tls-cert "$C/client.crt" --tls-ca "$C/ca.crt"
	bad test_tls_flags_need_tls_address "--tls-cert is only for TLS" \
		$P worker $J --connect "tcp://127.0.0.1:9" --out "$T/bad3" $WRK_TLS
	bad test_tls_run_flags_need_transport "give --transport tls" \
		$P run --transport tcp $RUN_TLS $J --steps 5 --out "$T/bad4"
	bad test_tls_missing_file_named "--tls-cert $T/nothing.crt: No such file" \
		$P run --transport tls --tls-cert "$T/nothing.crt" \
		--tls-key "$C/server.key" --tls-ca "$C/ca.crt" $J --steps 5 \
		--out "$T/bad5"
	bad test_tls_key_not_a_key_named "--tls-key $C/server.crt: holds no PEM private key" \
		$P server $J --listen "tls+tcp://127.0.0.1:0" \
		--tls-cert "$C/server.crt" --tls-key "$C/server.crt" \
		--tls-ca "$C/ca.crt"
	echo "not a certificate" >"$T/junk.pem"
	bad test_tls_ca_not_a_cert_named "--tls-ca $T/junk.pem: holds no PEM certificate" \
		$P worker $J --connect "tls+tcp://127.0.0.1:9" --out "$T/bad6" \
		--tls-cert "$C/client.crt" --tls-key "$C/client.key" \
		--tls-ca "$T/junk.pem"
	# Nothing started: no output folder for the refused run.
	n=test_tls_bad_flags_start_nothing
	[ ! -e "$T/bad1" ] && [ ! -e "$T/bad5" ] && ok $n ||
		no $n "a refused run created its --out folder"
	n=test_tls_help_lists_flags
	for cmd in run server worker; do
		k=$($P $cmd --help | grep -c -- "--tls-\(cert\|key\|ca\) FILE")
		[ "$k" = 3 ] || { no $n "pstrain $cmd --help lists $k TLS flags"; return; }
	done
	$P run --help | grep -q -- "--transport auto|ipc|shm|tcp|tls" && ok $n ||
		no $n "run --help does not list --transport tls"
}

test_tls_certs_script || { echo "FAIL tls_test: no certificates"; exit 1; }
test_tls_run_job
test_tls_allreduce_job
test_tls_refusals_then_job
test_tls_worker_checks_server_name
test_tls_bad_flags
