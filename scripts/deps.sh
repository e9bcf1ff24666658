#!/bin/sh
# scripts/deps.sh - install the Debian packages pstrain needs, once.
# Does nothing when every package is already installed. Arguments name
# further packages (make bench: python3-torch for its PyTorch anchors).
set -e
pkgs="$* libnng-dev libmsgpack-dev libopenblas-dev zlib1g-dev pkg-config \
dataset-fashion-mnist gnuplot-nox valgrind libmbedtls-dev clang libclang-rt-dev \
openssl python3-numpy libjansson-dev slurmd slurmctld slurm-client munge \
openmpi-bin iproute2 libjs-chart.js chromium chromium-driver python3-selenium \
fonts-dejavu-core"
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
