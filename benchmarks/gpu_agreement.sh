#!/usr/bin/env bash
# On an offline H200 host, in calls of at most 10 minutes (docs/lab/gpu.md, "Agreement with vllm bench
# serve" and "An answer in ten minutes"): the install from deploy/offline-gpu alone, the models,
# then the tuner against `vllm bench serve` on the same server and requests (benchmarks/gpu_agreement.py),
# then `tuner optimize` with the default search over every method, timed.
#
# Call 1 (payload part 1, carry .gpu/p1): `mkdir -p /root/gpu-stage && cp .gpu/p1/* /root/gpu-stage/`.
# Call 2 (carry .gpu/p3; the checkout with parts 2 and 3 together passes the 64 MiB of one upload):
# `mkdir -p /root/p3stage && cp .gpu/p3/* /root/p3stage/`. Call 3 carries .gpu/p2:
# `bash benchmarks/gpu_agreement.sh` (it puts part 3 back beside part 2); later calls carry nothing.
# Each call goes on where the last stopped (state in /root/run on a warm host) and copies what it
# has to $OUT.
# DEADLINE_S: seconds this call may use. STEPS: which steps, in order.
DEFAULT_DEADLINE_S=560 RUN_EXCLUDE=('*.safetensors')
. "$(dirname "$0")/gpu_calls.sh"

if ! is_done install; then  # the steps of docs/lab/gpu.md, "Installing offline", and nothing else
    if [ ! -d .gpu/p3 ] && [ -d /root/p3stage ]; then mkdir -p .gpu/p3 && cp /root/p3stage/* .gpu/p3/; fi
    bash .gpu/p2/setup.sh > "$R/logs/setup.log" 2>&1 || { tail -30 "$R/logs/setup.log"; exit 1; }
    tail -4 "$R/logs/setup.log"
    done_ install
fi
. /root/gpu-env.sh
export PYTHONUNBUFFERED=1
command -v tuner > /dev/null || { echo "no tuner command after setup.sh"; exit 1; }
if ! is_done models; then
    python3 /root/gpu-stage/mkmodel.py /root/models > "$R/logs/mkmodel.log" 2>&1 || { tail -20 "$R/logs/mkmodel.log"; exit 1; }
    python3 benchmarks/gpu_models.py /root/models >> "$R/logs/mkmodel.log" 2>&1 || { tail -20 "$R/logs/mkmodel.log"; exit 1; }
    tail -5 "$R/logs/mkmodel.log"
    done_ models
fi
SERVE="python3 -m vllm.entrypoints.cli.main serve {model}"
PROFILE=0.74,0.54,0.41,0.31,0.23,0.17,0.13,0.10  # EAGLE-3 on Llama-3.1-8B, vllm#26191 (docs/lab/gpu.md)
STEPS=" ${STEPS:-agreement studies} "
E3=/root/models/eagle3-8b
EAGLE3_CONFIGS=()  # the eagle3 k the agreement steps compare with the baseline (AGREE_KS: other ones)
for k in ${AGREE_KS:-2 3 4}; do
    EAGLE3_CONFIGS+=(--config "eagle3 k=$k={\"method\": \"eagle3\", \"model\": \"$E3\", \"num_speculative_tokens\": $k}")
done

# agree STEP OUT LOADS REQUESTS ROUNDS [FLAG...]: gpu_agreement.py over the baseline and the configs
# in CONFIGS at LOADS (its --concurrency) with REQUESTS per load (its --requests), FLAGs its own;
# the step is done once every config is in OUT. A call starts no new config in its last 200 s.
agree() {
    local step=$1 out=$R/$2 loads=$3 requests=$4 rounds=$5
    shift 5
    wants "$step" && ! is_done "$step" && [ "$(left)" -gt 150 ] || return 0
    timeout -s TERM "$(( $(left) - 20 ))" python3 benchmarks/gpu_agreement.py --model /root/models/target \
        --server-cmd "$SERVE" --server-arg=--load-format=dummy --server-arg=--max-model-len=4096 \
        --synthetic-acceptance "$PROFILE" --concurrency "$loads" --requests "$requests" --rounds "$rounds" \
        "$@" "${CONFIGS[@]}" --out "$out" --log-dir "$R/logs" --deadline-s "$(( $(left) - 200 ))" 2>&1 \
        | tee -a "$R/$step.log" | grep -v '^\s*$' | tail -40
    python3 -c "import json, sys; sys.exit(0 if len(json.load(open('$out'))['configs']) == $(( ${#CONFIGS[@]} / 2 + 1 )) else 1)" \
        2>/dev/null && done_ "$step"
}
CONFIGS=("${EAGLE3_CONFIGS[@]}")
# The first check, every load with a short warm-up (docs/lab/gpu.md section 7, first table).
agree agreement gpu-agreement.json 1,8,32 1=16,8=64,32=192 2
# Every load, each warmed up until steady (the tuner's own rule) before either tool measures:
# 24 requests at 1 (about 7 s a baseline run), 256 at 8, 384 at 32.
agree steady gpu-agreement-steady.json 1,8,32 1=24,8=256,32=384 2 --warmup-until-steady
# Concurrency 8 with 256 requests and 3 rounds: 64 requests (about 2 s a run) left vLLM's own runs
# up to 33 % apart (docs/lab/gpu.md section 7).
agree agreement8 gpu-agreement-c8.json 8 8=256 3
agree steady8 gpu-agreement-c8-steady.json 8 8=256 3 --warmup-until-steady
# The tuner's replays without return_token_ids (which vllm bench serve never sends).
agree noids gpu-agreement-c8-noids.json 8 8=256 3 --without-token-ids
# Runs long enough that the server's own run-to-run spread (up to 10 % for 256 requests at 8,
# docs/lab/gpu.md section 7) averages out: 768 requests at 8 were 0.3 % apart between the tools. About
# 15 GPU minutes for the baseline and three eagle3 k, the steady warm-up included.
agree long gpu-agreement-long.json 8,32 8=512,32=1024 2 --warmup-until-steady
# Why the tools part at 8 (docs/lab/gpu.md section 7, "not the client"): the baseline and eagle3 k=2,
# four clients in turn on each server (vllm bench serve, the tuner, the tuner sending vllm bench's
# body, vllm bench asking for token ids), vLLM's own TTFT and TPOT of every run beside the clients'.
CONFIGS=(--config "eagle3 k=2={\"method\": \"eagle3\", \"model\": \"$E3\", \"num_speculative_tokens\": 2}")
agree probe gpu-agreement-probe.json 8 8=256 3 --warmup-until-steady --tools vllm,tuner,tuner-vllm-body,vllm-token-ids

# The studies (benchmarks/gpu_studies.sh) run in a process session of their own, which the device
# keeps running between calls while the host stays warm: no study is cut by a call's limit, so
# each one's wall clock runs from its command to its answer. Each call waits for them until its
# deadline; the next call, made at once, waits on.
if wants studies && ! is_done studies; then
    if [ ! -f "$R/started-studies" ]; then
        cp benchmarks/gpu_studies.sh "$R/"  # the next call's copy of the tree may replace this one
        touch "$R/started-studies"
        SERVE=$SERVE PROFILE=$PROFILE E3=$E3 STUDIES=${STUDIES:-} setsid bash "$R/gpu_studies.sh" > "$R/studies.log" 2>&1 < /dev/null &
    fi
    while ! is_done studies && [ "$(left)" -gt 15 ]; do sleep 5; done
    tail -20 "$R/studies.log"
fi

if wants blockrows && ! is_done blockrows && [ "$(left)" -gt 200 ]; then
    # docs/lab/gpu.md section 2's step-cost table, the block drafters' rows (k fixed by their block
    # size, 8 queries a step), resuming the committed table so only the new rows are measured.
    [ -f "$R/gpu-step-cost.json" ] || cp benchmarks/data/gpu-step-cost.json "$R/"
    timeout "$(( $(left) - 20 ))" python3 benchmarks/gpu_step_cost.py --target /root/models/target \
        --server-cmd "$SERVE" --drafter dflash=/root/models/dflash-8b --drafter dspark=/root/models/dspark-8b \
        --k 8 --concurrency 1,8,32 --repeats 2 --requests 32 --max-tokens 48 --budget-s "$(( $(left) - 60 ))" \
        --resume "$R/gpu-step-cost.json" --out-dir "$R" 2>&1 | tee -a "$R/step-cost.log" | grep -E 'tok/s|start|FAILED|budget|cause'
    python3 -c "
import json, sys
rows = json.load(open('$R/gpu-step-cost.json'))['rows']
have = {r['config']['method'] for r in rows if r.get('config')} | {r.get('method') for r in rows}
sys.exit(0 if {'dflash', 'dspark'} <= have else 1)" && done_ blockrows
fi
