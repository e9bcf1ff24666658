#!/bin/sh
# tests/compare_test.sh - `pstrain compare`. On a folder of jobs crafted
# by hand (two modes x three seeds), --report-only must give the mean ±
# sd, min, max, outcome counts and k-of-n-reached worked out below, stop
# on a damaged job, say when selection was on the test set, and draw
# every plot as PNG and SVG from a script with relative paths, and pair
# the modes seed by seed. Real small jobs: a 2-seed comparison, the
# small-batch control sgd-small, --lr-grid's pick on tuning seeds,
# --seeds auto, --target-auc on a click set,
# refusal to overwrite without --force, --resume after Ctrl-C,
# modifiers (any run flag, through the flag table), determinism of sync,
# bad --modes and --seeds. Prints
# "ok NAME" / "FAIL NAME: why" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
P=$(cd "$(dirname "$P")" && pwd)/$(basename "$P") # we cd for gnuplot
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-compare-XXXXXX")
trap 'rm -rf "$T"' EXIT
D="--data synthetic:1200 --model mlp:32 --batch 32 --steps 60 \
--lr 0.2 --servers 1 --workers 2 --target-acc 0.3"

. tests/lib.sh

# png FILE: the first 8 bytes are the PNG signature
png() {
	[ "$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = \
		89504e470d0a1a0a ]
}

# has FILE TEXT: FILE holds TEXT as a fixed string
has() { grep -qF -- "$2" "$1"; }

# ---------------------------------------------------------------------
# A crafted comparison: C/LABEL/seed-S with summary.json (two-space
# top-level keys; nested "config" repeating names with other values, and
# "record"), eval.csv, worker-0.csv, worker-1.csv and staleness.csv.
C=$T/crafted

# job LABEL SEED CORE KEY=VALUE...: summary.json of one job; every
# report key not given is null.
job() {
	d=$C/$1/seed-$2
	mkdir -p "$d"
	core=$3
	shift 3
	{
		echo "{"
		for k in final_test_acc best_val_acc best_val_test_acc \
			samples_per_s step_ms_median comm_bound_ms eval_s \
			mean_staleness max_staleness_seen \
			idle_fraction dropped_gradients workers_lost \
			worker_restarts server_restarts; do
			v=null
			for kv in "$@"; do
				[ "${kv%%=*}" = "$k" ] && v=${kv#*=}
			done
			echo "  \"$k\": $v,"
		done
		for kv in "$@"; do
			case $kv in outcome=*) echo "  \"outcome\": \"${kv#*=}\",";;
			esac
		done
		echo '  "per_worker_batch": 16,'
		echo '  "classes": 10,'
		echo '  "startup_s": 0.5,'
		echo '  "config": {'
		echo '    "final_test_acc": 0.1,'
		echo '    "workers_lost": 9'
		echo '  },'
		echo '  "record": {'
		echo '    "version": "1.0",'
		echo '    "cpu_model": "Test CPU @ 2GHz",'
		echo "    \"openblas_core\": \"$core\""
		echo '  }'
		echo '}'
	} >"$d/summary.json"
	# the same 30 steps for both workers: 4 ms compute, 5 ms comm of 10
	for r in 0 1; do
		awk 'BEGIN { print "step,epoch,wall_s,loss,grad_norm,step_ms," \
			"compute_ms,comm_ms,staleness,lr,delay_ms,version"
			for (i = 1; i <= 30; i++)
				printf "%d,0,%.2f,%.3f,1.0,10,4,5,0,0.1,0,%d\n",
				    i, i * 0.1, 2.3 - i * 0.02, 2 * i }' \
			>"$d/worker-$r.csv"
	done
	printf 'staleness,count\n0,40\n1,15\n3,5\n' >"$d/staleness.csv"
}

# evals LABEL SEED STEP:WALL:ACC...: eval.csv of one job
evals() {
	f=$C/$1/seed-$2/eval.csv
	shift 2
	echo "step,wall_s,val_loss,val_acc,worker_step,eval_s" >"$f"
	for r in "$@"; do
		echo "$r" | awk -F: '{ printf "%s,%s,1.0,%s,%s,0.01\n", $1, $2,
			$3, $1 }' >>"$f"
	done
}

craft() {
	# sync: final 0.80 0.82 0.84 (mean 0.82, sd 0.02); best_val 0.85
	# 0.86 0.87 (0.86, 0.01); best_val_test 0.81 null 0.83 (0.82,
	# sqrt(0.0002) = 0.0141, 1 null); samples/s 1000 1100 1200 (1100,
	# 100); idle 0.1 0.2 0.3 (0.2, 0.1). Target 0.75 reached by seed 1
	# at step 30 / 3.0 s and seed 2 at 20 / 2.5 s: updates 25 ± 7.1;
	# examples (both workers' rows up to then x 16) 960 and 800: 880 ±
	# 113; training time (wall_s less startup_s, 0.5 s in every job)
	# 2.5 and 2.0: 2.250 ± 0.354; 2/3 reached. Median steps 10, 12, 14
	# ms (12.00 ± 2.00) against a bound of 5 ms. last5_acc, the mean of
	# each job's (at most 5) evaluations: 0.6667 0.72 0.6, 0.6622 ±
	# 0.0601; async's 0.68 0.2 0.55, 0.4767 ± 0.2483.
	job sync 1 Haswell outcome=ok final_test_acc=0.80 best_val_acc=0.85 \
		best_val_test_acc=0.81 samples_per_s=1000 eval_s=0.5 \
		step_ms_median=10 comm_bound_ms=5 \
		mean_staleness=0 max_staleness_seen=0 idle_fraction=0.1 \
		dropped_gradients=0 workers_lost=0
	job sync 2 Haswell outcome=ok final_test_acc=0.82 best_val_acc=0.86 \
		samples_per_s=1100 eval_s=0.5 mean_staleness=0 \
		step_ms_median=12 comm_bound_ms=5 \
		max_staleness_seen=0 idle_fraction=0.2 dropped_gradients=0 \
		workers_lost=0
	job sync 3 Haswell outcome=collapsed final_test_acc=0.84 \
		best_val_acc=0.87 best_val_test_acc=0.83 samples_per_s=1200 \
		step_ms_median=14 comm_bound_ms=5 \
		eval_s=0.5 mean_staleness=0 max_staleness_seen=0 \
		idle_fraction=0.3 dropped_gradients=0 workers_lost=0
	evals sync 1 10:1.0:0.5 20:2.0:0.7 30:3.0:0.8
	evals sync 2 10:1.5:0.6 20:2.5:0.76 30:3.5:0.8
	evals sync 3 10:1.2:0.5 20:2.2:0.6 30:3.2:0.7
	# async: seed 2 diverged (finals null): its final_test_acc counts as
	# chance, 1/10: 0.70 0.10 0.74 (0.5133, 0.3585, 1 at chance; the ok
	# jobs alone 0.72, sqrt(0.0008) = 0.0283; sync's 0.81, 0.0141); max staleness 3 5 4 (4.0, 1.0);
	# only seed 1 reaches 0.75 (step 40, 960 examples, 3.5 s): 40.0 ±
	# — (1/3 reached). Seed
	# 3 has a different openblas_core and one evaluation fewer.
	job async 1 Haswell outcome=ok final_test_acc=0.70 max_staleness_seen=3 \
		workers_lost=0
	job async 2 Haswell outcome=diverged max_staleness_seen=5 \
		workers_lost=0
	job async 3 SkylakeX outcome=ok final_test_acc=0.74 \
		max_staleness_seen=4 workers_lost=0
	evals async 1 20:2.0:0.5 40:4.0:0.76 60:6.0:0.78
	evals async 2 20:2.0:0.4 40:4.0:0.1 60:6.0:0.1
	evals async 3 20:2.0:0.5 40:4.0:0.6
}

# compare_only DIR [FLAG...]: --report-only over both modes, seeds 1..3
compare_only() {
	d=$1
	shift
	$P compare --report-only --modes sync,async --seeds 3 \
		--target-acc 0.75 --out "$d" "$@"
}

test_compare_target_auc() {
	# --target-auc: on a click set the "to A" columns follow the
	# validation AUC: updates_to_auc_A is the mean over seeds of the
	# first eval.csv row whose val_auc reaches A.
	n=test_compare_target_auc
	d=$T/auc
	$P compare --modes sync --model fm:4 --data ctr:20000,8,1000 \
		--servers 1 --workers 2 --batch 128 --epochs 2 --lr 0.1 \
		--optimizer adagrad --seeds 2 --target-auc 0.6 --out "$d" \
		>"$d.log" 2>&1 || { no $n "compare failed" "$d.log"; return; }
	want=$(for s in 1 2; do
		awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "val_auc") c = i }
		NR > 1 && $c >= 0.6 { print $1; exit }' "$d/sync/seed-$s/eval.csv"
	done | awk '{ s += $1 } END { if (NR == 2) printf "%.1f", s / 2 }')
	col=$(sed -n 's/^| mode | n |.*/&/p' "$d/report.md" | head -1 |
		tr '|' '\n' | grep -n "updates_to_auc_0.6 *$" | cut -d: -f1)
	got=$(grep "^| sync | 2 | ok 2 |" "$d/report.md" | head -1 |
		cut -d'|' -f"$col" | awk '{print $1}')
	[ -n "$want" ] && [ "$got" = "$want" ] && has "$d/report.md" \
		"examples_to_auc_0.6" && ok $n ||
		no $n "updates_to_auc_0.6: '$got', eval.csv says '$want'" \
			"$d/report.md"
}

test_compare_aggregates() {
	n=test_compare_aggregates
	craft
	compare_only "$C" >"$T/c.log" 2>&1 ||
		{ no $n "compare --report-only failed" "$T/c.log"; return; }
	R=$C/report.md
	for want in \
		"| sync | 3 | ok 2, collapsed 1 | 1/3 | 0.8100 ± 0.0141 | 0.8200 ± 0.0200 | 0.8600 ± 0.0100 | 0.8200 ± 0.0141 (1 null) | 0.6622 ± 0.0601 | 25.0 ± 7.1 (2/3 reached) | 880 ± 113 (2/3 reached) | 2.250 ± 0.354 (2/3 reached) | 1100.0 ± 100.0 | 12.00 ± 2.00 | 5.00 ± 0.00 | 0.500 ± 0.000 | 0.000 ± 0.000 | 0.0 ± 0.0 | 0.2000 ± 0.1000 | 0.0 ± 0.0 | 0.0 ± 0.0 |" \
		"| async | 3 | ok 2, diverged 1 | 1/3 | 0.7200 ± 0.0283 | 0.5133 ± 0.3585 (1 at chance) | n/a (3 null) | n/a (3 null) | 0.4767 ± 0.2483 | 40.0 ± — (1/3 reached) | 960 ± — (1/3 reached) | 3.500 ± — (1/3 reached) | n/a (3 null) |" \
		"| 4.0 ± 1.0 |" \
		"| sync | [0.8000, 0.8400] | [0.8500, 0.8700] | [0.8100, 0.8300] | [0.6000, 0.7200] | [20.0, 30.0] | [800, 960] | [2.000, 2.500] | [1000.0, 1200.0] |" \
		"| async | [0.1000, 0.7400] |" \
		"| async | 2 | diverged | 0.1000 |" \
		"| sync | 3 | collapsed | 0.8400 | 0.8700 | 0.8300 | 0.6000 | never | never | never |" \
		"WARNING: the jobs disagree on openblas_core" \
		"| cpu_model | Test CPU @ 2GHz |"; do
		has "$R" "$want" || { no $n "report.md lacks: $want" "$R"; return; }
	done
	has "$T/c.log" "| sync | 3 | ok 2, collapsed 1 | 1/3 | 0.8100 ± 0.0141 | 0.8200 ± 0.0200 |" ||
		{ no $n "table not printed to stdout" "$T/c.log"; return; }
	has "$R" "Selection was on the TEST set" &&
		{ no $n "claims test-set selection with val_acc" "$R"; return; }
	ok $n
}

test_compare_paired() {
	# Paired differences: on the crafted jobs async - sync's
	# final_test_acc is -0.10, 0.10 - 0.82 (async's seed 2 diverged and
	# counts at chance) and -0.10: mean -0.3067, sd 0.3580, half-width
	# 4.3027 x 0.3580 / sqrt(3) = 0.8892; 2 jobs failed (sync 3
	# collapsed, async 2 diverged). On three all-ok
	# seeds whose best_val_acc is sync 0.85 0.86 0.87 and async 0.80
	# 0.82 0.83, against --baseline async sync - async is 0.05 0.04
	# 0.04: mean 0.0433, sd 0.00577, half-width 4.3027 x 0.00577 /
	# sqrt(3) = 0.0143, so [0.0290, 0.0577]: sync better on all 3;
	# samples/s 1000 1100 1200 against 1010 1090 1210: -10 +10 -10,
	# mean -3.3, sd 11.55, [-32.0, 25.4]: no difference detected.
	n=test_compare_paired
	[ -f "$C/report.md" ] || { no $n "no crafted report"; return; }
	R=$C/report.md
	for want in "## Paired differences against sync, seed by seed" \
		"| final_test_acc | 3 | -0.3067 | [-1.1959, 0.5826] | 0 : 3 | not comparable (2 jobs failed) |" \
		"| samples_per_s | 0 | n/a | n/a | 0 : 0 | not comparable (2 jobs failed) |"; do
		has "$R" "$want" || { no $n "report.md lacks: $want" "$R"; return; }
	done
	keep=$C
	C=$T/paired
	for r in 1 2 3; do
		job sync $r Haswell outcome=ok best_val_acc=0.8$((4 + r)) \
			samples_per_s=$((900 + 100 * r))
	done
	job async 1 Haswell outcome=ok best_val_acc=0.80 samples_per_s=1010
	job async 2 Haswell outcome=ok best_val_acc=0.82 samples_per_s=1090
	job async 3 Haswell outcome=ok best_val_acc=0.83 samples_per_s=1210
	for m in sync async; do
		for r in 1 2 3; do
			evals $m $r 10:1.0:0.5
		done
	done
	C=$keep
	compare_only "$T/paired" --baseline async >"$T/p.log" 2>&1 ||
		{ no $n "compare --report-only failed" "$T/p.log"; return; }
	R=$T/paired/report.md
	for want in "## Paired differences against async, seed by seed" \
		"### sync" \
		"| best_val_acc | 3 | 0.0433 | [0.0290, 0.0577] | 3 : 0 | sync better |" \
		"| samples_per_s | 3 | -3.3 | [-32.0, 25.4] | 1 : 2 | no difference detected |"; do
		has "$R" "$want" || { no $n "report.md lacks: $want" "$R"; return; }
	done
	compare_only "$T/paired" --baseline ssp >"$T/p2.log" 2>&1
	rc=$?
	[ "$rc" = 2 ] && has "$T/p2.log" "--baseline ssp: not one of --modes sync,async" ||
		{ no $n "--baseline ssp: exit $rc" "$T/p2.log"; return; }
	ok $n
}

test_compare_test_selection() {
	# --validation 0 jobs (eval.csv test_acc): best_val_acc is the best
	# test accuracy, and the report says so.
	n=test_compare_test_selection
	cp -r "$C" "$T/tsel" && rm -f "$T/tsel/report.md"
	for f in "$T"/tsel/*/seed-*/eval.csv; do
		sed -i '1s/val_/test_/g' "$f"
	done
	compare_only "$T/tsel" >"$T/tsel.log" 2>&1 ||
		{ no $n "compare --report-only failed" "$T/tsel.log"; return; }
	# async best test acc: 0.78, 0.4, 0.6: mean 0.5933; deviations
	# 0.1867, -0.1933, 0.0067: sd sqrt(0.07227 / 2) = 0.1901
	if has "$T/tsel/report.md" "Selection was on the TEST set" &&
		has "$T/tsel/report.md" "| async | 3 | ok 2, diverged 1 | 1/3 | 0.7200 ± 0.0283 | 0.5133 ± 0.3585 (1 at chance) | 0.5933 ± 0.1901 | 0.5933 ± 0.1901 | 0.4767 ± 0.2483 |"; then
		ok $n
	else
		no $n "no test-set note or wrong best cells" "$T/tsel/report.md"
	fi
}

test_compare_damaged() {
	# A damaged job stops the comparison, naming mode, seed and folder,
	# unless --allow-failures (then it is counted).
	n=test_compare_damaged
	cp -r "$C" "$T/dmg"
	sed -i 's/"outcome": "ok"/"outcome": "damaged"/; s/"worker_restarts": null/"worker_restarts": 2/' \
		"$T/dmg/async/seed-3/summary.json"
	compare_only "$T/dmg" >"$T/dmg.log" 2>&1
	rc=$?
	[ $rc -eq 1 ] || { no $n "exit $rc, not 1" "$T/dmg.log"; return; }
	has "$T/dmg.log" "DAMAGED" && has "$T/dmg.log" "mode async, seed 3" &&
		has "$T/dmg.log" "$T/dmg/async/seed-3" &&
		has "$T/dmg.log" "worker_restarts 2" ||
		{ no $n "message does not say which job and why" "$T/dmg.log"
		return; }
	compare_only "$T/dmg" --allow-failures >"$T/dmg2.log" 2>&1 ||
		{ no $n "--allow-failures did not go on" "$T/dmg2.log"; return; }
	has "$T/dmg/report.md" "| async | 3 | ok 1, diverged 1, damaged 1 |" ||
		{ no $n "damaged not counted" "$T/dmg/report.md"; return; }
	ok $n
}

test_compare_plots() {
	n=test_compare_plots
	for g in loss-examples loss-updates loss-wall accuracy-examples \
		accuracy-updates accuracy-wall loss accuracy grad-norm \
		step-time staleness; do
		png "$C/$g.png" || { no $n "$g.png is not a PNG"; return; }
		grep -q '<svg' "$C/$g.svg" 2>/dev/null ||
			{ no $n "$g.svg is not SVG"; return; }
		[ "$(head -c 5 "$C/$g.pdf" 2>/dev/null)" = "%PDF-" ] ||
			{ no $n "$g.pdf is not a PDF"; return; }
		has "$C/plots/captions.md" "**$g**:" ||
			{ no $n "no caption of $g"; return; }
	done
	grep -q "'/" "$C/plots/plot.gp" &&
		{ no $n "plot.gp holds an absolute path"; return; }
	# Seeds aligned by x: each point is read at one x from every seed.
	has "$C/plots/async-eval-examples.dat" "points of the range every seed covers" ||
		{ no $n "async-eval-examples.dat does not align by x"; return; }
	# The screen style titles its figures, paper leaves them to captions.
	grep -q "^set title 'staleness" "$C/plots/plot.gp" ||
		{ no $n "screen figures have no titles"; return; }
	compare_only "$C" --plot-style paper >"$T/paper.log" 2>&1 &&
		! grep -q "^set title" "$C/plots/plot.gp" &&
		grep -q "pdfcairo size 3.40in,2.60in" "$C/plots/plot.gp" ||
		{ no $n "--plot-style paper" "$T/paper.log"; return; }
	mv "$C" "$T/moved" && rm -f "$T"/moved/*.png "$T"/moved/*.svg
	(cd "$T/moved" && gnuplot plots/plot.gp) >"$T/moved.log" 2>&1 &&
		png "$T/moved/loss.png" && grep -q '<svg' "$T/moved/staleness.svg" ||
		{ no $n "re-plotting a moved copy failed" "$T/moved.log"; return; }
	ok $n
}

# ---------------------------------------------------------------------
# Real small jobs (60 steps each).

test_compare_two_seeds() {
	n=test_compare_two_seeds
	# shellcheck disable=SC2086
	$P compare --modes sync,async --seeds 2 $D --workers 1 --out "$T/a" \
		>"$T/a.log" 2>&1 || { no $n "compare failed" "$T/a.log"; return; }
	for m in sync async; do
		has "$T/a/report.md" "| $m | 2 |" ||
			{ no $n "no row with n = 2 for $m" "$T/a/report.md"
			return; }
		[ -s "$T/a/$m/seed-2/summary.json" ] ||
			{ no $n "no $m/seed-2/summary.json"; return; }
		# A sync job alone may push by layer (--layer-push auto);
		# in a comparison of modes no job does.
		grep -q '^    "layer-push": "off",$' "$T/a/$m/seed-2/summary.json" ||
			{ no $n "$m/seed-2: layer-push is not off"; return; }
	done
	has "$T/a.log" "run 4 of 4: mode async, seed 2" ||
		{ no $n "not run seed-major" "$T/a.log"; return; }
	png "$T/a/accuracy.png" || { no $n "accuracy.png is not a PNG"; return; }
	ok $n
}

test_compare_sgd_small() {
	# The small-batch control beside sync (2 workers, batch 32, lr 0.2,
	# 60 steps): one worker at batch 16 and lr 0.1 for 120 steps, the
	# same 1,920 examples, and a table of its own in the paired
	# differences.
	n=test_compare_sgd_small
	$P compare --modes sync,sgd-small --seeds 1 $D --out "$T/small" \
		>"$T/small.log" 2>&1 ||
		{ no $n "compare failed" "$T/small.log"; return; }
	s=$T/small/sgd-small/seed-1/summary.json
	for kv in workers=1 batch=16 per_worker_batch=16 lr=0.1 steps=120 \
		samples=1920; do
		[ "$(json "${kv%%=*}" "$s")" = "${kv#*=}" ] ||
			{ no $n "$kv: got '$(json "${kv%%=*}" "$s")'" "$s"; return; }
	done
	[ "$(json samples "$T/small/sync/seed-1/summary.json")" = 1920 ] ||
		{ no $n "sync's samples differ" "$T/small.log"; return; }
	has "$T/small/report.md" "### sgd-small" ||
		{ no $n "no paired table for sgd-small" "$T/small/report.md"; return; }
	ok $n
}

test_compare_lr_grid() {
	# --lr-grid: each mode at 0.1 and 0.2 on tuning seed 1001, into
	# DIR/tune; each then compared at its picked rate on seeds 1 and 2.
	# Seeds shared with --tune-seeds, and a mode with its own :lr=, are
	# refused.
	n=test_compare_lr_grid
	$P compare --modes sync,async:matched-lr --lr-grid 0.2,0.1 \
		--tune-seeds 1 --seeds 2 $D --out "$T/grid" >"$T/grid.log" 2>&1 ||
		{ no $n "compare failed" "$T/grid.log"; return; }
	R=$T/grid/report.md
	for d in sync-lr-0.1 sync-lr-0.2 async-matched-lr-lr-0.1 \
		async-matched-lr-lr-0.2; do
		[ -f "$T/grid/tune/$d/seed-1001/summary.json" ] ||
			{ no $n "no tuning job $d/seed-1001" "$T/grid.log"; return; }
	done
	for m in sync async-matched-lr; do
		row=$(grep "^| $m | " "$R" | head -1)
		lr=$(echo "$row" | sed 's/.* \([0-9.]*\) |$/\1/')
		case $lr in 0.1 | 0.2) ;; *)
			no $n "$m: no picked rate in '$row'" "$R"; return ;; esac
		[ -f "$T/grid/$m-lr-$lr/seed-2/summary.json" ] ||
			{ no $n "$m not compared at its rate $lr" "$T/grid.log"; return; }
		# the pick is the best mean best_val_acc of the grid
		best=$(for x in 0.1 0.2; do
			echo "$(json best_val_acc "$T/grid/tune/$m-lr-$x/seed-1001/summary.json") $x"
		done | sort -g | tail -1 | cut -d' ' -f2)
		[ "$best" = "$lr" ] ||
			{ no $n "$m: picked $lr, best was $best" "$R"; return; }
	done
	has "$R" "## Learning rates, picked on validation" &&
		has "$R" "| mode | lr 0.1 | lr 0.2 | picked |" ||
		{ no $n "no grid table" "$R"; return; }
	png "$T/grid/lr-grid.png" && [ -s "$T/grid/lr-grid.svg" ] &&
		grep -q "^# sync$" "$T/grid/plots/lr-grid.dat" ||
		{ no $n "no lr-grid figure" "$T/grid.log"; return; }
	$P compare --modes sync --lr-grid 0.1,0.2 --tune-seeds 1,2 --seeds 2 \
		$D --out "$T/grid2" >"$T/grid2.log" 2>&1
	rc=$?
	[ "$rc" = 2 ] && has "$T/grid2.log" "seed 1 is in both --tune-seeds and --seeds" ||
		{ no $n "shared seed: exit $rc" "$T/grid2.log"; return; }
	$P compare --modes sync:lr=0.1 --lr-grid 0.1,0.2 $D --out "$T/grid3" \
		>"$T/grid3.log" 2>&1
	rc=$?
	[ "$rc" = 2 ] && has "$T/grid3.log" "mode 'sync:lr=0.1' has one of its own" ||
		{ no $n "own lr: exit $rc" "$T/grid3.log"; return; }
	ok $n
}

test_compare_lr_grid_auto() {
	# --lr-grid auto from --lr 0.05: sync's best rate lies above 0.1, so
	# its range grows by factors of 2, a round of jobs at a time, until
	# the pick is inside it. The pick is the best tuning job's rate (a
	# job not ok counting 0, the lower rate on a tie); --report-only
	# reads the same rounds and picks the same rate. From --lr 16, where
	# every rate diverges, it widens downward.
	n=test_compare_lr_grid_auto
	$P compare --modes sync --lr-grid auto $D --lr 0.05 --tune-seeds 1 \
		--seeds 1 --out "$T/ga" >"$T/ga.log" 2>&1 ||
		{ no $n "compare failed" "$T/ga.log"; return; }
	R=$T/ga/report.md
	rounds=$(grep -c "^pstrain compare: --lr-grid auto: round" "$T/ga.log")
	rates=$(ls -d "$T"/ga/tune/sync-lr-*/seed-1001 |
		sed 's|.*/sync-lr-\([^/]*\)/seed-1001|\1|' | sort -g)
	[ "$rounds" -ge 2 ] && [ "$(echo "$rates" | wc -l)" = $((rounds + 2)) ] ||
		{ no $n "$rounds rounds, rates $rates" "$T/ga.log"; return; }
	best=$(for x in $rates; do
		s=$T/ga/tune/sync-lr-$x/seed-1001/summary.json
		a=0
		[ "$(jstr outcome "$s")" = ok ] && a=$(json best_val_acc "$s")
		echo "$a $x"
	done | sort -k1,1g -k2,2gr | tail -1 | cut -d' ' -f2)
	lo=$(echo "$rates" | head -1) hi=$(echo "$rates" | tail -1)
	row=$(grep "^| sync | " "$R" | head -1)
	if [ "$best" = "$lo" ] || [ "$best" = "$hi" ] ||
		[ "${row##*| }" != "$best |" ] ||
		! [ -f "$T/ga/sync-lr-$best/seed-1/summary.json" ] ||
		! has "$R" "--lr-grid auto: each mode ran at --lr / 2"; then
		no $n "picked '${row##*| }', best $best of $lo..$hi" "$R"
		return
	fi
	sed -n '/^## Learning rates/,/^## Results/p' "$R" >"$T/ga.grid"
	$P compare --modes sync --lr-grid auto $D --lr 0.05 --tune-seeds 1 \
		--seeds 1 --out "$T/ga" --report-only >"$T/ga2.log" 2>&1 &&
		sed -n '/^## Learning rates/,/^## Results/p' "$R" |
		cmp -s - "$T/ga.grid" ||
		{ no $n "--report-only picked otherwise" "$T/ga2.log"; return; }
	# From --lr 16 every rate of the first round diverges: the range
	# widens downward until a rate learns, and that rate is picked.
	$P compare --modes sync --lr-grid auto $D --lr 16 --tune-seeds 1 \
		--seeds 1 --out "$T/gb" >"$T/gb.log" 2>&1 ||
		{ no $n "compare from 16 failed" "$T/gb.log"; return; }
	row=$(grep "^| sync | " "$T/gb/report.md" | head -1)
	lr=${row##*| } lr=${lr% |}
	if ! grep -q "round 3: sync:lr=2 " "$T/gb.log" ||
		! awk "BEGIN { exit !($lr < 4) }" ||
		[ "$(jstr outcome "$T/gb/tune/sync-lr-$lr/seed-1001/summary.json")" != ok ]; then
		no $n "from 16: picked '$lr'" "$T/gb.log"
		return
	fi
	ok $n
}

test_compare_seeds_auto() {
	# --seeds auto:5 on sync at lr 0.2 and 0.1: seeds 1..3, then one
	# more while the best_val_acc interval holds 0, up to 5. Whatever
	# N it stops at, the folders, the report and the reading agree.
	n=test_compare_seeds_auto
	$P compare --modes sync,sync:lr=0.1 --seeds auto:5 $D \
		--out "$T/auto" >"$T/auto.log" 2>&1 ||
		{ no $n "compare failed" "$T/auto.log"; return; }
	N=$(ls -d "$T"/auto/sync/seed-* | wc -l)
	added=$(grep -c "^pstrain compare: --seeds auto: an interval" "$T/auto.log")
	R=$T/auto/report.md
	if [ "$N" -lt 3 ] || [ "$N" -gt 5 ] || [ "$added" != $((N - 3)) ] ||
		[ "$(ls -d "$T"/auto/sync-lr-0.1/seed-* | wc -l)" != "$N" ] ||
		! grep -q "it stopped at $N, " "$R"; then
		no $n "$N seeds, $added added" "$T/auto.log"
		return
	fi
	if [ "$N" -lt 5 ] && grep -q "^| best_val_acc | $N | .* | no difference detected |" "$R"; then
		no $n "stopped at $N with the interval holding 0" "$R"
		return
	fi
	$P compare --modes sync --seeds auto:2 $D --out "$T/auto2" \
		>"$T/auto2.log" 2>&1
	rc=$?
	[ "$rc" = 2 ] && has "$T/auto2.log" "--seeds: bad value 'auto:2'" ||
		{ no $n "auto:2: exit $rc" "$T/auto2.log"; return; }
	# --report-only reads the seeds it ran the same way, and stops at
	# the first seed it did not run.
	grep "^Seeds: " "$R" >"$T/auto.seeds"
	$P compare --modes sync,sync:lr=0.1 --seeds auto:5 --report-only $D \
		--out "$T/auto" >"$T/auto3.log" 2>&1 &&
		grep "^Seeds: " "$R" | cmp -s - "$T/auto.seeds" ||
		{ no $n "--report-only read other seeds" "$T/auto3.log"; return; }
	if [ "$N" -gt 3 ]; then
		rm -r "$T/auto/sync/seed-$N" "$T/auto/sync-lr-0.1/seed-$N"
		$P compare --modes sync,sync:lr=0.1 --seeds auto:5 --report-only \
			$D --out "$T/auto" >"$T/auto4.log" 2>&1 &&
			has "$T/auto4.log" "seed $N is not in $T/auto: the report stops at $((N - 1)) seeds" &&
			has "$R" "it stopped at $((N - 1)), the next seed not run" ||
			{ no $n "stopped --report-only" "$T/auto4.log"; return; }
	fi
	ok $n
}

test_compare_force() {
	n=test_compare_force
	# shellcheck disable=SC2086
	$P compare --modes sync,async --seeds 2 $D --workers 1 --out "$T/a" \
		>"$T/f.log" 2>&1
	rc=$?
	[ $rc -eq 2 ] || { no $n "exit $rc over a comparison, not 2" "$T/f.log"
		return; }
	has "$T/f.log" "$T/a" && has "$T/f.log" "--force" ||
		{ no $n "message does not name the folder and --force" "$T/f.log"
		return; }
	# shellcheck disable=SC2086
	$P compare --modes sync --seeds 2 $D --out "$T/a" --force \
		>"$T/f.log" 2>&1 || { no $n "--force failed" "$T/f.log"; return; }
	ok $n
}

# accs FILE SEED: final_test_acc and best_val_acc of sync's job SEED
accs() {
	awk -F'|' -v s=" $2 " '$2 == " sync " && $3 == s &&
		$4 ~ /^ [a-z]+ $/ { print $5, $6 }' "$1"
}

test_compare_deterministic() {
	n=test_compare_deterministic
	# shellcheck disable=SC2086
	$P compare --modes sync --seeds 2 $D --out "$T/b" >"$T/b.log" 2>&1 ||
		{ no $n "second compare failed" "$T/b.log"; return; }
	x=$(accs "$T/a/report.md" 2)
	y=$(accs "$T/b/report.md" 2)
	if [ -n "$x" ] && [ "$x" = "$y" ]; then
		ok $n
	else
		no $n "sync seed 2 accuracy cells differ: '$x' vs '$y'"
	fi
}

test_compare_optimizer_modifier() {
	# Without --lr, :optimizer=adam runs that job at Adam's usual lr
	# and the others at SGD's; :lr= sets a job's lr outright.
	n=test_compare_optimizer_modifier
	# shellcheck disable=SC2046
	$P compare --modes sync,sync:optimizer=adam,sync:optimizer=adam:lr=0.01 \
		$(echo "$D" | sed 's/--lr 0.2//') --out "$T/o" >"$T/o.log" 2>&1 ||
		{ no $n "compare failed" "$T/o.log"; return; }
	a=$(json lr "$T/o/sync-optimizer-adam/seed-1/summary.json")
	b=$(json lr "$T/o/sync-optimizer-adam-lr-0.01/seed-1/summary.json")
	s=$(json lr "$T/o/sync/seed-1/summary.json")
	if [ "$a" = 0.001 ] && [ "$b" = 0.01 ] && [ "$s" = 0.1 ] &&
		[ "$(jstr optimizer "$T/o/sync-optimizer-adam/seed-1/summary.json")" = adam ]; then
		ok $n
	else
		no $n "lr '$a', '$b' and '$s'" "$T/o.log"
	fi
}

# cfg KEY FILE: the value of KEY in summary.json's "config" (four spaces
# in), quotes left on strings.
cfg() { sed -n "s/^    \"$1\": \(.*\),*$/\1/p" "$2" | sed 's/,$//'; }

test_compare_modifier_flags() {
	# A modifier is any flag of pstrain run, set through the flag table
	# for that mode's jobs alone: each job's summary.json records it,
	# and the other jobs keep the command line's value.
	n=test_compare_modifier_flags
	# shellcheck disable=SC2086
	$P compare --modes sync,sync:weight-decay=0.5:prefetch,async:max-staleness=3 \
		$D --out "$T/mf" >"$T/mf.log" 2>&1 ||
		{ no $n "compare failed" "$T/mf.log"; return; }
	s=$T/mf/sync/seed-1/summary.json
	w=$T/mf/sync-weight-decay-0.5-prefetch/seed-1/summary.json
	a=$T/mf/async-max-staleness-3/seed-1/summary.json
	got="$(cfg weight-decay "$s") $(cfg prefetch "$s") $(cfg max-staleness "$s")"
	got="$got | $(cfg weight-decay "$w") $(cfg prefetch "$w")"
	got="$got | $(cfg weight-decay "$a") $(cfg max-staleness "$a")"
	want="0.0 false -1 | 0.5 true | 0.0 3"
	[ "$got" = "$want" ] ||
		{ no $n "config: '$got', want '$want'" "$T/mf.log"; return; }
	grep -q '"command_line": ".* --weight-decay 0.5 --prefetch' "$w" ||
		{ no $n "the job's command line lacks its modifiers" "$w"
		return; }
	ok $n
}

test_compare_bad_flags() {
	n=test_compare_bad_flags
	for m in ssp:x bogus sync:matched-lr; do
		if $P compare --modes "sync,$m" $D --out "$T/bad" \
			>"$T/bad.log" 2>&1; then
			no $n "--modes sync,$m succeeded"
			return
		fi
		has "$T/bad.log" "'$m'" ||
			{ no $n "message does not name '$m'" "$T/bad.log"
			return; }
	done
	# A modifier the flag table refuses is named with what is wrong in
	# it, before any job runs (exit status 2).
	for mw in "sync:no-such-flag=1|--no-such-flag" \
		"sync:weight-decay=x|--weight-decay: 'x'" \
		"async:backup=1|--backup-workers" "sync:batch|--batch needs" \
		"sync:seed=3|--seed"; do
		m=${mw%%|*}
		# shellcheck disable=SC2086
		$P compare --modes "$m" $D --out "$T/bad" >"$T/bad.log" 2>&1
		rc=$?
		[ $rc -eq 2 ] && has "$T/bad.log" "'$m'" &&
			has "$T/bad.log" "${mw#*|}" ||
			{ no $n "--modes $m: exit $rc" "$T/bad.log"; return; }
	done
	# compare's own --mode or --staleness would be ignored: refused.
	for f in "--mode async" "--staleness 2"; do
		# shellcheck disable=SC2086
		$P compare --modes sync $f $D --out "$T/bad" >"$T/bad.log" 2>&1
		rc=$?
		[ $rc -eq 2 ] && has "$T/bad.log" "${f% *}: each job's mode" ||
			{ no $n "compare $f: exit $rc" "$T/bad.log"; return; }
	done
	for s in 0 x 1,1 2,,3; do
		# shellcheck disable=SC2086
		$P compare --modes sync --seeds "$s" $D --out "$T/bad" \
			>"$T/bad.log" 2>&1
		rc=$?
		[ $rc -eq 2 ] && has "$T/bad.log" "--seeds" ||
			{ no $n "--seeds $s: exit $rc" "$T/bad.log"; return; }
	done
	[ -d "$T/bad/sync" ] && { no $n "ran a job before rejecting"; return; }
	ok $n
}

test_compare_damaged_job() {
	# A job that loses a worker is damaged: compare stops, names it and
	# exits 1; with --allow-failures it goes on and counts it.
	n=test_compare_damaged_job
	for allow in "" --allow-failures; do
		d="$T/dmgjob$allow"
		# shellcheck disable=SC2086
		$P compare --modes sync,async --seeds 1 --servers 1 --workers 3 \
			--data synthetic:1200 --model mlp:32 --batch 48 --lr 0.2 \
			--steps 300 --delay uniform:3:3 --target-acc 0.3 $allow \
			--out "$d" >"$d.log" 2>&1 &
		pid=$!
		i=0
		until [ -f "$d/sync/seed-1/worker-2.csv" ] &&
			[ "$(wc -l <"$d/sync/seed-1/worker-2.csv")" -ge 3 ]; do
			i=$((i + 1))
			[ $i -gt 2400 ] && break
			sleep 0.05
		done
		pkill -9 -f -- "^pstrain worker .* --out $d/sync/seed-1 .*--rank 2( |$)"
		wait $pid
		rc=$?
		if [ -z "$allow" ]; then
			[ "$rc" = 1 ] && grep -q "damaged" "$d.log" &&
				[ ! -e "$d/async/seed-1/summary.json" ] ||
				{ no $n "without --allow-failures: exit $rc" "$d.log"; return; }
		else
			[ "$rc" = 0 ] && grep -q "damaged 1" "$d/report.md" ||
				{ no $n "with --allow-failures: exit $rc" "$d.log"; return; }
		fi
	done
	ok $n
}

# jobs_table FILE: mode, seed, outcome, the accuracy cells and
# updates_to_A of every job in report.md's "Every job" table (times left
# out: they are the machine's).
jobs_table() {
	awk -F'|' '$4 ~ /^ [a-z]+ $/ && $3 ~ /^ [0-9]+ $/ {
		print $2, $3, $4, $5, $6, $7, $8, $9 }' "$1"
}

test_compare_resume() {
	# A comparison stopped by Ctrl-C mid-job: a rerun without --resume
	# is refused, --resume with another --lr names it and runs
	# nothing, --resume alone (flags from DIR/compare.conf) keeps the
	# jobs done, runs the rest and reports what an uninterrupted
	# comparison reports; --add-seeds 1 then runs seed 3 only.
	n=test_compare_resume
	r="$T/resume"
	# The delay keeps job 2 running until Ctrl-C; it changes no value,
	# so the uninterrupted comparison goes without it.
	R0="--modes sync,allreduce --seeds 2"
	R="$R0 --delay uniform:20:20"
	# shellcheck disable=SC2086
	$P compare $R $D --out "$r" >"$r.log" 2>&1 &
	pid=$!
	wait_rows "$r/allreduce/seed-1/worker-0.csv" 3 ||
		{ no $n "the second job never wrote rows" "$r.log"; kill $pid
		return; }
	kill -INT $pid
	wait $pid
	rc=$?
	[ $rc = 130 ] && [ ! -e "$r/report.md" ] &&
		[ ! -e "$r/allreduce/seed-1/summary.json" ] ||
		{ no $n "Ctrl-C: exit $rc" "$r.log"; return; }
	grep -q "^seeds = 2$" "$r/compare.conf" ||
		{ no $n "compare.conf has no seeds = 2" "$r/compare.conf"; return; }
	sum1=$(cksum <"$r/sync/seed-1/summary.json")
	$P compare --out "$r" >"$r.2.log" 2>&1
	rc=$?
	[ $rc = 2 ] && has "$r.2.log" "--resume" ||
		{ no $n "rerun without --resume: exit $rc" "$r.2.log"; return; }
	$P compare --resume --lr 0.1 --out "$r" >"$r.3.log" 2>&1
	rc=$?
	[ $rc = 2 ] && has "$r.3.log" "$r/sync/seed-1" &&
		has "$r.3.log" "--lr was 0.2 there, 0.1 now" &&
		[ ! -e "$r/sync/seed-2" ] ||
		{ no $n "--resume with another --lr: exit $rc" "$r.3.log"; return; }
	$P compare --resume --out "$r" >"$r.4.log" 2>&1 ||
		{ no $n "--resume failed" "$r.4.log"; return; }
	has "$r.4.log" "1 job of $r done already, kept; 3 to run" &&
		[ "$sum1" = "$(cksum <"$r/sync/seed-1/summary.json")" ] ||
		{ no $n "--resume did not keep sync seed 1 alone" "$r.4.log"
		return; }
	# shellcheck disable=SC2086
	$P compare $R0 $D --out "$T/resume0" >"$T/resume0.log" 2>&1 ||
		{ no $n "the uninterrupted comparison failed" "$T/resume0.log"
		return; }
	a=$(jobs_table "$r/report.md")
	b=$(jobs_table "$T/resume0/report.md")
	[ "$(echo "$a" | grep -c .)" = 4 ] && [ "$a" = "$b" ] ||
		{ no $n "resumed report's jobs differ: '$a' vs '$b'"; return; }
	$P compare --resume --add-seeds 1 --out "$r" >"$r.5.log" 2>&1 ||
		{ no $n "--add-seeds 1 failed" "$r.5.log"; return; }
	has "$r.5.log" "4 jobs of $r done already, kept; 2 to run" &&
		grep -q "^seeds = 1,2,3$" "$r/compare.conf" &&
		[ "$(jobs_table "$r/report.md" | grep -c .)" = 6 ] ||
		{ no $n "--add-seeds 1 did not run seed 3 alone" "$r.5.log"
		return; }
	ok $n
}

test_compare_target_auc
test_compare_aggregates
test_compare_paired
test_compare_test_selection
test_compare_damaged
test_compare_damaged_job
test_compare_plots
test_compare_two_seeds
test_compare_sgd_small
test_compare_lr_grid
test_compare_lr_grid_auto
test_compare_seeds_auto
test_compare_force
test_compare_resume
test_compare_deterministic
test_compare_optimizer_modifier
test_compare_modifier_flags
test_compare_bad_flags
