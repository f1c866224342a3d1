#!/usr/bin/env bash
# Issue 47 on an offline GPU host with vLLM 0.26.0 (no per-request counts there: the streams only):
# do the replay's streams still show one engine step per chunk at concurrency 8 and 32, so that
# tokens per chunk is the acceptance length, and does what they add up to agree with /metrics?
# `tuner optimize` over the baseline and eagle3 k=2 and k=4 at the published EAGLE-3 acceptance
# profile (--synthetic-acceptance), the code workload's requests at 128 tokens each (all 48 of
# them: the [:96] below takes what there is) at concurrency 1, 8, 32, then
# benchmarks/gpu_acceptance_table.py prints each replay's streams against its /metrics.
#
# Call 1 (carry .gpu/p1): `mkdir -p /root/gpu-stage && cp .gpu/p1/* /root/gpu-stage/`.
# Call 2 (carry .gpu/p3): `mkdir -p /root/p3stage && cp .gpu/p3/* /root/p3stage/`.
# Call 3 (carry .gpu/p2): `bash benchmarks/gpu_acceptance.sh`; later calls, carrying nothing, the
# same command: the study resumes where the call's limit cut it.
DEFAULT_DEADLINE_S=560 RUN_EXCLUDE=('*.safetensors')
. "$(dirname "$0")/gpu_calls.sh"

if ! is_done install; then
    if [ ! -d .gpu/p3 ] && [ -d /root/p3stage ]; then mkdir -p .gpu/p3 && cp /root/p3stage/* .gpu/p3/; fi
    bash .gpu/p2/setup.sh > "$R/logs/setup.log" 2>&1 || { tail -30 "$R/logs/setup.log"; exit 1; }
    tail -3 "$R/logs/setup.log"
    done_ install
fi
. /root/gpu-env.sh
export PYTHONUNBUFFERED=1
if ! is_done models; then
    python3 /root/gpu-stage/mkmodel.py /root/models > "$R/logs/mkmodel.log" 2>&1 || { tail -20 "$R/logs/mkmodel.log"; exit 1; }
    python3 benchmarks/gpu_models.py /root/models >> "$R/logs/mkmodel.log" 2>&1 || { tail -20 "$R/logs/mkmodel.log"; exit 1; }
    done_ models
fi
SERVE="python3 -m vllm.entrypoints.cli.main serve {model}"
PROFILE=0.74,0.54,0.41,0.31,0.23,0.17,0.13,0.10  # EAGLE-3 on Llama-3.1-8B, vllm#26191 (docs/lab/gpu.md)
python3 - <<'EOF'
import json
lines = open("workloads/code.jsonl").read().splitlines()[:96]
with open("/root/run/code96.jsonl", "w") as out:
    for line in lines:
        r = json.loads(line); r["max_tokens"] = r["output_tokens"] = 128
        out.write(json.dumps(r) + "\n")
EOF

if ! is_done study && [ "$(left)" -gt 120 ]; then
    timeout -s TERM "$(( $(left) - 30 ))" tuner optimize --workload "$R/code96.jsonl" \
        --model /root/models/target --name "gpu streams" --server-cmd "$SERVE" \
        --server-arg=--load-format=dummy --server-arg=--max-model-len=4096 \
        --method eagle3 --draft eagle3=/root/models/eagle3-8b --k 2,4 --strategy grid \
        --concurrency 1,8,32 --synthetic-acceptance "$PROFILE" --warmup 4 --gpus 0 \
        --db "sqlite:///$R/tuner.db" --log-dir "$R/logs" --no-warm-start \
        > "$R/optimize.txt" 2> "$R/optimize-progress.log"
    rc=$?
    echo "optimize rc=$rc"; tail -30 "$R/optimize.txt"
    [ "$rc" = 0 ] && done_ study
fi
if is_done study; then
    python3 benchmarks/gpu_acceptance_table.py "sqlite:///$R/tuner.db" | tee "$R/streams.txt"
fi
