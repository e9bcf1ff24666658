#!/bin/sh
# (f) Adam on the servers against plain SGD and momentum SGD, sync,
# 2 workers, mlp:128, batch 256, 10 epochs, each at its usual lr (SGD
# and momentum 0.1, Adam 0.001) and Adam at 0.0005. 5 seeds.
#   sh examples/f_adam_vs_sgd.sh [OUT] [more compare flags]
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/f}
[ $# -gt 0 ] && shift
exec bin/pstrain compare \
	--modes sync,sync:optimizer=momentum,sync:optimizer=adam,sync:optimizer=adam:lr=0.0005 \
	--servers 1 --workers 2 --model mlp:128 --data fashion-mnist \
	--epochs 10 --evals-per-epoch 2 --seeds 5 --target-acc 0.87 \
	--out "$out" "$@"
