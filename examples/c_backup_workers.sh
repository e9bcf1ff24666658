#!/bin/sh
# (c) Chen et al. 2016, "Revisiting distributed synchronous SGD": 6
# workers, each delayed every step by a seeded exponential draw of mean
# 10 ms; sync steps close with the first 6 - b gradients, b = 0, 1, 2
# backup workers (the machines stay 6, as in the paper's fixed N + b).
# Time to 0.8 validation accuracy against b. 3 epochs, 5 seeds.
#   sh examples/c_backup_workers.sh [OUT] [more compare flags]
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/c}
[ $# -gt 0 ] && shift
exec bin/pstrain compare --modes sync,sync:backup=1,sync:backup=2 \
	--servers 2 --workers 6 --model mlp:128 --data fashion-mnist \
	--batch 384 --lr 0.3 --epochs 3 --delay exp:10 --seeds 5 \
	--target-acc 0.8 --out "$out" "$@"
