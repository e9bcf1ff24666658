#!/bin/sh
# scripts/demo.sh - `make demo`: the same Fashion-MNIST job in sync and in
# async mode, one flag apart, and their summaries side by side.
# DEMO_EPOCHS (default 5) sets the length; output goes to runs/demo-*.
set -e
cd "$(dirname "$0")/.."
epochs=${DEMO_EPOCHS:-5}
common="--servers 2 --workers 4 --model mlp:128 --data fashion-mnist \
--batch 256 --lr 0.1 --epochs $epochs --seed 1"
for mode in sync async; do
	echo "== pstrain run --mode $mode $common --out runs/demo-$mode"
	bin/pstrain run --mode $mode $common --out runs/demo-$mode \
		--save-model runs/demo-$mode/model.bin
	echo
done
key() { sed -n "s/^ *\"$1\": \"*\([^\",]*\)\"*,*$/\1/p" "$2"; }
printf '%-18s %14s %14s\n' "" sync async
for k in mode servers workers per_worker_batch steps wall_s samples_per_s \
	final_train_loss final_test_loss final_test_acc; do
	printf '%-18s %14s %14s\n' "$k" "$(key $k runs/demo-sync/summary.json)" \
		"$(key $k runs/demo-async/summary.json)"
done
echo
echo "Per-step logs: runs/demo-{sync,async}/worker-R.csv; test curve: eval.csv"
