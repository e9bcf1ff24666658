#!/bin/sh
# (b) Staleness-aware learning rate (Zhang et al. 2016): the same unstable
# async job as (a), once more with each gradient's lr divided by its
# staleness.
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null &&
exec bin/pstrain compare --modes sync,async,async:staleness-lr \
	--servers 2 --workers 8 --model mlp:128 --data fashion-mnist \
	--batch 256 --lr 0.5 --epochs 3 --seed 1 --eval-every 39 --target-acc 0.8 \
	--out "${1:-runs/examples/b}"
