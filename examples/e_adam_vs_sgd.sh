#!/bin/sh
# (e) The servers' optimizer: Adam against plain SGD on the same sync
# job (2 servers, 4 workers, mlp:256,128, global batch 256, 20 epochs).
# SGD runs at lr 0.1, Adam at its usual 0.001 and at 0.0005. The report's
# steps_to_0.88 says how soon each reaches 88% test accuracy.
cd "$(dirname "$0")/.." && make -s bin/pstrain >/dev/null &&
exec bin/pstrain compare \
	--modes sync,sync:optimizer=adam,sync:optimizer=adam:lr=0.0005 \
	--servers 2 --workers 4 --model mlp:256,128 --data fashion-mnist \
	--epochs 20 --seed 1 --target-acc 0.88 --out "${1:-runs/examples/e}"
