#!/bin/sh
# scripts/demo.sh - `make demo`: the same Fashion-MNIST job in sync, async
# and bounded-staleness (ssp, s=2) mode, everything else identical, then
# the comparison table and its plots. DEMO_EPOCHS (default 3) sets the
# length; output goes to runs/demo.
set -e
cd "$(dirname "$0")/.."
epochs=${DEMO_EPOCHS:-3}
bin/pstrain compare --modes sync,async,ssp:2 --servers 2 --workers 4 \
	--model mlp:128 --data fashion-mnist --batch 256 --lr 0.1 \
	--epochs "$epochs" --seed 1 --target-acc 0.8 --out runs/demo
echo
echo "Each job's own files: runs/demo/MODE/ (summary.json, worker-R.csv, eval.csv)"
