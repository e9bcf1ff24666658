#!/bin/sh
# tests/load.sh [COMMAND...] - run COMMAND (by default the whole suite,
# sh tests/run.sh) while HOGS busy loops (2 unless told) keep the cores
# busy, as on a shared CI machine: make test-under-load. Each loop is
# bounded by `timeout` (HOG_LIMIT_S, an hour), and all are ended when
# COMMAND ends or is interrupted. Exits with COMMAND's status; its last
# line is COMMAND's.
cd "$(dirname "$0")/.." || exit 2
HOGS=${HOGS:-2}
HOG_LIMIT_S=${HOG_LIMIT_S:-3600}
[ $# -gt 0 ] || set -- sh tests/run.sh
hogs=""
stop() {
	# shellcheck disable=SC2086
	[ -n "$hogs" ] && kill $hogs 2>/dev/null
	hogs=""
}
trap 'stop; exit 130' INT TERM
trap stop EXIT
i=0
while [ "$i" -lt "$HOGS" ]; do
	timeout "$HOG_LIMIT_S" sh -c 'while :; do :; done' &
	hogs="$hogs $!"
	i=$((i + 1))
done
echo "load: $HOGS busy loops on $(nproc) cores (pids$hogs), for at most $HOG_LIMIT_S s"
"$@"
rc=$?
stop
exit $rc
