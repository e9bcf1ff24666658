#!/bin/sh
# tests/dash_test.sh - pstrain run --dashboard: a running job's /metrics,
# scraped twice over HTTP while it trains, is Prometheus's text format,
# moves forward, and agrees with the job's own files; bad addresses and
# compare --dashboard are refused by name. Prints "ok NAME" / "FAIL NAME"
# per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-dash-XXXXXX")
trap 'pkill -f -- "--out $T/" 2>/dev/null; rm -rf "$T"' EXIT
. tests/lib.sh

# A job slowed to about 5 ms a step (--delay), so that it runs for
# seconds: long enough to be scraped twice.
test_dash_metrics() {
	n=test_dash_metrics
	$P run --mode async --servers 1 --workers 2 --model mlp:16 \
		--data synthetic:2000 --batch 32 --steps 1500 \
		--delay uniform:5:5 --evals-per-epoch 4 --dashboard \
		--out "$T/job" >"$T/job.log" 2>&1 &
	pid=$!
	if ! $PY - "$T/job.log" "$T/job" >"$T/check.log" 2>&1 <<'EOF'; then
import csv, re, sys, time, urllib.request
log, out = sys.argv[1], sys.argv[2]
url = None
for _ in range(200):
    m = re.search(r"dashboard at (http://127\.0\.0\.1:\d+/) ", open(log).read())
    if m:
        url = m.group(1)
        break
    time.sleep(0.05)
assert url, "no dashboard address printed"
line = re.compile(r'^[a-z_]+(\{[a-z]+="[^"]*"\})? -?[0-9.e+-]+$')

def scrape():
    text = urllib.request.urlopen(url + "metrics", timeout=10).read().decode()
    vals = {}
    for l in text.splitlines():
        if l.startswith("# HELP ") or l.startswith("# TYPE "):
            continue
        assert line.match(l), "not the exposition format: %r" % l
        k, v = l.rsplit(" ", 1)
        vals[k] = float(v)
    return vals

def steps(v):
    return v.get('pstrain_worker_steps_total{worker="0"}', 0)

first = None
for _ in range(100):
    first = scrape()
    if steps(first) >= 20:
        break
    time.sleep(0.05)
time.sleep(1.0)
second = scrape()
assert steps(second) > steps(first) >= 20, (steps(first), steps(second))
for k in ("pstrain_worker_loss", "pstrain_worker_step_ms",
          "pstrain_worker_compute_seconds_total", "pstrain_workers_lost"):
    assert any(s.startswith(k) for s in second), "no " + k
assert second["pstrain_workers_lost"] == 0, second
page = urllib.request.urlopen(url, timeout=10).read().decode()
assert "/metrics" in page, page
# The pair scraped (step, loss) is a row of worker 0's file.
step = second['pstrain_worker_step{worker="0"}']
loss = second['pstrain_worker_loss{worker="0"}']
for _ in range(600):   # the job's end: its files complete
    if open(log).read().find("summary:") >= 0:
        break
    time.sleep(0.05)
rows = list(csv.DictReader(open(out + "/worker-0.csv")))
assert any(float(r["step"]) == step and abs(float(r["loss"]) - loss) < 1e-5
           for r in rows), (step, loss)
print("scraped", steps(first), "then", steps(second), "steps of", len(rows))
EOF
		no $n "metrics" "$T/check.log"
		kill $pid 2>/dev/null
		wait $pid
		return
	fi
	wait $pid
	r=$?
	if [ "$r" != 0 ]; then
		no $n "job exit $r" "$T/job.log"
	else
		ok $n
	fi
}

test_dash_refusals() {
	n=test_dash_refusals
	e1=$($P run --servers 1 --workers 1 --model mlp:8 \
		--data synthetic:300 --steps 5 --dashboard \
		--dashboard-listen nowhere --out "$T/r1" 2>&1)
	r1=$?
	e2=$($P compare --modes sync,async --model mlp:8 \
		--data synthetic:300 --steps 5 --dashboard --out "$T/r2" 2>&1)
	r2=$?
	e3=$($P run --servers 1 --workers 1 --model mlp:8 \
		--data synthetic:300 --steps 5 --out "$T/r3" 2>&1)
	if [ "$r1$r2" != 22 ] ||
		! echo "$e1" | grep -q "dashboard-listen nowhere: expected HOST:PORT" ||
		! echo "$e2" | grep -q "dashboard is not built for compare" ||
		echo "$e3" | grep -q "dashboard at"; then
		no $n "exits $r1 $r2: $e1 / $e2 / $e3"
	else
		ok $n
	fi
}

test_dash_metrics
test_dash_refusals
