#!/bin/sh
# tests/dash_test.sh - the dashboard's server (run --dashboard, pstrain
# dashboard): a running job's /metrics, scraped twice, is Prometheus's
# text format, moves forward and agrees with the job's files; /data.json
# hands out every row of worker-R.csv and eval.csv once, from the offsets
# it gave, and the checkpoints written; malformed and hostile requests get
# an error (never a crash) while the job trains on; pstrain dashboard
# serves a finished run and a comparison's folder until SIGTERM; bad
# addresses and folders are refused by name. Run against the ASan build
# too (tests/run.sh). The page itself is tested in Chromium by
# tests/dash_browser_test.sh. Prints "ok NAME" / "FAIL NAME" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-dash-XXXXXX")
trap 'pkill -f -- "--out $T/" 2>/dev/null; rm -rf "$T"' EXIT
. tests/lib.sh

# A job slowed to about 10 ms a step (--delay), so that it runs for
# seconds (15 or more): long enough to be scraped and read several
# times, also when other work keeps the cores busy. Its Python prints the
# lines of test_dash_metrics, test_dash_json and test_dash_hostile. Every
# wait there is for an event (a line in the log, a step count moving),
# with a generous deadline.
STEPS=1500
test_dash_live() {
	dash_job $STEPS 10 300
	$PY - "$T/job.log" "$T/job" "$T/ck" $STEPS >"$T/check.log" 2>&1 <<'EOF'
import csv, json, os, re, socket, sys, time, urllib.error, urllib.request
log, out, ck = sys.argv[1:4]
STEPS = int(sys.argv[4])
DEADLINE = 120.0  # seconds for any awaited event: the machine may be busy

def until(cond, what):
    # The first true value of cond(), polled until DEADLINE.
    end = time.time() + DEADLINE
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)

url = None
try:
    m = until(lambda: re.search(r"dashboard at (http://127\.0\.0\.1:(\d+)/) ",
                                open(log).read()), "the dashboard's address")
    url, port = m.group(1), int(m.group(2))
except AssertionError:
    pass
if not url:
    print("FAIL test_dash_metrics: no dashboard address printed")
    sys.exit(0)

def get(path):
    return urllib.request.urlopen(url + path, timeout=10).read().decode()

def case(name, fn):
    try:
        fn()
        print("ok " + name)
    except Exception as e:
        print("FAIL %s: %r" % (name, e))

def floats(row, cols):
    return [float(row[c]) if row[c] not in ("", "nan") else None for c in cols]

def close(a, b):
    return (a is None and b is None) or (a is not None and b is not None and
        abs(a - b) <= 1e-6 * max(1.0, abs(b)))

# ---------------------------------------------------------------- metrics
line = re.compile(r'^[a-z_]+(\{[a-z]+="[^"]*"\})? -?[0-9.e+-]+$')

def scrape():
    vals = {}
    for l in get("metrics").splitlines():
        if l.startswith("# HELP ") or l.startswith("# TYPE "):
            continue
        assert line.match(l), "not the exposition format: %r" % l
        k, v = l.rsplit(" ", 1)
        vals[k] = float(v)
    return vals

def steps(v):
    return v.get('pstrain_worker_steps_total{worker="0"}', 0)

def metrics():
    first = until(lambda: (lambda v: v if steps(v) >= 20 else None)(scrape()),
                  "20 steps in /metrics")
    second = until(lambda: (lambda v: v if steps(v) > steps(first) else None)(
        scrape()), "the step count to move")
    assert steps(second) > steps(first) >= 20, (steps(first), steps(second))
    for k in ("pstrain_worker_loss", "pstrain_worker_step_ms",
              "pstrain_worker_compute_seconds_total", "pstrain_workers_lost"):
        assert any(s.startswith(k) for s in second), "no " + k
    assert second["pstrain_workers_lost"] == 0, second
    # The pair scraped (step, loss) is a row of worker 0's file: the
    # row was complete when it was read.
    step = second['pstrain_worker_step{worker="0"}']
    loss = second['pstrain_worker_loss{worker="0"}']
    rows = list(csv.DictReader(open(out + "/worker-0.csv")))
    assert any(float(r["step"]) == step and abs(float(r["loss"]) - loss) < 1e-5
               for r in rows), (step, loss)

# ---------------------------------------------------------------- data.json
def data(cursor=None):
    return json.loads(get("data.json" + ("?from=" + cursor if cursor else "")))

def json_rows():
    d = data()
    assert d["view"] == "run" and len(d["jobs"]) == 1, d["view"]
    j = d["jobs"][0]
    assert j["state"] == "running" and j["workers"] == 2, j["state"]
    assert j["steps"] == STEPS and j["mode"] == "async", (j["steps"], j["mode"])
    assert j["eval_set"] == "validation", j["eval_set"]
    assert j["counts"]["source"] == "launcher", j["counts"]
    assert j["counts"]["workers_lost"] == 0, j["counts"]
    wcols, ecols = d["worker_cols"], d["eval_cols"]
    got = [list(p["rows"]) for p in j["worker"]]
    ev = list(j["eval"]["rows"])
    # Ask again from the offsets given: only the rows written since.
    cur = lambda j: ",".join([".".join(str(x) for x in
        [j["eval"]["next"]] + [p["next"] for p in j["worker"]])])
    # Three times at least, and until worker 0 has more than 20 rows and
    # an evaluation is in.
    asks, end = 0, time.time() + DEADLINE
    while (asks < 3 or len(got[0]) <= 20 or not ev) and time.time() < end:
        time.sleep(0.2)
        j2 = data(cur(j))["jobs"][0]
        for r, p in enumerate(j2["worker"]):
            assert p["from"] == j["worker"][r]["next"], (p["from"], r)
            got[r] += p["rows"]
        assert j2["eval"]["from"] == j["eval"]["next"]
        ev += j2["eval"]["rows"]
        j = j2
        asks += 1
    assert len(got[0]) > 20, len(got[0])
    for r in range(2):
        rows = list(csv.DictReader(open("%s/worker-%d.csv" % (out, r))))
        assert len(rows) >= len(got[r]), (len(rows), len(got[r]))
        for a, b in zip(got[r], rows):
            assert all(close(x, y) for x, y in zip(a, floats(b, wcols))), (a, b)
    erows = list(csv.DictReader(open(out + "/eval.csv")))
    assert len(ev) >= 1 and len(erows) >= len(ev), (len(ev), len(erows))
    names = {"loss": "val_loss", "acc": "val_acc", "auc": "val_auc"}
    for a, b in zip(ev, erows):
        assert all(close(x, y) for x, y in
                   zip(a, floats(b, [names.get(c, c) for c in ecols]))), (a, b)
    # An offset inside a row is not trusted: the rows start again.
    mid = j["worker"][0]["next"] - 3
    j3 = data("0.%d" % mid)["jobs"][0]
    assert j3["worker"][0]["from"] < mid, j3["worker"][0]["from"]
    # Each checkpoint listed is a file of the checkpoint folder.
    ck_list = until(lambda: data()["jobs"][0]["checkpoints"], "a checkpoint")
    for c in ck_list:
        assert os.path.exists("%s/server-%d-v%d.ckpt" % (ck, c["server"],
            c["version"])), c
        assert c["t"] is not None and c["t"] >= -1, c
    # The page and Chart.js.
    page = get("")
    assert "panel-staleness" in page and "dash.js" in page, page[:200]
    js = get("dash.js")
    assert "data.json" in js
    cj = get("chart.js")
    assert len(cj) > 100000 or "ptChartMissing" in cj, len(cj)

# ---------------------------------------------------------------- hostile
def raw(payload, wait=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    # Bound before the send: the server may reset a connection (a header
    # too large) while the payload is still going out.
    got = b""
    try:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        # The server may close first (a header too large): a reset, a
        # broken pipe, or ENOTCONN from the shutdown. What it answered
        # before, if anything, is what the caller checks.
        pass
    finally:
        s.close()
    return got

def status(resp):
    m = re.match(rb"HTTP/1\.[01] (\d+)", resp)
    return int(m.group(1)) if m else None

def hostile():
    req = lambda path, extra=b"": (b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n"
                                   + extra + b"\r\n")
    bad = {b"/data.json?from=abc": 400, b"/data.json?from=-1": 400,
           b"/data.json?from=1234567890123456789012": 400,
           b"/data.json?from=%00": 400, b"/data.json?from=1.2&from=x": 400,
           b"/data.json?points=abc": 400, b"/data.json?points=0": 400,
           b"/data.json?points=99999999999999999": 400,
           b"/data.json?points=8&draw=-1": 400,
           b"/../../../etc/passwd": 404, b"/nothing": 404}
    for path, want in bad.items():
        got = status(raw(req(path)))
        assert got == want, (path, got)
    # Offsets nowhere near a row, many jobs' worth: every row from the
    # start, no error.
    many = b"/data.json?from=" + b",".join([b"9" * 18 + b".7.7"] * 3000)
    assert status(raw(req(many))) in (200, 400, 413, None), "many offsets"
    assert status(raw(req(b"/data.json?from=" + b"." * 5000))) == 200
    # Overviews of every file at once, drawing workers that do not exist.
    assert status(raw(req(b"/data.json?points=20000&draw=" +
                          b",".join([b"9" * 18] * 100)))) == 200, "draw"
    assert status(raw(req(b"/data.json?points=2&draw=1&from=0.0.0"))) == 200, \
        "points=2"
    for junk in (b"\x00\xff garbage\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
                 b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
                 b"GET / HTTP/1.1\r\n" + b"X: " + b"a" * 200000 + b"\r\n\r\n",
                 b"POST /data.json HTTP/1.1\r\nHost: x\r\nContent-Length: 5"
                 b"\r\n\r\nhello",
                 b"GET /data.json HTTP/1.1\r\nHost: x\r\nContent-Length: "
                 b"99999999999\r\n\r\n",
                 b"GET /data.json?from="):
        raw(junk)
    # Connections left half-open, served meanwhile, then dropped.
    socks = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /data.json HTTP/1.1\r\nHost:")
        socks.append(s)
    assert data()["jobs"][0]["worker"][0]["next"] > 0
    for s in socks:
        s.close()
    # Still serving, and the job unharmed: it trains on (its rows move)
    # or, if it reached its last step meanwhile, it finished well.
    a = data()["jobs"][0]["worker"][0]["next"]
    def on():
        j = data()["jobs"][0]
        if j["state"] == "finished":
            assert j["summary"]["outcome"] == "ok", j["summary"]
            return True
        return j["worker"][0]["next"] > a
    until(on, "the job's rows to move after the hostile requests")

case("test_dash_metrics", metrics)
case("test_dash_json", json_rows)
case("test_dash_hostile", hostile)
EOF
	cat "$T/check.log"
	if grep -q '^FAIL' "$T/check.log"; then
		tail -n 5 "$T/job.log" | sed 's/^/    | /'
		kill $pid 2>/dev/null
		wait $pid
		return
	fi
	wait $pid
	r=$?
	if [ "$r" != 0 ]; then
		no test_dash_live "job exit $r" "$T/job.log"
	fi
}

# pstrain dashboard on the finished run, and on a comparison's folder
# made of copies of it: every row once, the summary's figures, a job
# label per comparison job in /metrics; SIGTERM stops it, exit 0.
test_dash_dir() {
	n=test_dash_dir
	if [ ! -f "$T/job/summary.json" ]; then
		no $n "no finished job from test_dash_live"
		return
	fi
	mkdir -p "$T/cmp/sync" "$T/cmp/async"
	cp -r "$T/job" "$T/cmp/sync/seed-1"
	cp -r "$T/job" "$T/cmp/async/seed-1"
	# The async copy as if it had run on emulated hosts (as summary.json
	# records them with --link 1gbit,25ms; tests/link_test.sh runs them).
	$PY - "$T/cmp/async/seed-1/summary.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
j["placement"] = "dedicated"
j["link"] = {"rate_bits_per_s": 1e9, "delay_s": 0.025,
             "shaped_by": "tbf both ways, netem", "namespaces": "root"}
j["hosts"] = {"server-0": "10.250.0.1", "worker-0": "10.250.0.2",
              "worker-1": "10.250.0.3"}
json.dump(j, open(sys.argv[1], "w"))
EOF
	printf '# pstrain compare: sync,async, seeds 1\n' >"$T/cmp/report.md"
	$P dashboard "$T/job" >"$T/d1.log" 2>&1 &
	d1=$!
	$P dashboard --listen 127.0.0.1:0 "$T/cmp" "$T/job" >"$T/d2.log" 2>&1 &
	d2=$!
	$PY - "$T/d1.log" "$T/d2.log" "$T/job" $STEPS >"$T/dir.log" 2>&1 <<'EOF'
import csv, json, re, sys, time, urllib.request
l1, l2, out = sys.argv[1:4]
STEPS = int(sys.argv[4])

def address(log):
    end = time.time() + 120
    while time.time() < end:
        m = re.search(r"at (http://127\.0\.0\.1:\d+/) ", open(log).read())
        if m:
            return m.group(1)
        time.sleep(0.05)
    raise SystemExit("no address in " + log)

def get(url, path):
    return urllib.request.urlopen(url + path, timeout=10).read().decode()

u1, u2 = address(l1), address(l2)
d = json.loads(get(u1, "data.json"))
assert d["view"] == "run" and len(d["jobs"]) == 1, d["view"]
j = d["jobs"][0]
assert j["state"] == "finished" and j["summary"]["outcome"] == "ok", j["state"]
assert j["counts"]["source"] == "summary", j["counts"]
# where it ran: one machine, no emulated hosts
assert j["summary"]["placement"] == "none", j["summary"]
assert j["summary"]["link_bits_per_s"] is None, j["summary"]
assert j["steps"] == STEPS and j["mode"] == "async" and j["workers"] == 2
assert j["t0"] is not None and j["checkpoints"], (j["t0"], j["checkpoints"])
for r, p in enumerate(j["worker"]):
    rows = list(csv.DictReader(open("%s/worker-%d.csv" % (out, r))))
    assert len(p["rows"]) == len(rows) and not p["more"], (len(p["rows"]), len(rows))
erows = list(csv.DictReader(open(out + "/eval.csv")))
assert len(j["eval"]["rows"]) == len(erows)
d = json.loads(get(u2, "data.json"))
labels = [j["label"] for j in d["jobs"]]
assert d["view"] == "compare", d["view"]
assert labels[:2] == [out.rsplit("/", 1)[0] + "/cmp/sync/seed-1",
                      out.rsplit("/", 1)[0] + "/cmp/async/seed-1"], labels
assert labels[2] == out and len(labels) == 3, labels
s = d["jobs"][1]["summary"]
assert s["placement"] == "dedicated" and s["link_bits_per_s"] == 1e9, s
assert s["link_delay_s"] == 0.025, s
assert s["hosts"] == {"server-0": "10.250.0.1", "worker-0": "10.250.0.2",
                      "worker-1": "10.250.0.3"}, s["hosts"]
assert d["jobs"][0]["summary"]["hosts"] is None, d["jobs"][0]["summary"]
m = get(u2, "metrics")
assert re.search(r'pstrain_worker_steps_total\{job="[^"]*cmp/async/seed-1",'
                 r'worker="1"\} %d' % STEPS, m), m[:400]
print("read", len(d["jobs"]), "jobs")
EOF
	r=$?
	kill -TERM $d1 $d2 2>/dev/null
	wait $d1
	e1=$?
	wait $d2
	e2=$?
	if [ $r != 0 ]; then
		no $n "checks" "$T/dir.log"
	elif [ "$e1$e2" != 00 ] || ! grep -q "stopped on signal 15" "$T/d1.log"; then
		no $n "pstrain dashboard exits $e1 $e2 on SIGTERM" "$T/d1.log"
	else
		ok $n
	fi
}

# An overview (?points=): a file read from its start comes as the rows
# that draw its lines as they are, each with its index in the file, and
# the sums of every row; in a comparison only the worker the page draws
# (draw=) comes thinned, the others as a few rows at even intervals.
test_dash_overview() {
	n=test_dash_overview
	if [ ! -f "$T/cmp/async/seed-1/summary.json" ]; then
		no $n "no comparison folder from test_dash_dir"
		return
	fi
	$P dashboard "$T/cmp" >"$T/d3.log" 2>&1 &
	d3=$!
	$PY - "$T/d3.log" "$T/cmp" >"$T/overview.log" 2>&1 <<'EOF'
import csv, json, math, re, sys, time, urllib.error, urllib.request
log, cmp = sys.argv[1:3]
end = time.time() + 120
while not re.search(r"at (http://\S+/) ", open(log).read()):
    assert time.time() < end, "no address"
    time.sleep(0.05)
url = re.search(r"at (http://\S+/) ", open(log).read()).group(1)
def get(q):
    return json.loads(urllib.request.urlopen(url + "data.json?" + q,
                                             timeout=10).read())
def num(v):
    return float(v) if v not in ("", "nan") else None
d = get("points=8&draw=0,1")
cols = d["worker_cols"]
for i, (label, drawn) in enumerate([("sync", 0), ("async", 1)]):
    for r, p in enumerate(d["jobs"][i]["worker"]):
        rows = list(csv.DictReader(open("%s/%s/seed-1/worker-%d.csv" %
                                        (cmp, label, r))))
        assert p["drawn"] == (r == drawn), (label, r, p["drawn"])
        assert p["agg"]["rows"] == len(rows) and p["next"] > 0, p["agg"]["rows"]
        ix = p["index"]
        assert len(ix) == len(p["rows"]) and ix == sorted(set(ix)), ix
        assert ix[0] == 0 and ix[-1] == len(rows) - 1, ix
        for k, row in zip(ix, p["rows"]):
            assert row[cols.index("step")] == int(rows[k]["step"]), (k, row)
        if r == drawn:
            # 4 runs of rows, the lowest and highest of 3 columns each
            assert 4 <= len(ix) <= 4 * 6 + 2 < len(rows), len(ix)
            for c in ("loss", "grad_norm", "step_ms"):
                ys = [num(x[c]) for x in rows]
                got = [row[cols.index(c)] for row in p["rows"]]
                assert min(ys) in got and max(ys) in got, c
        else:
            assert len(ix) == 2, ix
        a = p["agg"]
        for c in ("step_ms", "compute_ms", "comm_ms"):
            assert math.isclose(a[c], sum(num(x[c]) for x in rows),
                                rel_tol=1e-9), c
        st = [round(num(x["staleness"])) for x in rows]
        assert a["stale_rows"] == len(st) and sum(a["stale"]) == len(st)
        assert all(a["stale"][s] == st.count(s) for s in set(st)), a["stale"]
        assert a["dropped"] == sum(num(x["lr"]) == 0 for x in rows)
# Asked from where the overviews ended: nothing new.
cur = ",".join(".".join([str(j["eval"]["next"])] + [str(p["next"])
               for p in j["worker"]]) for j in d["jobs"])
t = get("points=8&from=" + cur)
assert all(not p["rows"] and "agg" not in p for j in t["jobs"]
           for p in j["worker"]), "rows after the end"
try:
    get("points=1")
    raise SystemExit("points=1 answered")
except urllib.error.HTTPError as e:
    assert e.code == 400, e.code
print("overview ok")
EOF
	r=$?
	kill -TERM $d3
	wait $d3
	if [ $r != 0 ]; then
		no $n "checks" "$T/overview.log"
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
	e2=$($P compare --modes sync,async --model mlp:8 --report-only \
		--data synthetic:300 --steps 5 --dashboard --out "$T/r2" 2>&1)
	r2=$?
	e3=$($P run --servers 1 --workers 1 --model mlp:8 \
		--data synthetic:300 --steps 5 --out "$T/r3" 2>&1)
	mkdir -p "$T/empty"
	e4=$($P dashboard "$T/none" 2>&1)
	r4=$?
	e5=$($P dashboard "$T/empty" 2>&1)
	r5=$?
	e6=$($P dashboard --listen nowhere "$T/r3" 2>&1)
	r6=$?
	e7=$($P dashboard 2>&1)
	r7=$?
	e8=$($P dashboard --port 1 "$T/r3" 2>&1)
	r8=$?
	if [ "$r1$r2$r4$r5$r6$r7$r8" != 2222222 ] ||
		! echo "$e1" | grep -q "dashboard-listen nowhere: expected HOST:PORT" ||
		! echo "$e2" | grep -q -- "--dashboard with --report-only" ||
		echo "$e3" | grep -q "dashboard at" ||
		! echo "$e4" | grep -q "$T/none: No such file" ||
		! echo "$e5" | grep -q "$T/empty: neither a run's folder" ||
		! echo "$e6" | grep -q -- "--listen nowhere: expected HOST:PORT" ||
		! echo "$e7" | grep -q "give a run's or a comparison's folder" ||
		! echo "$e8" | grep -q "unknown flag --port"; then
		no $n "exits $r1 $r2 $r4 $r5 $r6 $r7 $r8: $e1 / $e2 / $e3 / $e4 / $e5 / $e6 / $e7 / $e8"
	else
		ok $n
	fi
}

test_dash_live
test_dash_dir
test_dash_overview
test_dash_refusals
