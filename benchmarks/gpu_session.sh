#!/usr/bin/env bash
# The GPU runs behind docs/lab/gpu.md, as one command on an offline H200 host that already holds
# ../shared/gpu's payload part 1 in /root/gpu-stage (call 1: `mkdir -p /root/gpu-stage && cp
# .gpu/p1/* /root/gpu-stage/`). This is call 2, with .gpu/p2 and the tuner's missing wheels (.whl)
# beside the checkout; everything it measures goes to $OUT.
set -uo pipefail
bash .gpu/p2/setup.sh > "$OUT/setup.log" 2>&1 || { tail -30 "$OUT/setup.log"; exit 1; }
. /root/gpu-env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="$PWD:/tmp/site:$PYTHONPATH" PYTHONUNBUFFERED=1  # the checkout: benchmarks import tuner
python3 /root/gpu-stage/mkmodel.py /root/models > "$OUT/mkmodel.log" 2>&1 || { tail -20 "$OUT/mkmodel.log"; exit 1; }
SERVE="python3 -m vllm.entrypoints.cli.main serve {model}"
# Start cost, in the order the host's caches see it: the first start compiles (cold cache), the
# second reuses the compile cache; then CUDA graphs only for the replay's batch sizes (a new
# compile-cache key, so twice), and the engine core in the API server's process.
timeout "${START_COST_S:-560}" python3 benchmarks/gpu_start_cost.py --model /root/models/target \
    --server-cmd "$SERVE" --out "$OUT/gpu-start-cost.json" \
    --variant default --variant default+debug --variant graphs=1,2,4 --variant graphs=1,2,4 \
    --variant graphs=1,2,4+inproc --variant default+inproc 2>&1 | tee "$OUT/start-cost.log"
cp /root/models/target/config.json "$OUT/target-config.json"
(cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
