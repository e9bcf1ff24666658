#!/bin/sh
# tests/bench_test.sh - make bench runs end to end and reports every
# figure (one short round; no figure is judged: nothing is timed here).
cd "$(dirname "$0")/.." || exit 2
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-bt-XXXXXX")
trap 'rm -rf "$T"' EXIT
. tests/lib.sh
n=test_bench_reports_every_figure
if BENCH_ROUNDS=1 BENCH_STEPS=24 BENCH_MEM_STEPS=3 BENCH_MEM_DATA=synthetic:512 \
	BENCH_LARGE_STEPS=3 BENCH_LARGE_ROUNDS=1 BENCH_LARGE_DATA=synthetic:512 \
	BENCH_MEM_WORKERS="1 8" BENCH_SPARSE_EXAMPLES=20000 BENCH_COMM_DIV=10 \
	BENCH_OUT="$T/bench.json" sh bench/run.sh \
	>"$T/bench.log" 2>&1 &&
	python3 -c '
import json, math, sys
d = json.load(open(sys.argv[1]))
c = d["communication"]
assert len(c) == 6, c
for r in c:
    for k in ("raw_nng_us", "pstrain_us", "speed_vs_raw",
              "raw_nng_default_buffers_us", "pstrain_lent_us",
              "speed_lent_vs_raw", "speed_vs_raw_default_buffers",
              "raw_nng_callback_us", "speed_vs_raw_callback",
              "raw_nng_pieces_us", "speed_vs_raw_pieces"):
        assert math.isfinite(r[k]), r
for r in c:
    if r["transport"] == "ipc":
        for k in ("pstrain_shm_us", "pstrain_shm_lent_us",
                  "speed_shm_vs_raw_pieces", "speed_shm_lent_vs_raw_pieces"):
            assert math.isfinite(r[k]) and r[k] > 0, r
g = d["ring"]
for k in ("ring_us", "bound_us", "time_vs_bound", "duplex_us", "floor_us",
          "time_vs_duplex", "time_vs_floor"):
    assert math.isfinite(g[k]) and g[k] > 0, g
lo, hi = g["time_vs_duplex_range"]
assert lo <= g["time_vs_duplex"] <= hi, g
t = d["training"]
ps = ["solo", "solo2", "ps1x1", "ps1x2", "ps2x2", "ps1x4", "ps2x4", "ps1x1_pin",
      "ps1x2_pin", "ps2x4_pin", "ps1x1_tcp", "as2x2", "as2x2_shm",
      "ps1x1_b2", "ps1x1_wt2"]
for k in ps:
    assert math.isfinite(t["samples_per_s"][k]), (k, t)
assert math.isfinite(t["speed"]["ps1x1_vs_solo"]), t
assert math.isfinite(t["speed"]["ps1x1_vs_solo2"]), t
e = d["scaling_efficiency"]
for k in ("ps1x1", "ps2x4", "ar2"):
    assert math.isfinite(e[k]) and e[k] > 0, (k, e)
L = d["large"]
for k in ("solo", "ps1x2", "ps2x2", "ar2"):
    assert math.isfinite(L["samples_per_s"][k]), (k, L)
for k in ("ar2", "ar4"):
    assert math.isfinite(t["samples_per_s"][k]), (k, t)
    assert math.isfinite(d["resources"][k]["worker_max_rss_mb"]), (k, d)
assert math.isfinite(t["speed"]["ar4_vs_ps2x4"]), t
lo, hi = t["speed_range"]["ps1x1_vs_solo"]
assert lo <= t["speed"]["ps1x1_vs_solo"] <= hi, t
for r in c:
    assert r["speed_range"][0] <= r["speed_vs_raw"] <= r["speed_range"][1], r
for k in ps[2:]:
    r = d["resources"][k]
    for f in ("server_faults_per_update", "worker_faults_per_step",
              "server_cpu_ms_per_update", "server_max_rss_mb",
              "worker_max_rss_mb"):
        assert math.isfinite(r[f]), (k, f, r)
if not d["pytorch"].startswith("not installed"):
    for k in ("torch1", "torch1n", "ddp2", "ddp4", "br1x2", "br2x4"):
        assert math.isfinite(t["samples_per_s"][k]), (k, t)
    for k in ("ps2x2_vs_torch1n", "ar2_vs_torch1n"):
        assert math.isfinite(t["speed"][k]), (k, t)
    for k in ("L_ps2x2_vs_L_ddp2", "L_ar2_vs_L_ddp2"):
        assert math.isfinite(L["speed"][k]), (k, L)
    for k in ("br1x2_vs_ddp2", "br2x4_vs_ps2x4"):
        assert math.isfinite(t["speed"][k]), (k, t)
for k in ("w1", "w8", "shm_w1", "shm_w8"):
    m = d["server_memory"][k]
    assert math.isfinite(m["server_max_rss_mb"]) and m["bound_mb"] > 32, m
    assert m["server_max_private_mb"] > 0, m
for k in ("w8_vs_w1", "own_w8_vs_w1", "shm_w8_vs_w1", "shm_own_w8_vs_w1"):
    assert math.isfinite(d["server_memory"][k]), k
assert d["record"]["openblas_core"], d["record"]
tb = d["tables"]
for op in ("pull", "pushpull"):
    r = tb["rows"][op]
    for k in ("raw_nng_rows_per_s", "pstrain_rows_per_s", "speed_vs_raw"):
        assert math.isfinite(r[k]) and r[k] > 0, (op, r)
    assert r["speed_range"][0] <= r["speed_vs_raw"] <= r["speed_range"][1], r
for k in ("ids_26000", "ids_9999990"):
    b = tb["bytes"][k]
    # the pulled bytes are the touched rows (64 B each) and their ids,
    # whatever the table size
    assert b["rows_per_step"] > 0 and 1 <= b["bytes_vs_rows"] < 1.5, (k, b)
st = tb["training"]["samples_per_s"]
for k in ("sp_fm", "sp_lr"):
    assert math.isfinite(st[k]) and st[k] > 0, (k, st)
if not d["pytorch"].startswith("not installed"):
    for k in ("sp_fm_torch", "sp_lr_torch"):
        assert math.isfinite(st[k]) and st[k] > 0, (k, st)
    assert math.isfinite(tb["training"]["speed"]["sp_fm_vs_sp_fm_torch"])
sp = d["split_products"]
assert sorted(sp) == ["forward_by_columns", "gradient_by_columns",
                      "gradient_by_rows"], sp
assert all(v in ("identical", "differs") for v in sp.values()), sp
' "$T/bench.json" 2>"$T/check.log"; then
	ok $n
else
	no $n "bench failed or left a figure out" "$T/bench.log"
	cat "$T/check.log"
fi
