#!/bin/sh
# (e) The claim pstrain started from: a hand-rolled async parameter
# server can oscillate or fail to converge where sync with the linear
# lr rule (lr = 0.1 x B/256 with a one-epoch warm-up) converges
# smoothly. 8 workers, global batch 1024 (128 per worker), lr 0.4 after
# scaling: sync; async as hand-rolled (each worker's gradient at the
# full 0.4); and async with the lr matched per example (0.4 / 8), the
# control that separates staleness from step size. 5 epochs, 5 seeds.
# With GRID=1 each mode first gets its own base rate, picked on
# validation over 2 tuning seeds from 0.025, 0.05, 0.1 and 0.2 (x 4 by
# the linear rule), and the small-batch control sgd-small (one worker at
# batch 128) joins: what async at the matched lr owes to small batches.
# GRID=auto picks the rates by --lr-grid auto instead (0.05, 0.1 and
# 0.2, then a factor of 2 further past whichever end the best is at).
#   sh examples/e_seed_claim.sh [OUT] [more compare flags]
#   GRID=1 sh examples/e_seed_claim.sh runs/examples/e-grid
#   GRID=auto sh examples/e_seed_claim.sh runs/examples/e-auto
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/e}
[ $# -gt 0 ] && shift
modes=sync,async,async:matched-lr
grid=0.025,0.05,0.1,0.2
[ "$GRID" = auto ] && grid=auto
[ -n "$GRID" ] && set -- --lr-grid $grid --tune-seeds 2 "$@" &&
	modes=$modes,sgd-small
exec bin/pstrain compare --modes $modes \
	--servers 2 --workers 8 --model mlp:128 --data fashion-mnist \
	--batch 1024 --lr 0.1 --lr-scaling linear --warmup-epochs 1 \
	--epochs 5 --seeds 5 --target-acc 0.8 --out "$out" "$@"
