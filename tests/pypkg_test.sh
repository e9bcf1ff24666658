#!/bin/sh
# tests/pypkg_test.sh - the Python package (python/) installed as the
# README says: `python3 -m pip install ./python` into fresh virtual
# environments, with no network (--no-index makes sure), and the errors a
# user meets when NumPy or the library is missing or the library is too
# old. Prints "ok NAME" / "FAIL NAME" per case.
cd "$(dirname "$0")/.." || exit 2
T=$(mktemp -d "${TMPDIR:-/tmp}/pt-pypkg-XXXXXX")
trap 'rm -rf "$T"' EXIT
TOP=$(pwd)
PSTRAIN_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export PSTRAIN_SECRET

. tests/lib.sh

# Debian's interpreter, which has NumPy (python3-numpy) and venv.
DEB=/usr/bin/python3
make -s lib bin/pstrain >"$T/make.log" 2>&1 || {
	no test_pypkg_build "make lib" "$T/make.log"
	exit 0
}

# A venv that sees Debian's NumPy; the install builds a wheel with the
# package's own backend (pip's isolated build has no setuptools offline).
# Outside the source tree, the library is found beside the `pstrain` on
# PATH, and it is the one this tree built.
if $DEB -m venv --system-site-packages "$T/v" >"$T/venv.log" 2>&1 &&
	"$T/v/bin/python3" -m pip install --no-index "$TOP/python" \
		>"$T/pip.log" 2>&1 &&
	(cd "$T" && PATH="$TOP/bin:$PATH" "$T/v/bin/python3" -c '
import sys, numpy as np, pstrain
assert pstrain.__file__.startswith(sys.argv[1]), pstrain.__file__
print(pstrain.version())
j = pstrain.Job([("a", 4, 0.1)], servers=1, workers=1, lr=1)
s = pstrain.Server(j, 0, "tcp://127.0.0.1:0")
w = pstrain.Worker(j, 0, [s.url])
v = np.zeros(4, np.float32)
w.pull("a", v).wait()
g = np.ones(4, np.float32)
after = np.zeros(4, np.float32)
w.pushpull(0, "a", g, after).wait()
assert np.allclose(after, v - 1), (v, after)
w.close(); s.stop(); s.close()
' "$T/v/lib" >"$T/use.log" 2>&1) &&
	[ "$(cat "$T/use.log")" = "$(bin/pstrain --version | cut -d' ' -f2)" ]; then
	ok test_pypkg_venv_install
else
	cat "$T/venv.log" "$T/pip.log" >>"$T/use.log" 2>/dev/null
	no test_pypkg_venv_install "pip install ./python into a venv" "$T/use.log"
fi

# Each missing piece is named, with what to do.
# No library anywhere it is looked for (PATH without pstrain).
if (cd "$T" && PATH=/usr/bin:/bin "$T/v/bin/python3" -c 'import pstrain') \
	>"$T/nolib.log" 2>&1; then
	no test_pypkg_errors_name_what_is_missing "imported without a library"
elif ! grep -q "libpstrain.so.1 not found.*PSTRAIN_LIB" "$T/nolib.log"; then
	no test_pypkg_errors_name_what_is_missing "no library" "$T/nolib.log"
# A library older than the package (an API version of 1).
elif ! printf 'int pt_api_version(void) { return 1; }\n' >"$T/old.c" ||
	! cc -shared -fPIC -o "$T/libold.so" "$T/old.c" ||
	(cd "$T" && PSTRAIN_LIB="$T/libold.so" "$T/v/bin/python3" -c \
		'import pstrain') >"$T/old.log" 2>&1 ||
	! grep -q "libold.so is too old.*API version 1, needs" "$T/old.log"; then
	no test_pypkg_errors_name_what_is_missing "old library" "$T/old.log"
# An interpreter without NumPy (a venv that does not see Debian's).
elif ! $DEB -m venv "$T/bare" >"$T/bare.log" 2>&1 ||
	(cd "$T" && PYTHONPATH="$TOP/python" "$T/bare/bin/python3" -c \
		'import pstrain') >"$T/nonumpy.log" 2>&1 ||
	! grep -q "pstrain needs NumPy.*$T/bare/bin/python3" "$T/nonumpy.log"; then
	no test_pypkg_errors_name_what_is_missing "no numpy" "$T/nonumpy.log"
# pip, offline, in that venv: NumPy is the package's dependency.
elif "$T/bare/bin/python3" -m pip install --no-index "$TOP/python" \
	>"$T/barepip.log" 2>&1 || ! grep -qi "numpy" "$T/barepip.log"; then
	no test_pypkg_errors_name_what_is_missing "pip without numpy" \
		"$T/barepip.log"
else
	ok test_pypkg_errors_name_what_is_missing
fi

# The package's version is the Makefile's, and its wheel holds the
# package and nothing of the source tree besides.
want=$(sed -n 's/^VERSION_NUM = //p' Makefile)
if "$T/v/bin/python3" -m pip wheel --no-index --no-deps -w "$T/wheel" \
	"$TOP/python" >"$T/wheel.log" 2>&1 &&
	$DEB -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' \
		"$T/wheel/pstrain-$want-py3-none-any.whl" >"$T/files" &&
	[ "$(grep -cv '^pstrain/\|^pstrain-[0-9.]*\.dist-info/' "$T/files")" = 0 ] &&
	grep -qx "pstrain/__init__.py" "$T/files"; then
	ok test_pypkg_wheel
else
	no test_pypkg_wheel "pip wheel: version $want, pstrain/ only" "$T/wheel.log"
fi
