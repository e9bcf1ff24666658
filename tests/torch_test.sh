#!/bin/sh
# tests/torch_test.sh - the torch bridge (python/pstrain/torch.py) with
# Debian's python3-torch, through real server and worker processes
# (tests/torch_check.py has the cases). Prints "ok NAME" / "FAIL NAME".
cd "$(dirname "$0")/.." || exit 2
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-torch-XXXXXX")
trap 'rm -rf "$T"' EXIT
export PYTHONPATH="$(pwd)/python" OPENBLAS_NUM_THREADS=1

. tests/lib.sh

DEB=/usr/bin/python3
if ! make -s lib >"$T/make.log" 2>&1; then
	no test_torch_build "make lib" "$T/make.log"
	exit 0
fi
for c in sync async; do
	mkdir -p "$T/$c"
	if timeout 300 $DEB tests/torch_check.py $c "$T/$c" >"$T/$c.log" 2>&1; then
		ok test_torch_$c
	else
		no test_torch_$c "tests/torch_check.py $c" "$T/$c.log"
	fi
done
