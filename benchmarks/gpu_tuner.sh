#!/usr/bin/env bash
# docs/lab/gpu.md sections 4-6 on an offline H200 host, in calls of at most 10 minutes: `tuner
# optimize` end to end (guided search over baseline, draft_model and eagle3 at the published
# EAGLE-3 acceptance profile, concurrency 1/8/32, so it tunes and measures a k-by-batch-size
# schedule), then whether the server applies a schedule at each load, a warm start under
# cProfile, and the engine's own process against the in-process engine at load.
#
# Call 1 (payload part 1): `mkdir -p /root/gpu-stage && cp .gpu/p1/* /root/gpu-stage/`. Every
# later call, with .gpu/p2 and the tuner's missing wheels (.whl) carried: `bash
# benchmarks/gpu_tuner.sh`. Each call goes on where the last stopped (state in /root/run on a
# warm host; a study cut off by the call's limit is resumed by the same command) and copies what
# it has to $OUT. DEADLINE_S: seconds this call may use. STEPS: which steps, in order (default:
# probe optimize configs profile; the next stay's: probe bytecode schedule_v1 stepcost optimize128).
DEFAULT_DEADLINE_S=540 RUN_EXCLUDE=(serve.prof '*.jsonl')
. "$(dirname "$0")/gpu_calls.sh"

if ! is_done setup; then
    bash .gpu/p2/setup.sh > "$R/logs/setup.log" 2>&1 || { tail -30 "$R/logs/setup.log"; exit 1; }
    done_ setup
fi
. /root/gpu-env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH="$PWD:/tmp/site:$PYTHONPATH" PYTHONUNBUFFERED=1
if ! is_done models; then
    python3 /root/gpu-stage/mkmodel.py /root/models > "$R/logs/mkmodel.log" 2>&1 || { tail -20 "$R/logs/mkmodel.log"; exit 1; }
    python3 benchmarks/gpu_models.py /root/models >> "$R/logs/mkmodel.log" 2>&1 || { tail -20 "$R/logs/mkmodel.log"; exit 1; }
    done_ models
fi
SERVE="python3 -m vllm.entrypoints.cli.main serve {model}"
STEPS=" ${STEPS:-probe optimize configs profile} "
PROFILE=0.74,0.54,0.41,0.31,0.23,0.17,0.13,0.10  # EAGLE-3 on Llama-3.1-8B, vllm#26191 (docs/lab/gpu.md)

if wants probe && ! is_done probe; then  # what a start spends before vLLM says anything
    {
        echo "nproc $(nproc); dont_write_bytecode $(python3 -c 'import sys; print(sys.flags.dont_write_bytecode)')"
        env | grep -E '^PYTHON|^VLLM' | sort
        for i in 1 2; do
            /usr/bin/time -f "import torch, run $i: %e s" python3 -c 'import torch' 2>&1
            /usr/bin/time -f "import vllm.entrypoints.cli.main, run $i: %e s" python3 -c 'import vllm.entrypoints.cli.main' 2>&1
        done
        python3 -c 'from vllm.config import SpeculativeConfig as S; f = S.__dataclass_fields__; print("enable_adaptive_verification in vLLM", __import__("vllm").__version__, ":", "enable_adaptive_verification" in f); print("num_speculative_tokens_per_batch_size:", "num_speculative_tokens_per_batch_size" in f)'
    } > "$R/probe.txt" 2>&1
    python3 -X importtime -c 'import vllm.entrypoints.cli.main' 2> "$R/logs/importtime.log" >/dev/null
    sort -t'|' -k2 -n -r "$R/logs/importtime.log" | head -40 >> "$R/probe.txt"
    done_ probe
fi

# The workload: the step-cost table's (the first 32 code requests, 48 tokens each, ignore_eos).
python3 - <<'EOF'
import json
lines = open("workloads/code.jsonl").read().splitlines()[:32]
with open("/root/run/code32.jsonl", "w") as out:
    for line in lines:
        r = json.loads(line); r["max_tokens"] = r["output_tokens"] = 48
        out.write(json.dumps(r) + "\n")
EOF

if wants optimize && ! is_done optimize && [ "$(left)" -gt 120 ]; then
    VLLM_ENABLE_V1_MULTIPROCESSING=0 timeout -s TERM "$(( $(left) - 40 ))" python3 -c 'from tuner.cli import main; main()' \
        optimize --workload "$R/code32.jsonl" --model /root/models/target --name "gpu guided" \
        --server-cmd "$SERVE" --server-arg=--load-format=dummy --server-arg=--max-model-len=4096 \
        --method eagle3 --method draft_model --draft eagle3=/root/models/eagle3-8b \
        --draft draft_model=/root/models/draft-250m --k 1,2,3,4,6,8 --concurrency 1,8,32 \
        --synthetic-acceptance "$PROFILE" --warmup 4 --repeats 2 --gpus 0 \
        --db "sqlite:///$R/tuner.db" --log-dir "$R/logs" --no-warm-start --write-config "$R/gpu-optimize-config.json" \
        > "$R/optimize.txt" 2> "$R/optimize-progress.log"
    rc=$?
    echo "optimize rc=$rc"; tail -45 "$R/optimize.txt"
    [ "$rc" = 0 ] && done_ optimize
fi

if wants configs && ! is_done configs && [ "$(left)" -gt 200 ]; then
    # A schedule with a different k at each load: does the server draft that many tokens there?
    # And the baseline with vLLM's own engine process (every other figure here runs it in-process).
    VLLM_ENABLE_V1_MULTIPROCESSING=0 timeout "$(( $(left) - 20 ))" python3 benchmarks/gpu_configs.py \
        --target /root/models/target --server-cmd "$SERVE" --out "$R/gpu-configs.json" \
        --config 'schedule-4-2-1={"method": "eagle3", "model": "/root/models/eagle3-8b", "num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": [[1, 4, 4], [5, 16, 2], [17, 512, 1]]}' \
        --config 'baseline-engine-process=baseline' --env-for baseline-engine-process VLLM_ENABLE_V1_MULTIPROCESSING=1 \
        2>&1 | tee "$R/configs.log" | grep -v '^\s*$' | tail -12
    grep -q '"name": "baseline-engine-process"' "$R/gpu-configs.json" 2>/dev/null && done_ configs
fi

if wants profile && ! is_done profile && [ "$(left)" -gt 150 ]; then
    # A warm start under cProfile, engine in-process so one profile holds all of it.
    port=8011; t0=$(date +%s.%N)
    VLLM_ENABLE_V1_MULTIPROCESSING=0 python3 -m cProfile -o "$R/serve.prof" -m vllm.entrypoints.cli.main serve \
        /root/models/target --load-format=dummy --max-model-len=4096 --port $port > "$R/logs/profile-serve.log" 2>&1 &
    pid=$!
    until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
        sleep 0.5; kill -0 $pid 2>/dev/null || break; [ "$(left)" -gt 30 ] || break
    done
    echo "profiled start to /health: $(python3 -c "import time; print(round(time.time() - $t0, 1))") s" > "$R/profile.txt"
    kill -INT $pid; for i in $(seq 60); do kill -0 $pid 2>/dev/null || break; sleep 0.5; done; kill -KILL $pid 2>/dev/null
    python3 -c "
import pstats, sys
p = pstats.Stats('$R/serve.prof', stream=sys.stdout)
p.sort_stats('cumulative').print_stats(80)" >> "$R/profile.txt" 2>&1 && done_ profile
    head -3 "$R/profile.txt"
fi

if wants bytecode && ! is_done bytecode && [ "$(left)" -gt 330 ]; then
    # A start that fills the compile cache, one with PYTHONDONTWRITEBYTECODE=1 (every process
    # compiles vLLM's source), then twice
    # as the tuner starts servers now (without it: the first writes the bytecode, the second reads it).
    timeout "$(( $(left) - 20 ))" python3 benchmarks/gpu_configs.py --target /root/models/target \
        --server-cmd "$SERVE" --out "$R/gpu-bytecode.json" --concurrency 1 --repeats 1 \
        --config 'warm-cache=baseline' --env-for warm-cache PYTHONDONTWRITEBYTECODE=1 \
        --config 'bytecode-off=baseline' --env-for bytecode-off PYTHONDONTWRITEBYTECODE=1 \
        --config 'bytecode-first=baseline' --config 'bytecode-second=baseline' 2>&1 | tee "$R/bytecode.log" | grep start
    grep -q '"name": "bytecode-second"' "$R/gpu-bytecode.json" 2>/dev/null && done_ bytecode
fi

if wants schedule_v1 && ! is_done schedule_v1 && [ "$(left)" -gt 150 ]; then
    # The schedule that Model Runner V2 of vLLM 0.26.0 cannot capture, on the V1 runner: does
    # it start, and does the server draft 4, 2 and 1 tokens per draft at concurrency 1, 8, 32?
    timeout "$(( $(left) - 20 ))" python3 benchmarks/gpu_configs.py --target /root/models/target \
        --server-cmd "$SERVE" --out "$R/gpu-schedule-v1.json" \
        --config 'schedule-v1={"method": "eagle3", "model": "/root/models/eagle3-8b", "num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": [[1, 4, 4], [5, 16, 2], [17, 512, 1]]}' \
        --env-for schedule-v1 VLLM_USE_V2_MODEL_RUNNER=0 2>&1 | tee "$R/schedule-v1.log" | tail -5
    grep -q '"name": "schedule-v1"' "$R/gpu-schedule-v1.json" 2>/dev/null && done_ schedule_v1
fi

if wants stepcost && ! is_done stepcost && [ "$(left)" -gt 150 ]; then
    # The step-cost table's missing rows (section 2): eagle3 at k = 3 and 6, then ngram, whose
    # drafts cost no model step (synthetic acceptance sets what they would accept), resuming the
    # committed table so only the new rows are measured.
    [ -f "$R/gpu-step-cost.json" ] || cp benchmarks/data/gpu-step-cost.json "$R/"
    for part in "eagle3=/root/models/eagle3-8b 3,6" "ngram 2,4,8"; do
        set -- $part
        [ "$(left)" -gt 150 ] || break
        timeout "$(( $(left) - 20 ))" python3 benchmarks/gpu_step_cost.py --target /root/models/target \
            --server-cmd "$SERVE" --drafter "$1" --k "$2" --concurrency 1,8,32 --repeats 2 \
            --requests 32 --max-tokens 48 --budget-s "$(( $(left) - 140 ))" \
            --resume "$R/gpu-step-cost.json" --out-dir "$R" 2>&1 | tee -a "$R/step-cost.log" | grep -E 'tok/s|start|FAILED|budget'
    done
    python3 -c "
import json, sys
rows = json.load(open('$R/gpu-step-cost.json'))['rows']
want = {('eagle3', 3), ('eagle3', 6), ('ngram', 2), ('ngram', 4), ('ngram', 8)}
have = {(r['config']['method'], r['config']['num_speculative_tokens']) for r in rows if r.get('config')}
sys.exit(0 if want <= have else 1)" && done_ stepcost
fi

if wants optimize128 && ! is_done optimize128 && [ "$(left)" -gt 120 ]; then
    # The study of section 4 again with 144 requests (the 48 code requests three times), so that
    # concurrency 32 has 4.5 requests per client: do c8 and c32 now agree with the grid?
    python3 - <<'PY'
import json
lines = open("workloads/code.jsonl").read().splitlines()
with open("/root/run/code144.jsonl", "w") as out:
    for copy in range(3):
        for line in lines:
            r = json.loads(line); r["max_tokens"] = r["output_tokens"] = 48; r["id"] = f"{r['id']}-{copy}"
            r.pop("arrival_s", None)  # a copy's arrivals would go back in time; closed loop ignores them
            out.write(json.dumps(r) + "\n")
PY
    timeout -s TERM "$(( $(left) - 40 ))" python3 -c 'from tuner.cli import main; main()' \
        optimize --workload "$R/code144.jsonl" --model /root/models/target --name "gpu guided 144" \
        --server-cmd "$SERVE" --server-arg=--load-format=dummy --server-arg=--max-model-len=4096 \
        --method eagle3 --method draft_model --draft eagle3=/root/models/eagle3-8b \
        --draft draft_model=/root/models/draft-250m --k 1,2,3,4,6,8 --concurrency 1,8,32 \
        --synthetic-acceptance "$PROFILE" --warmup 4 --repeats 2 --gpus 0 \
        --db "sqlite:///$R/tuner.db" --log-dir "$R/logs" --no-warm-start > "$R/optimize128.txt" 2> "$R/optimize128-progress.log"
    rc=$?; echo "optimize128 rc=$rc"; tail -30 "$R/optimize128.txt"
    [ "$rc" = 0 ] && done_ optimize128
fi
