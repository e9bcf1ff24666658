#!/bin/sh
# (h) The seed's "~40% faster" under links: the consistency models
# compared per second where bandwidth is scarce. 4 workers, each
# process on an emulated host of its own (--placement dedicated:
# network namespaces on a bridge), every host's link shaped both ways
# at each RATE of RATES ("none": the same hosts, links not shaped).
# Per rate one comparison of: sync parameter servers on 1 and on 2
# server hosts; sync with a server on every worker's host (colocated,
# S = W, BytePS's layout); async at the per-example-matched lr (2
# server hosts); and the ring all-reduce. Global batch 256, lr 0.1
# (the linear rule's base: B = 256), one-epoch warm-up. Time to the
# validation target counts from the first step (train_s_to_A);
# step_ms_median against comm_bound_ms is how far a step is from the
# bytes its busiest link must carry. Needs root or unprivileged user
# namespaces (the emulated hosts are network namespaces).
#   sh examples/h_links.sh [OUT] [more compare flags]
# MODEL=cnn runs cnn:32,64/1024 (two conv layers and a dense layer of
# 1024: 3.27M parameters, 13 MB) instead, timed to validation accuracy
# 0.7, which it passes by step 320 in every seed (0.8 for the MLP).
# STEPS=N runs N steps instead of EPOCHS (2) epochs.
#   MODEL=cnn RATES="1gbit 100mbit" SEEDS=3 sh examples/h_links.sh
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null || exit 1
out=${1:-runs/examples/h}
[ $# -gt 0 ] && shift
if [ "${MODEL:-mlp}" = cnn ]; then
	m="--model cnn:32,64/1024 --target-acc 0.7"
else
	m="--model mlp:1024,1024 --target-acc 0.8"
fi
len="--epochs ${EPOCHS:-2}"
[ -n "${STEPS:-}" ] && len="--steps $STEPS"
for rate in ${RATES:-none 1gbit 100mbit}; do
	link=""
	[ "$rate" = none ] || link="--link $rate"
	# shellcheck disable=SC2086
	bin/pstrain compare --modes "sync,sync:servers=2,sync:servers=4:placement=colocated,async:servers=2:matched-lr,allreduce" \
		--placement dedicated $link --servers 1 --workers 4 $m \
		--data fashion-mnist --batch 256 --lr 0.1 --warmup-epochs 1 \
		$len --seeds "${SEEDS:-5}" \
		--out "$out/$rate" "$@" || exit 1
done
