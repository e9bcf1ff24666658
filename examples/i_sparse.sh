#!/bin/sh
# (i) Sparse embedding tables: does asynchrony do little harm on sparse
# problems, as Hogwild! (Niu et al. 2011) and Downpour found? Seeded
# click sets (8 fields of 200 ids, 1M examples) whose labels come from a
# planted model, so the best AUC any model can reach is known
# (planted_auc), and Fashion-MNIST as hashed ids; 4 workers, 2 servers,
# batch 512, 3 epochs, final parameters (no selection). Every run is
# SEEDS (5) seeds.
#  1. Can the models reach the plant? Logistic regression on a linear
#     plant (ctr:...,0), Adagrad at 0.1: sync; async with each push at
#     the sync step's rate (`async`: Adagrad divides each row's step by
#     the root of its own squared gradients, so a gradient's scale, the
#     mean of 128 examples or of 512, does not set the step); async at
#     the rate matched for SGD (`async:matched-lr`, lr / W a push).
#  2. fm:4 on a plant of 4 factors at Zipf skew 1.1 and 1.6 (the more
#     skewed, the more often workers share the head rows), Adagrad at
#     0.1: sync, async, async:matched-lr, ssp (bound 2), and hybrid
#     (rows async, each worker's gradient / W; the bias sync).
#  3. The SGD control, skew 1.1: sync and async at the matched rate
#     under plain SGD at 4 (picked on validation AUC of a tuning seed
#     among 1, 2, 4, 8), where lr / W is the per-example match.
#  4. fashion-mnist:hashed (real data, its own skew), 10 classes:
#     softmax regression (lr, Adagrad 0.03) and wide-deep:8,64 (Adagrad
#     0.01), each rate picked on validation accuracy of a tuning seed
#     among 0.01, 0.03, 0.1, under the five modes of 2.
# Each folder's report.md gives each mode's final test AUC (accuracy on
# Fashion-MNIST) beside the planted AUC, the rows a step touches and
# pulls, row staleness and throughput.
#   sh examples/i_sparse.sh [OUT] [more compare flags]
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/i}
[ $# -gt 0 ] && shift
d="${N:-1000000},8,${V:-200},7"
seeds=${SEEDS:-5}
common="--servers 2 --workers 4 --batch 512 --epochs ${EPOCHS:-3} \
	--seeds $seeds $*"
five="sync,async,async:matched-lr,ssp:2,hybrid"
# shellcheck disable=SC2086
bin/pstrain compare --modes sync,async,async:matched-lr --model lr \
	--data "ctr:$d,1.1,0" --optimizer adagrad --lr 0.1 --target-acc 0.7 \
	$common --out "$out/plant-lr" || exit 1
for skew in 1.1 1.6; do
	# shellcheck disable=SC2086
	bin/pstrain compare --modes "$five" --model fm:4 \
		--data "ctr:$d,$skew,4" --optimizer adagrad --lr 0.1 \
		--target-acc 0.7 $common --out "$out/fm-skew-$skew" || exit 1
done
# shellcheck disable=SC2086
bin/pstrain compare --modes sync,async:matched-lr --model fm:4 \
	--data "ctr:$d,1.1,4" --optimizer sgd --lr 4 --target-acc 0.7 \
	$common --out "$out/fm-sgd" || exit 1
for m in "lr 0.03" "wide-deep:8,64 0.01"; do
	set -- $m
	# shellcheck disable=SC2086
	bin/pstrain compare --modes "$five" --model "$1" \
		--data fashion-mnist:hashed --optimizer adagrad --lr "$2" \
		--target-acc 0.8 $common --out "$out/hashed-${1%%:*}" || exit 1
done
