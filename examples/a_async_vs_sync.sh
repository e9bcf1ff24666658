#!/bin/sh
# (a) Zhang et al. 2016, "Staleness-aware async-SGD": sync against async at
# the same --lr, async with the lr matched per example (--matched-lr: each
# gradient at lr / W, so async moves the parameters as far per example
# as sync), and async with lr / staleness; W = 4, 8 and 16 workers, 5
# seeds each. lr 0.5 is large on purpose: the seed claim is that a
# hand-rolled async parameter server with a large fixed lr fails where
# sync converges. 3 epochs: enough for sync to pass 0.8 and for async to
# have collapsed or not. Then the control for async with matched lr,
# whose updates carry B/W examples at lr / W: plain SGD with batch B/W at
# lr / W (one worker, sync: the same SGD as any number of workers), so
# that what async gains or loses beyond small-batch SGD shows.
# With GRID=1 each mode first gets its own rate, picked on validation
# over 2 tuning seeds by --lr-grid auto (0.25, 0.5 and 1, then a factor
# of 2 further past whichever end the best is at, until it is inside);
# the small-batch control joins each W as the mode sgd-small (one worker
# at batch B/W, lr / W, its rate picked like the others'), and a job
# whose final training accuracy is under 0.5 counts as collapsed.
#   sh examples/a_async_vs_sync.sh [OUT] [more compare flags, e.g. --force]
#   GRID=1 sh examples/a_async_vs_sync.sh runs/examples/a-grid
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/a}
[ $# -gt 0 ] && shift
modes=sync,async,async:matched-lr,async:staleness-lr
[ -n "$GRID" ] && set -- --lr-grid auto --tune-seeds 2 --acc-floor 0.5 "$@" &&
	modes=$modes,sgd-small
for w in 4 8 16; do
	bin/pstrain compare --modes $modes \
		--servers 2 --workers $w --model mlp:128 --data fashion-mnist \
		--batch 256 --lr 0.5 --epochs 3 --seeds 5 --target-acc 0.8 \
		--out "$out/w$w" "$@" || exit 1
done
[ -n "$GRID" ] && exit 0 # sgd-small was the control
bin/pstrain compare \
	--modes sync:batch=64:lr=0.125,sync:batch=32:lr=0.0625,sync:batch=16:lr=0.03125 \
	--servers 1 --workers 1 --model mlp:128 --data fashion-mnist \
	--epochs 3 --seeds 5 --target-acc 0.8 --out "$out/small-batch" "$@"
