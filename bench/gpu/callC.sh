#!/bin/bash
# Call C (after B): the start-up gap, mmrun against the raw vLLM script (issue 16 item 1).
# GAP_VARIANTS, GAP_ROUNDS as in gap.py. Carry: .gpu/b .gpu/s
CALL=gap; source "$(dirname "$0")/common.sh"
log "images"; python3 .gpu/s/bench_media.py /tmp/bench ${SETS%% *} | tail -1
log "gap rounds (compile cache warm: $([ -f /tmp/mm_warm_3b ] && echo yes || echo 'no: a cold round first'))"
python3 .gpu/s/gap.py run --res $RES --images /tmp/bench/s64 --model /tmp/qwen3b --budget $(( $(left) - 25 )) $DRYFLAG | grep --line-buffered -v '^|'
cp $RES/gap_summary.md $OUT/summary.txt
cat $RES/gap_summary.md | head -20
finish
log "done"
