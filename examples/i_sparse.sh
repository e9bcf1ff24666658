#!/bin/sh
# (i) Sparse embedding tables: does asynchrony do little harm on sparse
# problems, as Hogwild! (Niu et al. 2011) and Downpour found? Seeded
# click sets (8 fields of 200 ids, 1M examples) whose labels come from a
# planted model, so the best AUC any model can reach is known
# (planted_auc); 4 workers, 2 servers, Adagrad (the usual optimizer of
# click models), batch 512, 3 epochs, final parameters (no selection).
#  1. Can the models reach the plant? Logistic regression on a linear
#     plant (ctr:...,0), sync and async at the per-example-matched rate
#     (each worker's gradient at lr / W), 5 seeds.
#  2. fm:4 on a plant of 4 factors at Zipf skew 1.1 (5 seeds) and 1.6
#     (SEEDS2, 3; the more skewed, the more often workers share the head
#     rows): sync, async and ssp (bound 2) at the matched rate, and
#     hybrid (rows async, the bias sync, each worker's rows at 1/W).
# report.md gives each mode's final test AUC beside the planted one,
# the rows a step touches and pulls, row staleness and throughput.
#   sh examples/i_sparse.sh [OUT] [more compare flags]
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/i}
[ $# -gt 0 ] && shift
d="${N:-1000000},8,${V:-200},7"
common="--servers 2 --workers 4 --optimizer adagrad --batch 512 \
	--lr ${LR:-0.1} --epochs ${EPOCHS:-3} --target-acc 0.7 $*"
# shellcheck disable=SC2086
bin/pstrain compare --modes sync,async:matched-lr --model lr \
	--data "ctr:$d,1.1,0" --seeds "${SEEDS:-5}" $common \
	--out "$out/plant-lr" || exit 1
for skew in 1.1 1.6; do
	seeds=${SEEDS:-5}
	[ "$skew" = 1.6 ] && seeds=${SEEDS2:-3}
	# shellcheck disable=SC2086
	bin/pstrain compare --modes sync,async:matched-lr,ssp:2:matched-lr,hybrid \
		--model fm:4 --data "ctr:$d,$skew,4" --seeds "$seeds" $common \
		--out "$out/fm-skew-$skew" || exit 1
done
