#!/bin/sh
# tests/library_test.sh - pstrain as a library, used the way docs/USAGE.md
# says: `make install PREFIX=...`, then the examples that train models
# pstrain does not ship through the installed library only: the C linear
# regression built with pkg-config, and the NumPy network through the
# Python binding. Prints "ok NAME" / "FAIL NAME" per case.
cd "$(dirname "$0")/.." || exit 2
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-lib-XXXXXX")
trap 'rm -rf "$T"' EXIT
PREFIX=$T/prefix
PSTRAIN_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export PSTRAIN_SECRET OPENBLAS_NUM_THREADS=1

. tests/lib.sh

if make --no-print-directory install PREFIX="$PREFIX" >"$T/install.log" 2>&1 &&
	[ -f "$PREFIX/include/pstrain.h" ] &&
	[ -f "$PREFIX/lib/libpstrain.a" ] &&
	[ -f "$PREFIX/lib/libpstrain.so.1" ] &&
	[ -f "$PREFIX/lib/pkgconfig/pstrain.pc" ]; then
	ok test_library_install
else
	no test_library_install "make install PREFIX=$PREFIX" "$T/install.log"
fi

# Only pstrain.h's calls leave the shared object: every exported
# function is declared there, and no internal (pti_) name is exported.
# The 44 calls include the versions (pt_version, pt_api_version), given
# initial values (pt_job_var_values), records (pt_worker_step,
# pt_worker_eval, pt_worker_final, pt_job_summary), a scheduler's tasks
# (pt_node_*), the log
# (pt_log_set, pt_log_stderr), the lent-value pair (pt_wait_lent,
# pt_lent_free), pstrain's own models (pt_job_model, pt_net_*) and
# embedding tables (pt_job_table, pt_*_rows).
nm -D --defined-only "$PREFIX/lib/libpstrain.so.1" | awk '$2 == "T" {print $3}' \
	| sort >"$T/exported"
sed -n 's/^PT_API [^(]*[ *]\(pt_[a-z_]*\)(.*/\1/p' include/pstrain.h | sort \
	>"$T/declared"
if [ -s "$T/declared" ] && cmp -s "$T/exported" "$T/declared" &&
	[ "$(wc -l <"$T/declared")" -eq 44 ] &&
	grep -qx pt_wait_lent "$T/exported" && grep -qx pt_lent_free "$T/exported" &&
	grep -qx pt_pushpull_rows "$T/exported"; then
	ok test_library_exports_only_the_api
else
	no test_library_exports_only_the_api \
		"exported: $(tr '\n' ' ' <"$T/exported"); declared: $(tr '\n' ' ' <"$T/declared")"
fi

# The C example, built as docs/USAGE.md shows.
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" LD_LIBRARY_PATH="$PREFIX/lib"
LR="$T/linreg"
if cc -std=c11 -Wall -Wextra -Werror -o "$LR" examples/api/linreg.c \
	$(pkg-config --cflags --libs pstrain) -lm -pthread >"$T/cc.log" 2>&1 &&
	ldd "$LR" | grep -q "$PREFIX/lib/libpstrain.so.1"; then
	ok test_library_c_example_builds
else
	no test_library_c_example_builds "cc linreg.c with pkg-config" "$T/cc.log"
fi

# err_of LOG: the largest |w - w*| any worker reported, or "none".
err_of() {
	sed -n 's/.*largest |w - w\*| \([0-9.]*\),.*/\1/p' "$1" | sort -g | tail -n 1 |
		grep . || echo none
}
# close LOG: every worker reported, each within 0.01 of the teacher.
close() {
	n=$(grep -c 'largest |w - w\*|' "$1")
	e=$(err_of "$1")
	[ "$n" -eq "$2" ] && [ "$e" != none ] &&
		awk -v e="$e" 'BEGIN { exit !(e < 0.01) }'
}

for m in sync async ssp; do
	if timeout 120 "$LR" local --mode $m --servers 2 --workers 2 \
		>"$T/local-$m.log" 2>&1 && close "$T/local-$m.log" 2; then
		ok "test_library_c_linreg_$m"
	else
		no "test_library_c_linreg_$m" "threads in one process, error $(err_of "$T/local-$m.log")" \
			"$T/local-$m.log"
	fi
done

# Sync is deterministic: the same job twice, the same result.
"$LR" local --mode sync --servers 2 --workers 2 >"$T/again.log" 2>&1
if grep '^worker 0' "$T/local-sync.log" >"$T/a" &&
	grep '^worker 0' "$T/again.log" >"$T/b" && cmp -s "$T/a" "$T/b"; then
	ok test_library_c_linreg_sync_repeats
else
	no test_library_c_linreg_sync_repeats "$(cat "$T/a") / $(cat "$T/b")"
fi

# Separate processes over ipc: two servers, three workers.
ok_procs=1
for s in 0 1; do
	"$LR" server $s "ipc://$T/s$s" --servers 2 --workers 3 --batch 63 \
		>"$T/server$s.log" 2>&1 &
	eval "spid$s=\$!"
done
for r in 0 1 2; do
	timeout 120 "$LR" worker $r "ipc://$T/s0,ipc://$T/s1" --servers 2 \
		--workers 3 --batch 63 >"$T/worker$r.log" 2>&1 &
	eval "wpid$r=\$!"
done
for r in 0 1 2; do
	eval "wait \$wpid$r" || ok_procs=0
done
for s in 0 1; do
	# The last worker's done stops the servers.
	eval "wait \$spid$s" || ok_procs=0
done
cat "$T"/worker?.log >"$T/workers.log"
if [ $ok_procs -eq 1 ] && close "$T/workers.log" 3; then
	ok test_library_c_linreg_processes
else
	no test_library_c_linreg_processes "2 servers, 3 workers over ipc" \
		"$T/workers.log"
fi

# Another job's variables (40 features against 50) are refused at hello,
# by name, with a nonzero exit.
"$LR" server 0 "ipc://$T/x0" --servers 1 --workers 1 >"$T/xs.log" 2>&1 &
xpid=$!
if ! timeout 60 "$LR" worker 0 "ipc://$T/x0" --servers 1 --workers 1 \
	--features 40 >"$T/xw.log" 2>&1 && grep -q "another model" "$T/xw.log"; then
	ok test_library_c_other_variables_refused
else
	no test_library_c_other_variables_refused "worker exit or message" "$T/xw.log"
fi
kill $xpid 2>/dev/null
wait $xpid 2>/dev/null

# The Python binding, with Debian's NumPy (the first python3 on the path
# that has it, else Debian's own interpreter).
PY=""
for p in python3 /usr/bin/python3; do
	if command -v $p >/dev/null 2>&1 && $p -c 'import numpy' 2>/dev/null; then
		PY=$p
		break
	fi
done
export PYTHONPATH="$PREFIX/lib/python3/dist-packages"
if [ -z "$PY" ]; then
	no test_library_python_numpy "no python3 with numpy (python3-numpy)"
else
	# Arrays are handed over, never copied: one of another type is
	# refused rather than silently copied. log_to_stderr shows the
	# library's messages.
	if $PY -c '
import numpy as np, pstrain
pstrain.log_to_stderr()
j = pstrain.Job([("a", 4, 0.1)], servers=1, workers=1)
try:
    j.set("model", "mlp:8")
    raise SystemExit("an option the API does not take was accepted")
except pstrain.Error as e:
    assert e.code == 2 and "model" in str(e), e
s = pstrain.Server(j, 0, "tcp://127.0.0.1:0")
w = pstrain.Worker(j, 0, [s.url])
try:
    w.pull("a", np.zeros(4))
    raise SystemExit("a float64 array was accepted")
except TypeError:
    pass
v = np.zeros(4, np.float32)
w.pull("a", v).wait()
assert (abs(v) <= 0.1).all() and v.any(), v
w.close(); s.stop(); s.close()
# Rows of an embedding table: an id pushed twice sums its gradients.
j = pstrain.Job([("b", 1)], servers=1, workers=1, lr=0.5)
assert j.table("emb", 2) == 0
s = pstrain.Server(j, 0, "tcp://127.0.0.1:0")
w = pstrain.Worker(j, 0, [s.url])
ids = np.array([7, 7, 9], np.uint64)
g = np.ones(6, np.float32)
out = np.zeros(4, np.float32)
w.pushpull_rows(0, 0, ids, g, np.array([7, 9], np.uint64), out)
assert (out == [-1, -1, -0.5, -0.5]).all(), out
w.pull_rows(0, np.array([8], np.uint64), out[:2])
assert (out[:2] == 0).all(), out
w.close(); s.stop(); s.close()
' >"$T/py-api.log" 2>&1 &&
		grep -q "^server 0: listening on tcp://127.0.0.1:" "$T/py-api.log"; then
		ok test_library_python_binding
	else
		no test_library_python_binding "binding checks" "$T/py-api.log"
	fi
	# pstrain's own model through the binding: a job declared with
	# Job.model is the one pstrain's own server holds for --model (same
	# variables and initial values: its hello is taken and the values
	# pulled equal those of a server of the binding's job); Net's
	# gradient steps lower the loss.
	"$PREFIX/bin/pstrain" server --model mlp:8 --data synthetic:100 \
		--listen "ipc://$T/m0" --alone-timeout 30 >"$T/m0.log" 2>&1 &
	mpid=$!
	if $PY -c '
import sys, numpy as np, pstrain
j = pstrain.Job(servers=1, workers=1, lr=0.5)
j.model("mlp:8", 64, 10)
mine = pstrain.Server(j, 0, "tcp://127.0.0.1:0")
a, b = np.zeros(610, np.float32), np.zeros(610, np.float32)
w = pstrain.Worker(j, 0, ["ipc://" + sys.argv[1] + "/m0"])
w.pull(pstrain.ALL, a).wait()
v = pstrain.Worker(j, 0, [mine.url])
v.pull(pstrain.ALL, b).wait()
assert a.any() and (a == b).all(), "initial values differ"
net = pstrain.Net(j, 32)
x = np.random.default_rng(1).random((32, 64), np.float32)
y = np.arange(32) % 10
g, first = net.grad(a, x, y)
for t in range(5):
    w.pushpull(t, pstrain.ALL, g, a).wait()
    g, loss = net.grad(a, x, y)
assert loss < first, (first, loss)
try:
    pstrain.Net(pstrain.Job([("v", 4)]), 8)
    raise SystemExit("a Net of a job without a model was made")
except pstrain.Error as e:
    assert "pt_job_model" in str(e), e
w.done(); w.close(); v.close(); mine.stop(); mine.close()
' "$T" >"$T/py-model.log" 2>&1 && wait $mpid; then
		ok test_library_python_model_matches_cli
	else
		kill $mpid 2>/dev/null
		cat "$T/m0.log" >>"$T/py-model.log"
		no test_library_python_model_matches_cli "Job.model, Net" \
			"$T/py-model.log"
	fi
	# pstrain's CNN trained by Python workers (examples/api/fashion_cnn.py).
	if timeout 300 $PY examples/api/fashion_cnn.py --model cnn:4,8 \
		--servers 1 --workers 2 --epochs 2 --lr 0.2 \
		--out "$T/py-cnn.json" >"$T/py-cnn.log" 2>&1 &&
		acc=$(sed -n 's/.*"test_acc": \([0-9.]*\).*/\1/p' "$T/py-cnn.json") &&
		awk -v a="$acc" 'BEGIN { exit !(a >= 0.8) }'; then
		ok test_library_python_fashion_cnn
	else
		no test_library_python_fashion_cnn "test accuracy ${acc:-none}, want >= 0.8" \
			"$T/py-cnn.log"
	fi
	for m in sync async; do
		if timeout 300 $PY examples/api/fashion_tanh.py --mode $m \
			--servers 2 --workers 2 --epochs 2 --out "$T/py-$m.json" \
			>"$T/py-$m.log" 2>&1 &&
			acc=$(sed -n 's/.*"test_acc": \([0-9.]*\).*/\1/p' "$T/py-$m.json") &&
			awk -v a="$acc" 'BEGIN { exit !(a >= 0.78) }'; then
			ok "test_library_python_fashion_$m"
		else
			no "test_library_python_fashion_$m" "test accuracy ${acc:-none}, want >= 0.78" \
				"$T/py-$m.log"
		fi
	done
fi
