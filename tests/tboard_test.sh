#!/bin/sh
# tests/tboard_test.sh - pstrain run --tensorboard: the event files, read
# back by a reader written here from the format's specification (TFRecord
# framing with masked CRC-32C; Event and Summary protobufs), hold every
# row of the job's files: each worker's scalars at each step, and the
# evaluations; the session run holds the job's hparams (the hparams
# plugin's records) and its final scores; compare --tensorboard gives
# each job its own folder, and each mode's seeds one hparams group.
# Prints "ok NAME" / "FAIL NAME" per case.
cd "$(dirname "$0")/.." || exit 2
P=${PSTRAIN:-bin/pstrain}
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-tb-XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
. tests/lib.sh

# check.py TB JOB STEPS: the event files under TB hold every row of the
# files of the 2-worker job in JOB, STEPS steps each.
cat >"$T/check.py" <<'EOF'
import csv, glob, struct, sys
tb, job, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])

def crc32c(data):
    # Castagnoli, reflected polynomial 0x82F63B78, bit by bit.
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

assert crc32c(b"123456789") == 0xE3069283

def records(path):
    d = open(path, "rb").read()
    i = 0
    while i < len(d):
        n, = struct.unpack_from("<Q", d, i)
        assert struct.unpack_from("<I", d, i + 8)[0] == masked(d[i:i + 8])
        data = d[i + 12:i + 12 + n]
        assert len(data) == n, "short record"
        assert struct.unpack_from("<I", d, i + 12 + n)[0] == masked(data)
        yield data
        i += 16 + n

def fields(m):
    i = 0
    while i < len(m):
        key, i = varint(m, i)
        f, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(m, i)
        elif wire == 1:
            v = m[i:i + 8]; i += 8
        elif wire == 5:
            v = m[i:i + 4]; i += 4
        elif wire == 2:
            n, i = varint(m, i)
            v = m[i:i + n]; i += n
        else:
            raise AssertionError("wire type %d" % wire)
        yield f, v

def varint(m, i):
    v = s = 0
    while True:
        b = m[i]; i += 1
        v |= (b & 0x7F) << s; s += 7
        if b < 0x80:
            return v, i

def hparams_data(meta):
    # SummaryMetadata: plugin_data (1) = plugin_name (1), content (2),
    # the content an HParamsPluginData: version (1), then
    # session_start_info (3) or session_end_info (4).
    plugin = dict(fields(dict(fields(meta))[1]))
    assert plugin[1] == b"hparams", plugin
    data = dict(fields(plugin[2]))
    assert data.get(1, 0) == 0, data
    if 3 in data:
        hp, group = {}, None
        for f, v in fields(data[3]):
            if f == 1:  # a map entry: key (1), google.protobuf.Value (2)
                entry = dict(fields(v))
                (kind, x), = fields(entry[2])
                hp[entry[1].decode()] = (struct.unpack("<d", x)[0]
                    if kind == 2 else x.decode() if kind == 3 else bool(x))
            elif f == 4:
                group = v.decode()
        return {"start": hp, "group": group}
    end = dict(fields(data[4]))
    return {"status": end[1]}

def events(run):
    files = glob.glob(tb + "/" + run + "/events.out.tfevents.*")
    assert len(files) == 1, files
    out = []
    for rec in records(files[0]):
        e = {"scalars": {}}
        for f, v in fields(rec):
            if f == 1:
                e["wall"] = struct.unpack("<d", v)[0]
            elif f == 2:
                e["step"] = v
            elif f == 3:
                e["version"] = v.decode()
            elif f == 5:
                for g, val in fields(v):
                    assert g == 1
                    tag = x = meta = None
                    for h, w in fields(val):
                        if h == 1:
                            tag = w.decode()
                        elif h == 2:
                            x = struct.unpack("<f", w)[0]
                        elif h == 9:
                            meta = w
                    if meta is not None:
                        e[tag] = hparams_data(meta)
                    else:
                        e["scalars"][tag] = x
        out.append(e)
    return out

def f32(s):
    return struct.unpack("<f", struct.pack("<f", float(s)))[0]

for r in (0, 1):
    ev = events("worker-%d" % r)
    assert ev[0].get("version") == "brain.Event:2", ev[0]
    rows = list(csv.DictReader(open("%s/worker-%d.csv" % (job, r))))
    assert len(ev) - 1 == len(rows) == steps, (len(ev), len(rows))
    for e, row in zip(ev[1:], rows):
        assert e["step"] == int(row["step"]), (e, row)
        for k in ("loss", "grad_norm", "step_ms", "compute_ms", "comm_ms",
                  "staleness", "lr"):
            assert e["scalars"][k] == f32(row[k]), (k, e, row)
ev = events("eval")
rows = list(csv.DictReader(open(job + "/eval.csv")))
assert len(rows) >= 2 and len(ev) - 1 == len(rows), (len(ev), len(rows))
for e, row in zip(ev[1:], rows):
    # one step axis for every run: the workers' steps (in ssp and async
    # eval.csv's step is the parameters' version)
    assert e["step"] == int(row["worker_step"]), (e, row)
    assert e["scalars"]["val_acc"] == f32(row["val_acc"]), (e, row)
    assert e["scalars"]["val_loss"] == f32(row["val_loss"]), (e, row)
# The session (TB itself): the job's hparams, grouped without the seed,
# then its final scores and a successful end.
import json
summ = json.load(open(job + "/summary.json"))
ev = events("")
start = ev[1]["_hparams_/session_start_info"]
hp = start["start"]
for k in ("mode", "model", "optimizer"):
    assert hp[k] == summ["config"][k], (k, hp, summ["config"])
for k in ("lr", "batch", "workers", "servers", "seed"):
    assert hp[k] == summ["config"][k], (k, hp, summ["config"])
assert "seed=" not in start["group"] and "mode=" + hp["mode"] in start["group"]
finals = ev[2]["scalars"]
for k in ("final_test_acc", "best_val_acc", "train_s"):
    assert finals[k] == f32(summ[k]), (k, finals, summ[k])
assert ev[3]["_hparams_/session_end_info"]["status"] == 1, ev[3]
print("group: %s" % start["group"])
print("ok: %d eval events" % (len(ev) - 1))
EOF

test_tboard_events_match_csv() {
	n=test_tboard_events_match_csv
	if ! $P run --mode sync --servers 1 --workers 2 --model mlp:16 \
		--data synthetic:1200 --batch 32 --steps 40 --validation 10% \
		--evals-per-epoch 4 --tensorboard "$T/tb" --out "$T/job" \
		>"$T/job.log" 2>&1; then
		no $n "job failed" "$T/job.log"
		return
	fi
	if $PY "$T/check.py" "$T/tb" "$T/job" 40 >"$T/check.log" 2>&1; then
		ok $n
	else
		no $n "event files" "$T/check.log"
	fi
}

# compare --tensorboard DIR: a run per mode, seed and worker, each
# job's under DIR/LABEL/seed-S as its outputs are under --out.
test_tboard_compare() {
	n=test_tboard_compare
	if ! $P compare --modes sync,ssp:1 --seeds 2 --workers 2 \
		--model mlp:16 --data synthetic:1200 --batch 32 --steps 30 \
		--evals-per-epoch 4 --tensorboard "$T/tbc" --out "$T/cmp" \
		>"$T/cmp.log" 2>&1; then
		no $n "compare failed" "$T/cmp.log"
		return
	fi
	for j in sync/seed-1 sync/seed-2 ssp-1/seed-1 ssp-1/seed-2; do
		if ! $PY "$T/check.py" "$T/tbc/$j" "$T/cmp/$j" 30 \
			>"$T/check-$(echo $j | tr / -).log" 2>&1; then
			no $n "event files of $j" "$T/check-$(echo $j | tr / -).log"
			return
		fi
	done
	# One HParams group per mode: its seeds together.
	g() { sed -n 's/^group: //p' "$T/check-$1.log"; }
	if [ "$(g sync-seed-1)" = "$(g sync-seed-2)" ] &&
		[ "$(g ssp-1-seed-1)" = "$(g ssp-1-seed-2)" ] &&
		[ "$(g sync-seed-1)" != "$(g ssp-1-seed-1)" ]; then
		ok $n
	else
		no $n "hparams groups: '$(g sync-seed-1)' '$(g sync-seed-2)' '$(g ssp-1-seed-1)'"
	fi
}

test_tboard_refusals() {
	n=test_tboard_refusals
	touch "$T/file"
	e1=$($P run --servers 1 --workers 1 --model mlp:8 \
		--data synthetic:300 --steps 5 --tensorboard "$T/file/tb" \
		--out "$T/r1" 2>&1)
	r1=$?
	e2=$($P compare --modes sync,async --model mlp:8 \
		--data synthetic:300 --steps 5 --tensorboard "$T/tb2" \
		--report-only --out "$T/r2" 2>&1)
	r2=$?
	if [ "$r1$r2" = 22 ] && echo "$e1" | grep -q -- "--tensorboard $T/file/tb" &&
		echo "$e2" | grep -q -- "--tensorboard with --report-only"; then
		ok $n
	else
		no $n "exits $r1 $r2: $e1 / $e2"
	fi
}

test_tboard_events_match_csv
test_tboard_compare
test_tboard_refusals
