#!/bin/sh
# (d) Goyal et al. 2017, "Accurate, large minibatch SGD": momentum 0.9,
# base lr 0.1 per 256 examples, a 5-epoch gradual warm-up, 30 epochs,
# global batch 256 to 8192, with the linear scaling rule (lr x B/256) and
# without it (lr 0.1 at every batch). Sync, so the number of workers
# does not change the result: 2 workers, 1 server, 2 evaluations per
# epoch to keep 45 jobs affordable. 5 seeds.
#   sh examples/d_lr_scaling.sh [OUT] [more compare flags]
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/d}
[ $# -gt 0 ] && shift
m=sync:batch=256
for b in 1024 2048 4096 8192; do
	m="$m,sync:batch=$b,sync:batch=$b:lr-scaling=linear"
done
exec bin/pstrain compare --modes "$m" --servers 1 --workers 2 \
	--model mlp:128 --data fashion-mnist --optimizer momentum:0.9 \
	--lr 0.1 --warmup-epochs 5 --epochs 30 --evals-per-epoch 2 --seeds 5 \
	--target-acc 0.85 --out "$out" "$@"
