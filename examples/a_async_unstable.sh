#!/bin/sh
# (a) A hand-rolled async parameter server with many workers and a large
# fixed learning rate is unstable, where sync with the same lr converges:
# 8 workers each apply their own gradient, so async takes 8 steps of size
# lr for every one that sync takes with the mean.
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null &&
exec bin/pstrain compare --modes sync,async --servers 2 --workers 8 \
	--model mlp:128 --data fashion-mnist --batch 256 --lr 0.5 --epochs 3 \
	--seed 1 --eval-every 39 --target-acc 0.8 --out "${1:-runs/examples/a}"
