#!/bin/sh
# tests/compare_test.sh - `pstrain compare`: a sync,async comparison
# writes a report row per mode and two PNG plots with one curve per mode,
# is deterministic for sync, and rejects bad mode tokens. Prints
# "ok NAME" / "FAIL NAME: why" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-compare-XXXXXX")
trap 'rm -rf "$T"' EXIT
D="--data synthetic:1200 --model mlp:32 --batch 32 --steps 60 --seed 7 \
--lr 0.2 --servers 1 --workers 2 --target-acc 0.3"

. tests/lib.sh

# row LABEL FILE: the report.md table row of mode LABEL
row() { grep "^| $1 |" "$2"; }

# accs LABEL FILE: the final_test_acc and best_test_acc cells of LABEL
accs() { awk -F'|' -v m=" $1 " '$2 == m { print $3, $4 }' "$2"; }

# png FILE: the first 8 bytes are the PNG signature
png() {
	[ "$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = \
		89504e470d0a1a0a ]
}

test_compare_optimizer_modifier() {
	# Without --lr, :optimizer=adam runs that job at Adam's usual lr
	# and the others at SGD's; :lr= sets a job's lr outright.
	n=test_compare_optimizer_modifier
	$P compare --modes sync,sync:optimizer=adam,sync:optimizer=adam:lr=0.01 \
		$(echo "$D" | sed 's/--lr 0.2//') --out "$T/o" >"$T/o.log" 2>&1 ||
		{ no $n "compare failed" "$T/o.log"; return; }
	a=$(json lr "$T/o/sync-optimizer-adam/summary.json")
	b=$(json lr "$T/o/sync-optimizer-adam-lr-0.01/summary.json")
	s=$(json lr "$T/o/sync/summary.json")
	if [ "$a" = 0.001 ] && [ "$b" = 0.01 ] && [ "$s" = 0.1 ] &&
		grep -q '"optimizer": "adam"' "$T/o/sync-optimizer-adam/summary.json"; then
		ok $n
	else
		no $n "lr '$a', '$b' and '$s'" "$T/o.log"
	fi
}

test_compare_report_rows() {
	n=test_compare_report_rows
	# shellcheck disable=SC2086
	$P compare --modes sync,async $D --out "$T/a" >"$T/a.log" 2>&1 ||
		{ no $n "compare failed" "$T/a.log"; return; }
	for m in sync async; do
		row $m "$T/a/report.md" >/dev/null ||
			{ no $n "no row for $m in report.md" "$T/a/report.md"
			return; }
	done
	grep -q "^| sync |" "$T/a.log" ||
		{ no $n "table not printed to stdout" "$T/a.log"; return; }
	ok $n
}

test_compare_plots() {
	n=test_compare_plots
	for f in loss accuracy; do
		png "$T/a/$f.png" || { no $n "$f.png is not a PNG"; return; }
	done
	for k in loss acc; do
		c=$(ls "$T/a/plots/$k"-*.dat 2>/dev/null | wc -l)
		[ "$c" -eq 2 ] ||
			{ no $n "$c $k data files, not one per mode"; return; }
		for m in sync async; do
			[ -s "$T/a/plots/$k-$m.dat" ] ||
				{ no $n "plots/$k-$m.dat missing or empty"
				return; }
		done
	done
	[ -f "$T/a/plots/plot.gp" ] || { no $n "plots/plot.gp missing"; return; }
	ok $n
}

test_compare_deterministic() {
	n=test_compare_deterministic
	# shellcheck disable=SC2086
	$P compare --modes sync,async $D --out "$T/b" >"$T/b.log" 2>&1 ||
		{ no $n "second compare failed" "$T/b.log"; return; }
	x=$(accs sync "$T/a/report.md")
	y=$(accs sync "$T/b/report.md")
	if [ -n "$x" ] && [ "$x" = "$y" ]; then
		ok $n
	else
		no $n "sync accuracy cells differ: '$x' vs '$y'"
	fi
}

test_compare_bad_mode() {
	n=test_compare_bad_mode
	for m in ssp:x bogus; do
		if $P compare --modes "sync,$m" $D --out "$T/bad" \
			>"$T/bad.log" 2>&1; then
			no $n "--modes sync,$m succeeded"
			return
		fi
		grep -q "'$m'" "$T/bad.log" ||
			{ no $n "message does not name '$m'" "$T/bad.log"
			return; }
	done
	[ -d "$T/bad/sync" ] && { no $n "ran a job before rejecting"; return; }
	ok $n
}

test_compare_report_rows
test_compare_optimizer_modifier
test_compare_plots
test_compare_deterministic
test_compare_bad_mode
