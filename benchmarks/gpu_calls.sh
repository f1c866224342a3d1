# Sourced by the GPU scripts (gpu_tuner.sh, gpu_agreement.sh): a stay's state across calls of at
# most 10 minutes. Steps mark themselves done in /root/run (kept while the host stays warm),
# left() is what DEADLINE_S leaves of this call, and on exit one archive of /root/run goes to $OUT
# (the device tool brings back at most 8 files), less the files named by RUN_EXCLUDE.
set -uo pipefail
R=/root/run
mkdir -p "$R/logs"
SECONDS=0
DEADLINE_S=${DEADLINE_S:-$DEFAULT_DEADLINE_S}
left() { echo $((DEADLINE_S - SECONDS)); }
done_() { touch "$R/done-$1"; }
is_done() { [ -f "$R/done-$1" ]; }
wants() { case "$STEPS" in *" $1 "*) return 0 ;; esac; return 1; }  # STEPS: " a b c "
finish() {
    (cd "$R" && tar czf "$OUT/gpu-run.tgz" "${RUN_EXCLUDE[@]/#/--exclude=}" . 2>/dev/null)
    echo "call took ${SECONDS}s; done: $(ls "$R" | grep '^done-' | tr '\n' ' ')"
}
trap finish EXIT
