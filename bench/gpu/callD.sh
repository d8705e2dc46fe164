#!/bin/bash
# Call D (after B): throughput raw vLLM vs mmrun (one call, streamed), frontend threads, and
# -dp 2 vs -dp 1 (issues 16 items 2-3, 15). TPUT_STEPS as in tput.py. Carry: .gpu/b .gpu/s
CALL=${CALL:-tput}; source "$(dirname "$0")/common.sh"
log "images"; python3 .gpu/s/bench_media.py /tmp/bench $SETS | tail -3
[ -f /tmp/mm_warm_3b ] || log "NOTE: no 3B warm-up marker: the first step compiles (~30 s more)"
python3 .gpu/s/tput.py run --res $RES --bench /tmp/bench --model /tmp/qwen3b \
  --steps "${TPUT_STEPS:-raw mm256 st256 dp1 dp2 mm64 mm256omp1}" --budget $(( $(left) - 20 )) $DRYFLAG | grep --line-buffered -v '^|'
cp $RES/tput_summary.md $OUT/summary.txt
head -14 $RES/tput_summary.md
finish
log "done"
