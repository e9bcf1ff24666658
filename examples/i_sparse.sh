#!/bin/sh
# (i) Sparse embedding tables: does asynchrony do little harm on sparse
# problems, as Hogwild! (Niu et al. 2011) and Downpour found? Seeded
# click sets whose labels come from a planted model, so the best AUC any
# model can reach is known (planted_auc); 4 workers, 2 servers, Adagrad
# (the usual optimizer of click models), final parameters (no
# selection), 5 seeds.
#  1. Can the models reach the plant? Logistic regression on a linear
#     plant (ctr:...,0) and fm:4 on a plant of 4 factors, sync and
#     async at the per-example-matched rate (each worker's gradient at
#     lr / W).
#  2. The async penalty against skew: fm:8 on 16 fields at Zipf skews
#     1.1 and 1.6 (the more skewed, the more workers share the head
#     rows), sync, async and ssp (bound 2) at the matched rate, and
#     hybrid (rows async, the bias sync, each worker's rows at 1/W).
# report.md gives each mode's final test AUC beside the planted one,
# the rows a step touches and pulls, row staleness and throughput.
#   sh examples/i_sparse.sh [OUT] [more compare flags]
#   N=500000 SEEDS=5 sh examples/i_sparse.sh runs/examples/i
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/i}
[ $# -gt 0 ] && shift
common="--servers 2 --workers 4 --optimizer adagrad --batch 512 \
	--seeds ${SEEDS:-5} --target-acc 0.7 $*"
for m in "lr ${N:-500000},8,1000,7,1.1,0" "fm:4 ${N:-500000},8,1000,7,1.1,4"; do
	set -- $m
	# shellcheck disable=SC2086
	bin/pstrain compare --modes sync,async:matched-lr --model "$1" \
		--data "ctr:$2" --lr "${LR:-0.1}" --epochs "${EPOCHS:-3}" \
		$common --out "$out/plant-${1%%:*}" || exit 1
done
for skew in ${SKEWS:-1.1 1.6}; do
	# shellcheck disable=SC2086
	bin/pstrain compare --modes sync,async:matched-lr,ssp:2:matched-lr,hybrid \
		--model fm:8 --data "ctr:${N2:-200000},16,${V:-50000},7,$skew" \
		--lr "${LR:-0.1}" --epochs "${EPOCHS:-3}" $common \
		--out "$out/skew-$skew" || exit 1
done
