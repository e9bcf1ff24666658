#!/bin/sh
# (d) Linear lr scaling with warm-up (Goyal et al. 2017): the global batch
# grows from 256 to 1024 and 2048 over the same 5 epochs. With the lr
# unchanged, the larger batch takes 4x fewer, equally long steps and falls
# behind; with lr x B/256 and a one-epoch warm-up it should hold.
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null &&
exec bin/pstrain compare \
	--modes sync:batch=256,sync:batch=1024,sync:batch=1024:lr-scaling=linear:warmup=1,sync:batch=2048,sync:batch=2048:lr-scaling=linear:warmup=1 \
	--servers 2 --workers 4 --model mlp:128 --data fashion-mnist --lr 0.1 \
	--epochs 5 --seed 1 --eval-every 10 --target-acc 0.8 --out "${1:-runs/examples/d}"
