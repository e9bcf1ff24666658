#!/bin/sh
# scripts/deps.sh [--test] [PKG...] - install the Debian packages pstrain
# needs, once. Does nothing when every package is already installed.
# Without --test: what building pstrain, running it (make demo, the
# dashboard's chart library, TLS certificates, the Python binding's numpy)
# and plotting need. --test adds what only the tests and make fuzz use: a
# private Slurm, Open MPI and network namespaces, headless Chromium for
# the dashboard, clang for the fuzzers, valgrind. Further arguments name
# further packages (make bench: python3-torch for its PyTorch anchors).
set -e
pkgs="libnng-dev libmsgpack-dev libopenblas-dev zlib1g-dev pkg-config \
dataset-fashion-mnist gnuplot-nox libmbedtls-dev libjansson-dev openssl \
python3-numpy libjs-chart.js"
if [ "${1:-}" = --test ]; then
	shift
	pkgs="$pkgs valgrind clang libclang-rt-dev slurmd slurmctld \
slurm-client munge openmpi-bin iproute2 chromium chromium-driver \
python3-selenium fonts-dejavu-core"
fi
pkgs="$* $pkgs"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1; then
	sudo="sudo"
else
	echo "deps: missing packages:$missing; install them as root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends $missing
