#!/bin/bash
# Call D (after B): throughput raw vLLM vs mmrun (one call, streamed), frontend threads, and
# -dp 2 vs -dp 1 (issues 16 items 2-3, 15). TPUT_STEPS as in tput.py. Carry: .gpu/b .gpu/s
CALL=${CALL:-tput}; source "$(dirname "$0")/common.sh"
log "images"; python3 .gpu/s/bench_media.py /tmp/bench $SETS | tail -3
[ -f /tmp/mm_warm_3b ] || log "NOTE: no 3B warm-up marker: the first step compiles (~30 s more)"
python3 .gpu/s/tput.py run --res $RES --bench /tmp/bench --model /tmp/qwen3b \
  --steps "${TPUT_STEPS:-dp1 dp2 st256 mm256 raw mm64}" --budget $(( $(left) - 20 )) $DRYFLAG | grep --line-buffered -v '^|'
# a 3B-shaped run that ended well filled the compile cache: call C needs no cold round
grep -qs '"rc": 0' $RES/*/ttr.json && touch /tmp/mm_warm_3b
cp $RES/tput_summary.md $OUT/summary.txt
head -14 $RES/tput_summary.md
finish
log "done"
