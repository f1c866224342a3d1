#!/usr/bin/env bash
# Started by gpu_agreement.sh (step studies) in a process session of its own on the H200 host, so
# that it outlives the device calls (docs/lab/gpu.md section 8): `tuner optimize` timed from the command
# to its printed answer, each study with its own database $R/STEP.db, in this order:
#   tenmin      the default (guided) search over baseline, eagle3, the DFlash drafter, draft_model
#               0.25 B and ngram, k 1-8, at concurrency 1, 8, 32 with the precision per load
#               (--max-repeats 6), on a host where each config starts for the first time, with
#               --time-limit 10m (unlimited, the same study took 10.7 minutes: docs/lab/gpu.md 8);
#   tenminwarm  the same study, without the limit, from nothing on the same host, vLLM's compile
#               cache now warm;
#   gridnear    the grid around the answer (dflash k=7 on 2026-12-05) at concurrency 1, 8, 32: the
#               DFlash drafter, eagle3 and ngram at k 3 and 4, and the baseline. These are eagle3's
#               and ngram's best k in the step-cost table (docs/lab/gpu.md 2: eagle3 k=4 at 1 and 8, k=3
#               at 32, within 1 % of DFlash there), none of which the studies measured; it needs no
#               study before it, so STUDIES=gridnear runs it alone on a fresh host.
# Each writes STEP.txt (the answer as printed), STEP-progress.log and STEP-wall.txt, then done-STEP.
# STUDIES: which of them, in this order (default all three).
set -u
R=/root/run
. /root/gpu-env.sh
export PYTHONUNBUFFERED=1
# 384 requests (the 48 code requests eight times, 48 tokens each, a first line of their own from
# the second copy on); --requests-per-client 12 replays 12 at concurrency 1, 96 at 8 and all 384
# at 32, so no load's replay lasts much longer than another's.
python3 - <<'PY'
import json
lines = open("workloads/code.jsonl").read().splitlines()
with open("/root/run/code384.jsonl", "w") as out:
    for copy in range(8):
        for line in lines:
            r = json.loads(line); r["max_tokens"] = r["output_tokens"] = 48; r["id"] = f"{r['id']}-{copy}"
            r.pop("arrival_s", None)
            if copy:
                r["prompt"] = f"# pass {copy + 1}\n" + r["prompt"]
            out.write(json.dumps(r) + "\n")
PY

# study STEP NAME [ARG...]: one `tuner optimize`, ARGs its space and loads.
study() {
    local step=$1 name=$2 started rc
    shift 2
    [ -f "$R/done-$step" ] && return 0
    case " ${STUDIES:-tenmin tenminwarm gridnear} " in *" $step "*) ;; *) return 0 ;; esac
    started=$(date +%s.%N)
    echo "$step: started $(date -u +%T)"
    timeout 1500 tuner optimize --workload "$R/code384.jsonl" --model /root/models/target --name "$name" \
        --server-cmd "$SERVE" --server-arg=--load-format=dummy --server-arg=--max-model-len=4096 \
        --requests-per-client 12 --synthetic-acceptance "$PROFILE" --max-repeats 6 --gpus 0 \
        --db "sqlite:///$R/$step.db" --log-dir "$R/logs" --no-warm-start "$@" \
        > "$R/$step.txt" 2> "$R/$step-progress.log"
    rc=$?
    echo "$step rc=$rc wall $(python3 -c "import time; print(round(time.time() - $started, 1))") s" | tee "$R/$step-wall.txt"
    touch "$R/done-$step"
}
EVERY_METHOD=(--method eagle3 --method draft_model --method ngram --draft "eagle3=$E3" --draft /root/models/dflash-8b
              --draft draft_model=/root/models/draft-250m --k 1-8 --concurrency 1,8,32)
study tenmin "ten minutes" "${EVERY_METHOD[@]}" --time-limit 10m
study tenminwarm "ten minutes, warm host" "${EVERY_METHOD[@]}"
study gridnear "grid near the answer" --strategy grid --method eagle3 --method ngram --draft "eagle3=$E3" \
    --draft /root/models/dflash-8b --k 3,4 --concurrency 1,8,32
touch "$R/done-studies"
