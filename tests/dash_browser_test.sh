#!/bin/sh
# tests/dash_browser_test.sh - the dashboard page in headless Chromium
# (tests/dash_browser.py, through Debian's chromium, chromium-driver and
# python3-selenium, which scripts/deps.sh installs): the page of a running
# job loads without a console warning or error, shows every panel, its
# numbers are the job's files', and later in the job it holds more rows,
# draws a newer step and looks different; compare --dashboard shows every
# mode side by side as the jobs run; pstrain dashboard serves the finished
# comparison; a folder of 21 jobs shows each mode's mean ± sd, and the
# controls (mode picker, every run, log y, smoothing) do what they say.
# SHOT=FILE also keeps that last screenshot (docs/dashboard.png is one).
# Prints "ok NAME" / "FAIL NAME" per case, or "skip: why" without Chromium.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
# Debian's python3, where python3-selenium is.
BPY=/usr/bin/python3
for f in /usr/bin/chromium /usr/bin/chromedriver $BPY; do
	if [ ! -x "$f" ]; then
		echo "skip: no $f (scripts/deps.sh installs chromium and chromium-driver)"
		exit 0
	fi
done
if ! $BPY -c "import selenium" 2>/dev/null; then
	echo "skip: no python3-selenium (scripts/deps.sh installs it)"
	exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-dashb-XXXXXX")
trap 'pkill -f -- "--out $T/" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
. tests/lib.sh

# wait_url LOG: the dashboard address LOG prints (waited for up to 120 s:
# the machine may be busy).
wait_url() {
	i=0
	while [ "$i" -lt 2400 ]; do
		u=$(sed -n 's/.*dashboard.* at \(http:\/\/127\.0\.0\.1:[0-9]*\/\).*/\1/p' "$1" | head -n 1)
		[ -n "$u" ] && { echo "$u"; return 0; }
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# browser_up LOG BPID: waits until the checker BPID has started Chromium
# (LOG.browser exists; see tests/dash_browser.py) or has ended.
browser_up() {
	i=0
	while [ "$i" -lt 6000 ] && [ ! -f "$1.browser" ] && kill -0 "$2" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
	done
}

# A job slowed to about 4 ms a step, 10 s or more: long enough for the
# page to be looked at early and late. Chromium is up before the job
# starts.
test_dash_browser_run() {
	n=test_dash_browser_run
	$BPY tests/dash_browser.py run "@$T/job.log" "$T/job" "$T/ck" "$T" \
		>"$T/run.log" 2>&1 &
	bpid=$!
	browser_up "$T/job.log" $bpid
	dash_job 2500 4 400
	wait $bpid
	grep -E '^(ok|FAIL)' "$T/run.log" || no $n "no verdict" "$T/run.log"
	grep -q '^FAIL' "$T/run.log" && tail -n 15 "$T/run.log" | sed 's/^/    | /'
	wait $pid
	r=$?
	[ "$r" = 0 ] || no $n "job exit $r" "$T/job.log"
}

# Two modes, one after the other: the page is opened while the first
# runs and watched until the second does; then pstrain dashboard serves
# the finished folder.
test_dash_browser_compare() {
	$BPY tests/dash_browser.py compare-live "@$T/cmp.log" "$T" \
		>"$T/live.log" 2>&1 &
	bpid=$!
	browser_up "$T/cmp.log" $bpid
	$P compare --modes sync,async --workers 2 --model mlp:16 \
		--data synthetic:1200 --batch 32 --steps 1500 \
		--delay uniform:4:4 --dashboard --out "$T/cmp" \
		>"$T/cmp.log" 2>&1 &
	pid=$!
	wait $bpid
	grep -E '^(ok|FAIL)' "$T/live.log" ||
		no test_dash_browser_compare_live "no verdict" "$T/live.log"
	wait $pid
	r=$?
	if [ "$r" != 0 ]; then
		no test_dash_browser_compare_done "compare exit $r" "$T/cmp.log"
		return
	fi
	$P dashboard "$T/cmp" >"$T/dir.log" 2>&1 &
	dpid=$!
	if ! url=$(wait_url "$T/dir.log"); then
		no test_dash_browser_compare_done "no address" "$T/dir.log"
	else
		$BPY tests/dash_browser.py compare-done "$url" "$T/cmp" "$T" \
			${SHOT:-} >"$T/done.log" 2>&1
		grep -E '^(ok|FAIL)' "$T/done.log" ||
			no test_dash_browser_compare_done "no verdict" "$T/done.log"
	fi
	kill -TERM $dpid
	wait $dpid
}

# A folder of 21 jobs, 7 modes x 3 seeds, served by pstrain dashboard:
# the grouped view, the picker, every run, log y, unsmoothed lines.
test_dash_browser_many() {
	n=test_dash_browser_many
	$P compare --modes sync,async,ssp:1,ssp:2,sync:lr=0.1,async:matched-lr,allreduce \
		--seeds 3 --workers 2 --model mlp:8 --data synthetic:600 \
		--batch 32 --lr 0.2 --steps 20 --evals-per-epoch 2 \
		--out "$T/many" >"$T/many.log" 2>&1 ||
		{ no $n "compare failed" "$T/many.log"; return; }
	$P dashboard "$T/many" >"$T/many-dash.log" 2>&1 &
	dpid=$!
	if ! url=$(wait_url "$T/many-dash.log"); then
		no $n "no address" "$T/many-dash.log"
	else
		$BPY tests/dash_browser.py many "$url" "$T/many" \
			sync,async,ssp-1,ssp-2,sync-lr-0.1,async-matched-lr,allreduce 3 \
			>"$T/many-check.log" 2>&1
		grep -E '^(ok|FAIL)' "$T/many-check.log" ||
			no $n "no verdict" "$T/many-check.log"
	fi
	kill -TERM $dpid
	wait $dpid
}

test_dash_browser_run
test_dash_browser_compare
test_dash_browser_many
