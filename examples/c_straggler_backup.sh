#!/bin/sh
# (c) A straggler (worker 3 sleeps 50 ms every step) slows sync much more
# than async; one backup worker gives sync its speed back (Chen et al.
# 2016).
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null &&
exec bin/pstrain compare --modes sync,async,sync:backup=1 --servers 2 \
	--workers 4 --model mlp:128 --data fashion-mnist --batch 256 --lr 0.1 \
	--epochs 2 --seed 1 --straggler 3:50 --eval-every 39 \
	--target-acc 0.8 \
	--out "${1:-runs/examples/c}"
