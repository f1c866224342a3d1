#!/usr/bin/env bash
# The GPU step-cost table (docs/lab/gpu.md section 2) in calls of at most 10 minutes on an offline
# H200 host. Call 1 (payload part 1): `mkdir -p /root/gpu-stage && cp .gpu/p1/* /root/gpu-stage/`.
# Then this script, with .gpu/p2 and the tuner's missing wheels (.whl) carried; every later call
# runs it again and goes on where the last one stopped (results kept in /root/step between calls
# on a warm host, and copied to $OUT each time).
set -uo pipefail
mkdir -p /root/step/logs
if [ ! -f /root/gpu-env.sh ]; then
    bash .gpu/p2/setup.sh > /root/step/logs/setup.log 2>&1 || { tail -30 /root/step/logs/setup.log; exit 1; }
fi
. /root/gpu-env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH="$PWD:/tmp/site:$PYTHONPATH" PYTHONUNBUFFERED=1
if [ ! -f /root/models/eagle3-8b/config.json ]; then
    python3 /root/gpu-stage/mkmodel.py /root/models > /root/step/logs/mkmodel.log 2>&1 || { tail -20 /root/step/logs/mkmodel.log; exit 1; }
    python3 benchmarks/gpu_models.py /root/models 2>&1 | tee -a /root/step/logs/mkmodel.log || exit 1
    for m in /root/models/*/; do cp "$m/config.json" "/root/step/logs/config-$(basename "$m").json"; done
fi
timeout "${STEP_S:-570}" python3 benchmarks/gpu_step_cost.py --target /root/models/target \
    --server-cmd "python3 -m vllm.entrypoints.cli.main serve {model}" --inproc \
    --drafter eagle3=/root/models/eagle3-8b --drafter draft_model=/root/models/draft \
    --drafter draft_model=/root/models/draft-250m --k "${KS:-1,2,4,8}" --concurrency 1,8,32 \
    --repeats 2 --requests 32 --max-tokens 48 --budget-s "${BUDGET_S:-440}" \
    --resume /root/step/gpu-step-cost.json --out-dir /root/step 2>&1 | tee -a /root/step/step-cost.log
cp /root/step/*.json /root/step/step-cost.log "$OUT/"  # 4 tables and the log
(cd /root/step && tar czf "$OUT/logs.tgz" logs)       # server logs, setup, the models' configs
