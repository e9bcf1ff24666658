#!/bin/sh
# scripts/deps.sh [--test] [PKG...] - install the Debian packages pstrain
# needs, once. Does nothing when every package is already installed.
# Without --test: what building pstrain, running it (make demo, the
# dashboard's chart library, TLS certificates, the Python package's NumPy,
# pip and venv) and plotting need. --test adds what only the tests and
# make fuzz use: a private Slurm, Open MPI and network namespaces,
# headless Chromium for the dashboard, clang for the fuzzers, valgrind,
# PyTorch for the torch bridge. Further arguments name further packages.
set -e
pkgs="libnng-dev libmsgpack-dev libopenblas-dev zlib1g-dev pkg-config \
dataset-fashion-mnist gnuplot-nox libmbedtls-dev libjansson-dev openssl \
python3-numpy python3-pip python3-venv libjs-chart.js"
if [ "${1:-}" = --test ]; then
	shift
	pkgs="$pkgs valgrind clang libclang-rt-dev slurmd slurmctld \
slurm-client munge openmpi-bin iproute2 procps chromium chromium-driver \
python3-selenium fonts-dejavu-core python3-torch"
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

# Nothing already installed is upgraded. apt would upgrade an installed
# library when a new package of the same source wants its exact version
# (libevent-pthreads-2.1-7 from the security archive pulls the
# libevent-core-2.1-7 already installed up to it): such a new package is
# asked for at the installed sibling's version instead, when the archive
# still has it, and the installed one is held where it is.

# simulate ARGS: apt-get's plan for installing ARGS, into $plan; fails
# when apt-get finds none.
simulate() {
	plan=$(apt-get -s install --no-install-recommends "$@" 2>/dev/null)
}
# upgrades: "PACKAGE INSTALLED-VERSION" for each installed package that
# $plan upgrades; news: the packages it adds.
upgrades() { echo "$plan" | sed -n 's/^Inst \([^ ]*\) \[\([^]]*\)\].*/\1 \2/p'; }
news() { echo "$plan" | sed -n 's/^Inst \([^ ]*\) (.*/\1/p'; }
# source_of PACKAGE: the name of its source package.
source_of() {
	s=$(apt-cache show --no-all-versions "$1" 2>/dev/null |
		sed -n 's/^Source: \([^ ]*\).*/\1/p' | head -n 1)
	echo "${s:-$1}"
}
# has_version PACKAGE VERSION: the archive holds that version.
has_version() {
	apt-cache madison "$1" 2>/dev/null |
		awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | grep -qxF "$2"
}
want=$missing
# shellcheck disable=SC2086
simulate $want
up=$(upgrades)
if [ -n "$up" ]; then
	added=$(news)
	pins=$(echo "$up" | while read -r pkg ver; do
		src=$(dpkg-query -W -f='${source:Package}' "$pkg" 2>/dev/null)
		echo "$pkg=$ver"
		for n in $added; do
			[ "$(source_of "$n")" = "${src:-$pkg}" ] &&
				has_version "$n" "$ver" && echo "$n=$ver"
		done
	done | tr '\n' ' ')
	# shellcheck disable=SC2086
	if simulate $want $pins && [ -z "$(upgrades)" ]; then
		want="$want $pins"
	else
		echo "deps: installing$missing upgrades what is installed:" \
			"$(echo "$up" | tr '\n' ' ')(no older version to match)"
	fi
fi
# shellcheck disable=SC2086
$sudo apt-get install -y -q --no-install-recommends $want
