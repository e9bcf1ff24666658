#!/bin/sh
# tests/torch_test.sh - the torch bridge (python/pstrain/torch.py) with
# Debian's python3-torch, through real server and worker processes
# (tests/torch_check.py has the cases: sync equal to one process's SGD,
# async, ssp and sync with a backup worker learning through buckets,
# srun's and torchrun's tasks). Prints "ok NAME" / "FAIL NAME".
cd "$(dirname "$0")/.." || exit 2
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-torch-XXXXXX")
trap 'rm -rf "$T"' EXIT
export PYTHONPATH="$(pwd)/python" OPENBLAS_NUM_THREADS=1

. tests/lib.sh

DEB=/usr/bin/python3
if ! make -s lib bin/pstrain >"$T/make.log" 2>&1; then
	no test_torch_build "make lib" "$T/make.log"
	exit 0
fi
for c in sync async ssp backup node; do
	mkdir -p "$T/$c"
	if timeout 300 $DEB tests/torch_check.py $c "$T/$c" >"$T/$c.log" 2>&1; then
		ok test_torch_$c
	else
		no test_torch_$c "tests/torch_check.py $c" "$T/$c.log"
	fi
done

# The dashboard serves the bridge's job as finished, from its files
# (summary.json, worker-R.csv), as it serves pstrain run's.
bin/pstrain dashboard --listen 127.0.0.1:0 "$T/sync" >"$T/dash.log" 2>&1 &
dpid=$!
if $DEB -c '
import json, re, sys, time, urllib.request
log, end = sys.argv[1], time.time() + 60
while not (m := re.search(r"at (http://127\.0\.0\.1:\d+/)", open(log).read())):
    assert time.time() < end, "no address printed"
    time.sleep(0.05)
d = json.load(urllib.request.urlopen(m.group(1) + "data.json"))
j = d["jobs"][0]
assert j["state"] == "finished" and j["mode"] == "sync", j
assert j["workers"] == 2 and len(j["worker"][0]["rows"]) == 8, j
' "$T/dash.log" >"$T/dashcheck.log" 2>&1; then
	ok test_torch_dashboard
else
	cat "$T/dash.log" >>"$T/dashcheck.log"
	no test_torch_dashboard "pstrain dashboard on the bridge's job" \
		"$T/dashcheck.log"
fi
kill $dpid 2>/dev/null
wait $dpid 2>/dev/null
