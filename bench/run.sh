#!/bin/sh
# bench/run.sh - make bench: pstrain against baselines measured in the
# same run, rounds interleaved, medians reported (docs/PERFORMANCE.md).
#  1. communication: a pushpull of n floats through one server (pstrain.h),
#     its values copied and lent, against a raw nng REQ/REP round trip of
#     the same bytes with the same socket buffers (and, apart, with nng's
#     defaults), and against the raw exchange cut into pstrain's pieces
#     and sent at once (the rate those pieces could reach), ipc and tcp;
#     over ipc also pstrain with --transport shm (values in shared
#     memory, headers on the socket), copied and lent,
#     at the sizes of a tiny model, mlp:256,128 and 4.35M floats (17.4 MB,
#     the size issue 12 names; mlp:2048,2048 has 5.82M), the
#     servers in a process of their own (bench/comm.c "procs");
#  2. training, samples/s of training time (no periodic evaluation): sync
#     jobs of 1x1, 1x2, 2x2, 1x4 and 2x4 servers x workers, 1x1 and 2x4
#     also with --prefetch, --layer-push (1x1 off, 2x4 on: the other
#     way from auto) and --pin, 1x2 with --pin (the
#     PyTorch processes are not pinned); the same model, data
#     order and update in one process with no servers (bench/solo.c),
#     with one OpenBLAS thread and with two (one process using both
#     cores), and 1x1 over shm with two a process, and with two for the
#     worker alone (--worker-threads 2), against the latter (the worker
#     then computes on the core its server leaves idle);
#     each job's scaling efficiency (its samples/s over solo's);
#  3. the same job in PyTorch, one process (one thread, and as it comes:
#     torch's and OpenBLAS's own thread counts) and DDP (gloo) with 2
#     and 4 workers, and the same torch model through pstrain's servers
#     (pstrain.torch, sync 1 x 2 and 2 x 4), when python3-torch is
#     installed (said when it is not); and mlp:2048,2048, where the
#     exchange is most of a step: sync 1 x 2 and 2 x 2 and all-reduce
#     against DDP 2 and one process;
#  4. resources: page faults and server CPU per step in the steady state,
#     peak RSS, and a server's peak RSS, its own memory (RssAnon) and page
#     faults with mlp:2048,2048 at 1, 2, 4 and 8 workers, over ipc and
#     shm, against issue 12's bound;
#  5. the ring all-reduce of --mode allreduce alone, 2 workers on
#     5.82M floats, against its bytes at the raw nng rate (two serial
#     round trips), against raw nng sending them both ways at once in the
#     ring's chunks, and against the memory-copy floor (bench/ring.c);
#  6. whether this OpenBLAS kernel keeps a layer's product bit-identical
#     when it is cut into blocks (bench/split.c): what hiding a 1 x 1
#     job's round trip inside its compute would need;
#  7. embedding tables: rows/s pulled and pushed-and-pulled through one
#     server against raw nng moving the same bytes (bench/rows.c), the
#     bytes a step pulls against the rows it touches at 26,000 and 10^7
#     possible ids, and a sparse job (--data ctr, fm:15 and lr) against
#     PyTorch on the same examples in one process
#     (bench/torch_sparse.py, on bench/ctrdump's copy of the set).
# Writes build/bench/bench.json (BENCH_OUT to change) with the machine
# record. BENCH_ROUNDS (default 5) rounds each; BENCH_STEPS (600)
# training steps; BENCH_MEM_STEPS (30) steps of the memory runs, on
# BENCH_MEM_DATA (fashion-mnist; tests/bench_test.sh takes a small
# synthetic set: the final evaluation of mlp:2048,2048 on 60,000
# examples is most of such a run); BENCH_SPARSE_EXAMPLES (200000)
# examples of the sparse jobs' ctr set; BENCH_COMM_DIV (1) divides the
# exchanges timed of each size (at least 2).
cd "$(dirname "$0")/.." || exit 2
P=bin/pstrain
R=${BENCH_ROUNDS:-5}
OUT=${BENCH_OUT:-build/bench/bench.json}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-bench-XXXXXX")
trap 'rm -rf "$T"' EXIT
PSTRAIN_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export PSTRAIN_SECRET OPENBLAS_NUM_THREADS=1

# median: the median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan";
	else if (NR % 2) print v[(NR + 1) / 2];
	else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# span: "MIN MAX" of the numbers on stdin (how far the rounds spread)
span() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 }
	END { if (NR == 0) print "nan nan"; else print lo, hi }'; }

echo "pstrain bench: $R interleaved rounds per figure; machine record below"
json="{\n  \"rounds\": $R,\n  \"communication\": ["
sep=""
shm_lines=""
printf '\n%-5s %-22s %10s %10s %10s %7s %11s %10s %7s %7s %10s %7s %10s %7s\n' \
	transport size raw_nng_us "(defaults)" pstrain_us speed "(min-max)" \
	lent_us speed "vs dflt" raw_cb_us "vs cb" pieces_us "vs pcs"
# name floats iterations
for tr in ipc tcp; do
	for spec in "tiny_2.6KB 650 2000" "mlp256x128_0.94MB 235146 100" \
		"large_17.4MB 4350000 24"; do
		set -- $spec
		if [ $tr = ipc ]; then url="ipc://$T/c"; else url=tcp://127.0.0.1; fi
		it=$(($3 / ${BENCH_COMM_DIV:-1}))
		[ "$it" -ge 2 ] || it=2
		build/bench/comm "$url" "$2" "$R" "$it" procs >"$T/c.txt" 2>"$T/c.err" ||
			{ echo "bench: comm failed:"; cat "$T/c.err"; exit 1; }
		# Columns: raw nng with the system's socket buffers, raw nng
		# with pstrain's (ipc; the same over tcp), pstrain copying its
		# values, pstrain lending them. speed: raw time / pstrain time
		# per round, median (1 = as fast), against raw nng with the
		# same buffers; "vs dflt" against raw nng as nng leaves them;
		# raw_cb: raw nng (same buffers) driven by an aio callback and
		# a condition variable, as pstrain's client drives a request,
		# and "vs cb" pstrain copying against that; pieces: raw nng in
		# pstrain's pieces, all sent at once, and "vs pcs" pstrain
		# copying against that (the strongest raw exchange here).
		dflt=$(awk '{print $1}' "$T/c.txt" | median)
		raw=$(awk '{print $2}' "$T/c.txt" | median)
		ps=$(awk '{print $3}' "$T/c.txt" | median)
		lent=$(awk '{print $4}' "$T/c.txt" | median)
		sp=$(awk '{print $2 / $3}' "$T/c.txt" | median)
		sl=$(awk '{print $2 / $4}' "$T/c.txt" | median)
		sd=$(awk '{print $1 / $3}' "$T/c.txt" | median)
		cb=$(awk '{print $5}' "$T/c.txt" | median)
		sc=$(awk '{print $5 / $3}' "$T/c.txt" | median)
		pc=$(awk '{print $6}' "$T/c.txt" | median)
		spc=$(awk '{print $6 / $3}' "$T/c.txt" | median)
		set -- "$@" $(awk '{print $2 / $3}' "$T/c.txt" | span)
		f='%-5s %-22s %10.1f %10.1f %10.1f %6.2fx %5.2f-%.2f'
		printf "$f %10.1f %6.2fx %6.2fx %10.1f %6.2fx %10.1f %6.2fx\n" \
			$tr "$1" "$raw" "$dflt" "$ps" "$sp" "$4" "$5" "$lent" \
			"$sl" "$sd" "$cb" "$sc" "$pc" "$spc"
		# Shared memory (ipc only): pstrain's pushpull with its values
		# in shared memory, copied and lent, against raw nng in pieces.
		shm_j=""
		if [ $tr = ipc ]; then
			sm=$(awk '{print $7}' "$T/c.txt" | median)
			sml=$(awk '{print $8}' "$T/c.txt" | median)
			ssm=$(awk '{print $6 / $7}' "$T/c.txt" | median)
			ssl=$(awk '{print $6 / $8}' "$T/c.txt" | median)
			shm_lines="$shm_lines$(printf '%-22s %10.1f %10.1f %7.2fx %10.1f %7.2fx' \
				"$1" "$pc" "$sm" "$ssm" "$sml" "$ssl")
"
			shm_j=", \"pstrain_shm_us\": $sm, \"pstrain_shm_lent_us\": $sml, \"speed_shm_vs_raw_pieces\": $ssm, \"speed_shm_lent_vs_raw_pieces\": $ssl"
		fi
		json="$json$sep\n    {\"transport\": \"$tr\", \"size\": \"$1\", \"floats\": $2, \"raw_nng_us\": $raw, \"raw_nng_default_buffers_us\": $dflt, \"pstrain_us\": $ps, \"pstrain_lent_us\": $lent, \"speed_vs_raw\": $sp, \"speed_range\": [$4, $5], \"speed_lent_vs_raw\": $sl, \"speed_vs_raw_default_buffers\": $sd, \"raw_nng_callback_us\": $cb, \"speed_vs_raw_callback\": $sc, \"raw_nng_pieces_us\": $pc, \"speed_vs_raw_pieces\": $spc$shm_j}"
		sep=","
	done
done
json="$json\n  ],"
printf '\n%-22s %10s %10s %8s %10s %8s\n' "--transport shm (ipc)" \
	pieces_us shm_us "vs pcs" lent_us "vs pcs"
printf '%s' "$shm_lines"

# The ring all-reduce of --mode allreduce alone (bench/ring.c): 2 workers
# sum mlp:2048,2048's 5.82M floats, against its bytes at the raw nng rate
# (2 REQ/REP round trips of n/2 floats between the same two processes),
# against raw nng sending them both ways at once in the ring's chunks
# (duplex), and against the time to copy 2n floats (floor), rounds
# interleaved. time: ring / each.
RN=5820000
build/bench/ring "$T" $RN "$R" 10 >"$T/r.txt" 2>"$T/r.err" ||
	{ echo "bench: ring failed:"; cat "$T/r.err"; exit 1; }
ring=$(awk '{print $1}' "$T/r.txt" | median)
bound=$(awk '{print $2}' "$T/r.txt" | median)
duplex=$(awk '{print $3}' "$T/r.txt" | median)
floor=$(awk '{print $4}' "$T/r.txt" | median)
rt=$(awk '{print $1 / $2}' "$T/r.txt" | median)
rd=$(awk '{print $1 / $3}' "$T/r.txt" | median)
rf=$(awk '{print $1 / $4}' "$T/r.txt" | median)
set -- $(awk '{print $1 / $3}' "$T/r.txt" | span)
printf '\n%-44s %10s %10s %10s %10s %7s %11s %7s %7s\n' \
	"ring all-reduce, 2 workers, 5.82M floats" ring_us serial_us \
	duplex_us floor_us time "(min-max)" "vs ser" "vs flr"
printf '%-44s %10.1f %10.1f %10.1f %10.1f %6.2fx %5.2f-%.2f %6.2fx %6.2fx\n' \
	"(ipc; time: ring / raw duplex in chunks)" "$ring" "$bound" "$duplex" \
	"$floor" "$rd" "$1" "$2" "$rt" "$rf"
json="$json\n  \"ring\": {\"floats\": $RN, \"workers\": 2, \"ring_us\": $ring, \"bound_us\": $bound, \"duplex_us\": $duplex, \"floor_us\": $floor, \"time_vs_duplex\": $rd, \"time_vs_duplex_range\": [$1, $2], \"time_vs_bound\": $rt, \"time_vs_floor\": $rf},"

# Training: the same job as pstrain run, as one process (bench/solo) and
# in PyTorch alone and as DDP, samples/s of training time. Each round runs
# every configuration once, so a ratio pairs figures of the same round.
M="--model mlp:256,128 --data fashion-mnist --batch 256 --seed 1 --lr 0.1"
STEPS=${BENCH_STEPS:-600}
PY=""
for p in python3 /usr/bin/python3; do
	if $p -c 'import torch' 2>/dev/null; then PY=$p; break; fi
done
# psSxW: a sync job of S servers x W workers, as pstrain run starts it
# (--layer-push auto: on for 1 x 1 on 2 cores, off where the processes
# outnumber the cores); _pf adds --prefetch, _lp --layer-push on, _nolp
# --layer-push off, _pin --pin (each measured on and off), _tcp
# --transport tcp, _shm --transport shm, _b2 --transport shm with two
# OpenBLAS threads a process, _wt2 --transport shm with two for the
# worker alone (--worker-threads 2; the others --transport ipc; a job of run's
# default, auto, goes over shm). asSxW: the
# same in --mode async. arW: --mode allreduce with W workers.
CONFIGS="solo solo2 solo_pf ps1x1 ps1x1_pf ps1x1_nolp ps1x1_pin ps1x1_tcp \
ps1x1_shm ps1x1_b2 ps1x1_wt2 ps1x2 ps1x2_pin ps2x2 ps2x2_shm ps1x4 ps2x4 ps2x4_pf ps2x4_lp \
ps2x4_pin ps2x4_shm as2x2 as2x2_shm ar2 ar4"
[ -n "$PY" ] && CONFIGS="$CONFIGS torch1 torch1n ddp2 ddp4 br1x2 br2x4"
# pstrain CONFIG: runs psSxW[_pf|_lp]; prints samples/s, and appends its
# resource figures (summary.json) to $T/CONFIG.res
RES="server_faults_per_update worker_faults_per_step server_cpu_ms_per_update server_max_rss_mb worker_max_rss_mb"
pstrain() {
	sw=${1#ps}
	sw=${sw%_*}
	mode=sync
	case $1 in ar*) mode=allreduce sw="0x${1#ar}" ;; esac
	case $1 in as*) mode=async sw=${1#as}; sw=${sw%_*} ;; esac
	case $1 in *_pf) f=--prefetch ;; *_lp) f="--layer-push on" ;;
	*_nolp) f="--layer-push off" ;; *_pin) f=--pin ;; *) f="" ;; esac
	case $1 in *_tcp) f="--transport tcp" ;; *_shm | *_b2) f="--transport shm" ;;
	*_wt2) f="--transport shm --worker-threads 2" ;;
	*) f="$f --transport ipc" ;; esac
	b=1 # OpenBLAS threads a process
	case $1 in *_b2) b=2 ;; esac
	rm -rf "$T/run"
	OPENBLAS_NUM_THREADS=$b $P run --mode $mode --servers "${sw%x*}" --workers "${sw#*x}" $M $f \
		--steps "$STEPS" --eval-every 1000000 --out "$T/run" \
		>"$T/run.log" 2>&1 ||
		{ echo "bench: pstrain run failed:" >&2; tail "$T/run.log" >&2
		  return 1; }
	for k in $RES; do
		printf '%s ' "$(jnum "$k")"
	done >>"$T/$1${RES_TAG:-}.res"
	echo >>"$T/$1${RES_TAG:-}.res"
	jnum samples_per_s
}
# jnum KEY: a number of the last run's summary.json ("nan" for null)
jnum() {
	v=$(sed -n "s/^  \"$1\": \([^,]*\),*\$/\1/p" "$T/run/summary.json")
	[ "$v" = null ] || [ -z "$v" ] && v=nan
	echo "$v"
}
# interleave WHAT FIGURE CONFIG...: R rounds, each running `FIGURE
# CONFIG` (which prints that configuration's figure) for every CONFIG in
# turn, the figures appended to $T/CONFIG.txt.
interleave() {
	what=$1 fig=$2
	shift 2
	for c in "$@"; do : >"$T/$c.txt"; done
	i=0
	while [ $i -lt "$R" ]; do
		for c in "$@"; do
			v=$($fig "$c")
			[ -n "$v" ] || { echo "bench: $c failed"; exit 1; }
			echo "$v" >>"$T/$c.txt"
		done
		i=$((i + 1))
		echo "$what round $i of $R done" >&2
	done
}
# dense CONFIG: the training figure of one configuration
dense() {
	case $1 in
	solo) build/bench/solo $M --steps "$STEPS" | awk '{print $2}' ;;
	solo2) OPENBLAS_NUM_THREADS=2 build/bench/solo $M --steps "$STEPS" |
		awk '{print $2}' ;;
	solo_pf) build/bench/solo $M --steps "$STEPS" --prefetch |
		awk '{print $2}' ;;
	ps* | ar* | as*) pstrain "$1" ;;
	torch1) $PY bench/torch_ref.py --workers 1 --steps "$STEPS" |
		awk '{print $2}' ;;
	torch1n) env -u OPENBLAS_NUM_THREADS $PY bench/torch_ref.py \
		--workers 1 --native --steps "$STEPS" | awk '{print $2}' ;;
	ddp*) $PY bench/torch_ref.py --workers "${1#ddp}" --steps "$STEPS" |
		awk '{print $2}' ;;
	br*) sw=${1#br}
		$PY bench/torch_ref.py --workers "${sw#*x}" --bridge "${sw%x*}" \
			--steps "$STEPS" | awk '{print $2}' ;;
	esac
}
for c in $CONFIGS; do : >"$T/$c.res"; done
# shellcheck disable=SC2086
interleave training dense $CONFIGS
# samples CONFIG...: each configuration's median figure as JSON pairs,
# "NAME": figure (NAME without an L_ prefix), for "samples_per_s".
samples() {
	s=""
	for c in "$@"; do
		s="$s${s:+, }\"${c#L_}\": $(median <"$T/$c.txt")"
	done
	echo "$s"
}
# ratio A B: the median over rounds of A's figure / B's
ratios() { paste "$T/$1.txt" "$T/$2.txt" | awk '{print $1 / $2}'; }
ratio() { ratios "$1" "$2" | median; }
printf '\n%-46s %12s %10s %s\n' "training, mlp:256,128, batch 256, $STEPS steps" \
	samples/s speed "(rounds min-max)"
json="$json\n  \"training\": {\"model\": \"mlp:256,128\", \"batch\": 256, \"steps\": $STEPS, \"samples_per_s\": {"
sep=""
for c in $CONFIGS; do
	v=$(median <"$T/$c.txt")
	eval "med_$c=$v"
	json="$json$sep\"$c\": $v"
	sep=", "
done
json="$json}, \"speed\": {"
sep=""
rj="" # the same ratios' spread over rounds, "speed_range"
# line NAME CONFIG BASE: one row, speed = CONFIG / BASE per round
line() {
	if [ -f "$T/$3.txt" ]; then
		r=$(ratio "$2" "$3")
		set -- "$@" $(ratios "$2" "$3" | span)
		json="$json$sep\"${2}_vs_$3\": $r"
		rj="$rj$sep\"${2}_vs_$3\": [$4, $5]"
		sep=", "
		printf '%-46s %12.0f %9.2fx %-10s (%.2f-%.2f)\n' "$1" \
			"$(median <"$T/$2.txt")" "$r" "of $3" "$4" "$5"
	else
		printf '%-46s %12.0f\n' "$1" "$(median <"$T/$2.txt")"
	fi
}
KERNEL=$(sed -n 's/^    "openblas_core": "\(.*\)",*$/\1/p' "$T/run/summary.json")
echo "(OpenBLAS kernel $KERNEL; one OpenBLAS thread a process unless said)"
printf '%-46s %12.0f\n' "one process, no servers (bench/solo)" "$med_solo"
line "  the same, 2 OpenBLAS threads (both cores)" solo2 solo
[ -n "$PY" ] && printf '%-46s %12.0f\n' "PyTorch, one process" "$med_torch1"
[ -n "$PY" ] && line "PyTorch, one process as it comes" torch1n torch1
[ -n "$PY" ] && printf '%-46s %12.0f\n' "PyTorch DDP (gloo), 2 workers" "$med_ddp2"
[ -n "$PY" ] && printf '%-46s %12.0f\n' "PyTorch DDP (gloo), 4 workers" "$med_ddp4"
line "pstrain sync, 1 server x 1 worker" ps1x1 solo
line "  the same, against solo with 2 threads" ps1x1 solo2
line "  the same, against PyTorch" ps1x1 torch1
line "pstrain sync, 1 x 2, against PyTorch as it comes" ps1x2 torch1n
line "pstrain sync, 2 x 2, against PyTorch as it comes" ps2x2 torch1n
line "pstrain sync, 2 x 4, against PyTorch as it comes" ps2x4 torch1n
line "pstrain 1 x 1, --transport shm, against solo" ps1x1_shm solo
line "  the same, against ipc" ps1x1_shm ps1x1
line "pstrain 1 x 1, shm, 2 OpenBLAS threads each" ps1x1_b2 solo2
line "  the same, against one thread each" ps1x1_b2 ps1x1_shm
line "pstrain 1 x 1, shm, --worker-threads 2" ps1x1_wt2 solo
line "  the same, against solo with 2 threads" ps1x1_wt2 solo2
line "  the same, against one thread" ps1x1_wt2 ps1x1_shm
line "pstrain 2 x 2, --transport shm, vs PyTorch as it comes" ps2x2_shm torch1n
line "  the same, against ipc" ps2x2_shm ps2x2
line "pstrain 2 x 4, --transport shm, vs PyTorch as it comes" ps2x4_shm torch1n
line "  the same, against ipc" ps2x4_shm ps2x4
line "pstrain async 2 x 2, --transport shm, against ipc" as2x2_shm as2x2
line "pstrain allreduce 2, against PyTorch as it comes" ar2 torch1n
line "pstrain sync, 1 server x 2 workers" ps1x2 ddp2
line "pstrain sync, 2 servers x 2 workers" ps2x2 ddp2
line "pstrain sync, 1 server x 4 workers" ps1x4 ddp4
line "pstrain sync, 2 servers x 4 workers" ps2x4 ddp4
line "pstrain allreduce, 2 workers" ar2 ddp2
line "  the same, against sync 1 x 2" ar2 ps1x2
line "pstrain allreduce, 4 workers" ar4 ddp4
line "  the same, against sync 2 x 4" ar4 ps2x4
line "pstrain.torch sync, 1 server x 2 workers" br1x2 ddp2
line "  the same, against pstrain's own workers" br1x2 ps1x2
line "pstrain.torch sync, 2 servers x 4 workers" br2x4 ddp4
line "  the same, against pstrain's own workers" br2x4 ps2x4
line "one process, --prefetch" solo_pf solo
line "pstrain 1 x 1, --prefetch" ps1x1_pf ps1x1
line "pstrain 1 x 1, --layer-push off" ps1x1_nolp ps1x1
line "  the same, against solo" ps1x1_nolp solo
line "pstrain 2 x 4, --prefetch" ps2x4_pf ps2x4
line "pstrain 2 x 4, --layer-push on" ps2x4_lp ps2x4
line "pstrain 1 x 1, --transport tcp" ps1x1_tcp ps1x1
line "  the same, against solo" ps1x1_tcp solo
line "pstrain 1 x 1, --pin" ps1x1_pin ps1x1
line "  the same, against solo" ps1x1_pin solo
line "  the same, against PyTorch" ps1x1_pin torch1
line "pstrain 1 x 2, --pin, against DDP 2" ps1x2_pin ddp2
line "pstrain 2 x 4, --pin" ps2x4_pin ps2x4
line "  the same, against DDP 4" ps2x4_pin ddp4
json="$json}, \"speed_range\": {$rj}},"
# Scaling efficiency: each job's samples/s over one process's (solo, one
# thread), median over rounds; 1 = as fast as no servers at all.
printf '\n%-46s' "scaling efficiency (samples/s over solo's)"
json="$json\n  \"scaling_efficiency\": {"
sep=""
k=0
for c in $CONFIGS; do
	case $c in ps* | ar* | br*) ;; *) continue ;; esac
	[ $((k % 4)) = 0 ] && printf '\n '
	e=$(ratio "$c" solo)
	printf ' %-11s %5.2f' "$c" "$e"
	json="$json$sep\"$c\": $e"
	sep=", "
	k=$((k + 1))
done
echo
json="$json},"

# mlp:2048,2048 (5.82M floats), where the exchange is most of a sync step:
# sync 1 x 2 and 2 x 2 and all-reduce against DDP 2 and one process,
# BENCH_LARGE_ROUNDS (5: a shared machine's noise moves a round by
# 10-20%) rounds of BENCH_LARGE_STEPS (40) steps.
# BENCH_LARGE_DATA (fashion-mnist) for pstrain and solo (the test's
# small set: a final evaluation of this model on 10,000 examples would be
# most of a short run); PyTorch reads fashion-mnist.
LM="--model mlp:2048,2048 --data ${BENCH_LARGE_DATA:-fashion-mnist} --batch 256 --seed 1 --lr 0.1"
LSTEPS=${BENCH_LARGE_STEPS:-40}
LCONF="L_solo L_ps1x2 L_ps2x2 L_ps2x2_shm L_ar2"
[ -n "$PY" ] && LCONF="$LCONF L_ddp2 L_torch1n"
# large CONFIG: the figure of one configuration on mlp:2048,2048
large() {
	case $1 in
	L_solo) build/bench/solo $LM --steps "$LSTEPS" | awk '{print $2}' ;;
	L_ddp2) $PY bench/torch_ref.py --workers 2 --hidden 2048,2048 \
		--steps "$LSTEPS" | awk '{print $2}' ;;
	L_torch1n) env -u OPENBLAS_NUM_THREADS $PY bench/torch_ref.py \
		--workers 1 --native --hidden 2048,2048 --steps "$LSTEPS" |
		awk '{print $2}' ;;
	*) (M=$LM STEPS=$LSTEPS RES_TAG=_large; pstrain "${1#L_}") ;;
	esac
}
for c in $LCONF; do : >"$T/${c#L_}_large.res"; done
R0=$R
R=${BENCH_LARGE_ROUNDS:-5}
# shellcheck disable=SC2086
interleave "mlp:2048,2048" large $LCONF
printf '\n%-46s %12s %10s %s\n' "training, mlp:2048,2048, batch 256, $LSTEPS steps" \
	samples/s speed "(rounds min-max)"
# shellcheck disable=SC2086
json="$json\n  \"large\": {\"model\": \"mlp:2048,2048\", \"batch\": 256, \"steps\": $LSTEPS, \"rounds\": $R, \"samples_per_s\": {$(samples $LCONF)}, \"speed\": {"
sep=""
rj=""
printf '%-46s %12.0f\n' "one process, no servers (bench/solo)" \
	"$(median <"$T/L_solo.txt")"
line "PyTorch, one process as it comes" L_torch1n L_solo
line "PyTorch DDP (gloo), 2 workers" L_ddp2 L_solo
line "pstrain sync, 1 server x 2 workers" L_ps1x2 L_ddp2
line "pstrain sync, 2 servers x 2 workers" L_ps2x2 L_ddp2
line "  the same, against one process" L_ps2x2 L_solo
line "pstrain sync, 2 x 2, --transport shm" L_ps2x2_shm L_ddp2
line "  the same, against ipc" L_ps2x2_shm L_ps2x2
line "pstrain allreduce, 2 workers" L_ar2 L_ddp2
json="$json}, \"speed_range\": {$rj}},"
R=$R0

# The processes' own resource use (getrusage), steady state from the 20th
# step or update on: medians over rounds.
printf '\n%-22s %14s %14s %14s %11s %11s\n' "resources" faults/update \
	faults/step "cpu ms/update" "server MB" "worker MB"
printf '%-22s %14s %14s %14s %11s %11s\n' "" "(server)" "(worker)" \
	"(server)" "(peak RSS)" "(peak RSS)"
json="$json\n  \"resources\": {"
sep=""
for c in $CONFIGS; do
	case $c in ps* | ar* | as*) ;; *) continue ;; esac
	line=""
	jl=""
	i=1
	for k in $RES; do
		v=$(awk -v i=$i '{print $i}' "$T/$c.res" | median)
		line="$line $v"
		jv=$v # allreduce has no server figures: JSON's null
		case $v in nan | -nan) jv=null ;; esac
		jl="$jl${jl:+, }\"$k\": $jv"
		i=$((i + 1))
	done
	set -- $line
	printf '%-22s %14.3f %14.3f %14.3f %11.1f %11.1f\n' "$c" "$1" "$2" \
		"$3" "$4" "$5"
	json="$json$sep\n    \"$c\": {$jl}"
	sep=","
done
json="$json\n  },"
# Server memory with a large model: mlp:2048,2048 (5.82M floats, one
# server) with 1, 4 and 8 workers, against the bound issue 12 sets:
# the shard x (1 + the optimizer's state vectors) + one gradient per
# worker + 32 MiB. Memory is no timing: one run each.
MEM_STEPS=${BENCH_MEM_STEPS:-30}
MEM_DATA=${BENCH_MEM_DATA:-fashion-mnist}
# BENCH_MEM_WORKERS: the worker counts (1 and 8 at least: their ratio).
printf '\n%-30s %10s %10s %10s %14s %14s\n' "server memory, mlp:2048,2048" \
	"RSS MiB" "own MiB" "bound MiB" "faults/update" "faults/step"
printf '%-30s %10s %10s %10s %14s %14s\n' "(sgd, peak)" "" "(RssAnon)" "" \
	"(server)" "(worker)"
[ "$MEM_DATA" = fashion-mnist ] || echo "(on $MEM_DATA)"
json="$json\n  \"server_memory\": {\"model\": \"mlp:2048,2048\", \"data\": \"$MEM_DATA\", \"steps\": $MEM_STEPS"
# Over ipc and over shm (the workers' gradients then stay in their
# segments: the server's RSS counts the pages of them it reads, its own
# memory, RssAnon, does not).
for tr in ipc shm; do
	for wk in ${BENCH_MEM_WORKERS:-1 2 4 8}; do
		rm -rf "$T/run"
		$P run --mode sync --servers 1 --workers $wk --model mlp:2048,2048 \
			--data "$MEM_DATA" --batch 256 --seed 1 --lr 0.1 \
			--steps "$MEM_STEPS" --eval-every 1000000 --out "$T/run" \
			--transport $tr >"$T/run.log" 2>&1 ||
			{ echo "bench: pstrain run failed:"; tail "$T/run.log"; exit 1; }
		rss=$(jnum server_max_rss_mb)
		own=$(jnum server_max_private_mb)
		n=$(sed -n 's/^  "hi": \([0-9]*\),*$/\1/p' "$T/run/server-0.json")
		bound=$(awk -v n="$n" -v w=$wk 'BEGIN { print n * 4 * (1 + w) / 1048576 + 32 }')
		sf=$(jnum server_faults_per_update)
		wf=$(jnum worker_faults_per_step)
		sfj=$sf wfj=$wf ownj=$own # too short a run: JSON's null
		case $sf in nan | -nan) sfj=null ;; esac
		case $wf in nan | -nan) wfj=null ;; esac
		case $own in nan | -nan) ownj=null ;; esac
		printf '%-30s %10.1f %10.1f %10.1f %14.3f %14.3f\n' \
			"1 server x $wk workers, $tr" "$rss" "$own" "$bound" "$sf" "$wf"
		k=w$wk
		[ $tr = shm ] && k=shm_w$wk
		json="$json, \"$k\": {\"server_max_rss_mb\": $rss, \"server_max_private_mb\": $ownj, \"bound_mb\": $bound, \"server_faults_per_update\": $sfj, \"worker_faults_per_step\": $wfj}"
		eval "rss_${tr}_w$wk=$rss own_${tr}_w$wk=$own"
	done
done
g=$(awk -v a="$rss_ipc_w8" -v b="$rss_ipc_w1" 'BEGIN { print a / b }')
go=$(awk -v a="$own_ipc_w8" -v b="$own_ipc_w1" 'BEGIN { print a / b }')
gs=$(awk -v a="$rss_shm_w8" -v b="$rss_shm_w1" 'BEGIN { print a / b }')
gso=$(awk -v a="$own_shm_w8" -v b="$own_shm_w1" 'BEGIN { print a / b }')
printf '%-30s %9.2fx %9.2fx\n' "8 workers against 1, ipc" "$g" "$go"
printf '%-30s %9.2fx %9.2fx\n' "8 workers against 1, shm" "$gs" "$gso"
json="$json, \"w8_vs_w1\": $g, \"own_w8_vs_w1\": $go, \"shm_w8_vs_w1\": $gs, \"shm_own_w8_vs_w1\": $gso},"

# Embedding tables (issue 35). Rows through one server (bench/rows.c):
# K = 4096 rows of 16 floats a request, drawn from 2^20 rows that exist,
# pulled (lookups) and pushed-and-pulled (async), against raw nng moving
# the same bytes; rows/s = K / the request's time. speed: raw time /
# pstrain's, per round, median.
TK=4096
build/bench/rows "ipc://$T/t" 16 $TK 1048576 "$R" 50 >"$T/t.txt" 2>"$T/t.err" ||
	{ echo "bench: rows failed:"; cat "$T/t.err"; exit 1; }
printf '\n%-40s %12s %12s %7s %11s\n' "table rows, 16 floats, $TK a request" \
	raw_rows/s rows/s speed "(min-max)"
json="$json\n  \"tables\": {\"rows\": {\"dim\": 16, \"rows_per_request\": $TK, \"rows_held\": 1048576"
for op in pull pushpull; do
	case $op in pull) a=1 b=2 ;; *) a=3 b=4 ;; esac
	raw=$(awk -v c=$a -v k=$TK '{print k / $c * 1e6}' "$T/t.txt" | median)
	ps=$(awk -v c=$b -v k=$TK '{print k / $c * 1e6}' "$T/t.txt" | median)
	sp=$(awk -v a=$a -v b=$b '{print $a / $b}' "$T/t.txt" | median)
	set -- $(awk -v a=$a -v b=$b '{print $a / $b}' "$T/t.txt" | span)
	printf '%-40s %12.0f %12.0f %6.2fx %5.2f-%.2f\n' "  $op (ipc, one server)" \
		"$raw" "$ps" "$sp" "$1" "$2"
	json="$json, \"$op\": {\"raw_nng_rows_per_s\": $raw, \"pstrain_rows_per_s\": $ps, \"speed_vs_raw\": $sp, \"speed_range\": [$1, $2]}"
done
json="$json},"
# Bytes a step pulls against the rows it touches, at 26,000 and 10^7
# possible ids (26 fields of 1,000 and of 384,615): what must not grow
# with the table. fm:15 (rows of 16 floats), batch 256, 1 x 1, sync.
# Counted, not timed: one run each.
printf '\n%-40s %12s %12s %12s\n' "pulled a step, fm:15, batch 256 x 26" \
	rows bytes "per row x64"
json="$json \"bytes\": {\"model\": \"fm:15\", \"batch\": 256"
for v in 1000 384615; do
	rm -rf "$T/run"
	$P run --mode sync --servers 1 --workers 1 --model fm:15 \
		--data ctr:20000,26,$v --batch 256 --seed 1 --lr 0.1 \
		--steps 30 --eval-every 1000000 --out "$T/run" \
		>"$T/run.log" 2>&1 ||
		{ echo "bench: pstrain run failed:"; tail "$T/run.log"; exit 1; }
	rows=$(jnum rows_per_step)
	by=$(jnum bytes_pulled_per_step)
	x=$(awk -v b="$by" -v r="$rows" 'BEGIN { print b / (r * 64) }')
	ids=$((26 * v))
	printf '%-40s %12.1f %12.0f %11.3fx\n' "  $ids possible ids" "$rows" \
		"$by" "$x"
	json="$json, \"ids_$ids\": {\"rows_per_step\": $rows, \"bytes_pulled_per_step\": $by, \"bytes_vs_rows\": $x}"
done
json="$json},"
# A sparse job's samples/s against PyTorch on the same examples in one
# process (bench/torch_sparse.py: nn.EmbeddingBag for lr, nn.Embedding
# rows for fm; sparse gradients, SGD), rounds interleaved.
NE=${BENCH_SPARSE_EXAMPLES:-200000}
SD="ctr:$NE,26,384615"
SCONF="sp_fm sp_lr"
if [ -n "$PY" ]; then
	SCONF="$SCONF sp_fm_torch sp_lr_torch"
	build/bench/ctrdump "$SD" "$T/ctr.bin" ||
		{ echo "bench: ctrdump failed"; exit 1; }
fi
# sparse CONFIG: the figure of one sparse configuration
sparse() {
	case $1 in sp_fm*) m=fm:15 ;; *) m=lr ;; esac
	case $1 in
	*_torch) $PY bench/torch_sparse.py --dump "$T/ctr.bin" \
		--examples "$NE" --fields 26 --model $m --batch 256 \
		--lr 0.1 --steps "$STEPS" | awk '{print $2}' ;;
	*) rm -rf "$T/run"
		$P run --mode sync --servers 1 --workers 1 --model $m \
			--data "$SD" --batch 256 --seed 1 --lr 0.1 \
			--steps "$STEPS" --eval-every 1000000 --out "$T/run" \
			>"$T/run.log" 2>&1 ||
			{ echo "bench: pstrain run failed:" >&2
			  tail "$T/run.log" >&2; return 1; }
		jnum samples_per_s ;;
	esac
}
# shellcheck disable=SC2086
interleave sparse sparse $SCONF
printf '\n%-46s %12s %10s %s\n' "sparse training, $SD, batch 256" \
	samples/s speed "(rounds min-max)"
# shellcheck disable=SC2086
json="$json \"training\": {\"data\": \"$SD\", \"batch\": 256, \"steps\": $STEPS, \"samples_per_s\": {$(samples $SCONF)}, \"speed\": {"
sep=""
rj=""
line "pstrain sync 1 x 1, fm:15" sp_fm sp_fm_torch
line "pstrain sync 1 x 1, lr" sp_lr sp_lr_torch
[ -n "$PY" ] && printf '%-46s %12.0f\n' "PyTorch, fm:15 (nn.Embedding)" \
	"$(median <"$T/sp_fm_torch.txt")"
[ -n "$PY" ] && printf '%-46s %12.0f\n' "PyTorch, lr (nn.EmbeddingBag)" \
	"$(median <"$T/sp_lr_torch.txt")"
json="$json}, \"speed_range\": {$rj}}},"

# Cutting the first layer's products into 4 blocks: the same bits?
printf '\n%-40s %s\n' "mlp:256,128's first layer in 4 blocks" "(bench/split)"
build/bench/split >"$T/split.txt" || { echo "bench: split failed"; exit 1; }
sj=""
while read -r name verdict; do
	printf '%-40s %s\n' "  $name" "$verdict"
	sj="$sj${sj:+, }\"$name\": \"$verdict\""
done <"$T/split.txt"
json="$json\n  \"split_products\": {$sj},"

if [ -n "$PY" ]; then
	torch=$($PY -c 'import torch; print(torch.__version__)')
	torch="PyTorch $torch ($PY), one thread per process"
else
	torch="not installed (Debian: python3-torch); PyTorch and DDP not compared"
fi
printf '\nPyTorch: %s\n' "$torch"
json="$json\n  \"pytorch\": \"$torch\","

# The machine record, as every run keeps it.
rec=$(sed -n '/^  "record": {/,/^  }/p' "$T/run/summary.json" | sed '1d;$d')
printf '\nmachine:\n%s\n' "$(echo "$rec" | sed 's/^    /  /')"
json="$json\n  \"record\": {\n$rec\n  }\n}"
mkdir -p "$(dirname "$OUT")"
printf "$json\n" >"$OUT"
echo "written: $OUT"
