#!/bin/sh
# (b) Li et al. OSDI'14, bounded delay: ssp with staleness 0, 1, 2, 4 and
# 8, and unbounded async, 8 workers, every worker delayed each step by a
# seeded exponential draw of mean 5 ms (a long right tail: most steps
# fast, some several times slower), lr matched per example so that
# staleness is the one thing that changes. Accuracy against wall time,
# and the idle fraction the bound costs. 2 epochs, 5 seeds.
#   sh examples/b_bounded_delay.sh [OUT] [more compare flags]
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/b}
[ $# -gt 0 ] && shift
exec bin/pstrain compare \
	--modes ssp:0:matched-lr,ssp:1:matched-lr,ssp:2:matched-lr,ssp:4:matched-lr,ssp:8:matched-lr,async:matched-lr \
	--servers 2 --workers 8 --model mlp:128 --data fashion-mnist \
	--batch 256 --lr 0.5 --epochs 2 --delay exp:5 --seeds 5 \
	--target-acc 0.8 --out "$out" "$@"
