#!/bin/sh
# scripts/demo.sh - `make demo`: the same Fashion-MNIST job in sync, async
# (at the same lr, and with the lr matched per example: --matched-lr)
# and bounded-staleness (ssp, s=2) mode, everything else identical, three
# seeds each, then the comparison table (mean ± sd over the seeds) and
# its plots. DEMO_EPOCHS (default 3) and DEMO_SEEDS (default 3) set the
# size; output goes to runs/demo, replacing an earlier demo.
set -e
cd "$(dirname "$0")/.."
epochs=${DEMO_EPOCHS:-3}
seeds=${DEMO_SEEDS:-3}
bin/pstrain compare --modes sync,async,async:matched-lr,ssp:2 --servers 2 --workers 4 \
	--model mlp:128 --data fashion-mnist --batch 256 --lr 0.1 \
	--epochs "$epochs" --seeds "$seeds" --target-acc 0.8 --force \
	--out runs/demo
echo
echo "Each job's own files: runs/demo/MODE/seed-S/ (summary.json, worker-R.csv, eval.csv)"
