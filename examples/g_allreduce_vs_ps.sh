#!/bin/sh
# (g) The seed article's own comparison: a hand-rolled asynchronous
# parameter server against synchronous data parallelism with a ring
# all-reduce (MultiWorkerMirroredStrategy-style: every worker holds the
# model, no servers) and against sync parameter servers. 4 workers,
# global batch 1024 (256 per worker), the linear rule for the
# synchronous modes (lr 0.1 x 1024/256 = 0.4, one-epoch warm-up); async
# as hand-rolled (each worker's gradient at the full 0.4) and with the lr
# matched per example (0.4 / 4), the control. The MLP by default; MODEL
# cnn runs the same on a small CNN (cnn:8,16, 3 epochs, 3 seeds: a CNN
# step costs about 20 times an MLP's here).
# With GRID=1 each mode first gets its own base rate, picked on
# validation over 2 tuning seeds from 0.025, 0.05, 0.1 and 0.2 (x 4 by
# the linear rule), and the small-batch control sgd-small (one worker at
# batch 256) joins.
#   sh examples/g_allreduce_vs_ps.sh [OUT] [more compare flags]
#   MODEL=cnn sh examples/g_allreduce_vs_ps.sh [OUT] [...]
#   GRID=1 sh examples/g_allreduce_vs_ps.sh runs/examples/g-grid
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
if [ "${MODEL:-mlp}" = cnn ]; then
	out=${1:-runs/examples/g-cnn}
	m="--model cnn:8,16 --epochs 3 --seeds 3"
else
	out=${1:-runs/examples/g}
	m="--model mlp:128 --epochs 5 --seeds 5"
fi
[ $# -gt 0 ] && shift
modes=sync,allreduce,async,async:matched-lr
[ -n "$GRID" ] && set -- --lr-grid 0.025,0.05,0.1,0.2 --tune-seeds 2 "$@" &&
	modes=$modes,sgd-small
# shellcheck disable=SC2086
exec bin/pstrain compare --modes $modes \
	--servers 2 --workers 4 $m --data fashion-mnist \
	--batch 1024 --lr 0.1 --lr-scaling linear --warmup-epochs 1 \
	--target-acc 0.8 --out "$out" "$@"
