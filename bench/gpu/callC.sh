#!/bin/bash
# Call C (after B): the start-up gap, mmrun against the raw vLLM script (issue 16 item 1).
# GAP_VARIANTS, GAP_ROUNDS as in gap.py; TPUT_STEPS (tput.py steps run first, TPUT_BUDGET s). Carry: .gpu/b .gpu/s
CALL=gap; source "$(dirname "$0")/common.sh"
log "images"; python3 .gpu/s/bench_media.py /tmp/bench $SETS | tail -3
if [ ! -f /tmp/raysite/.done ] && [ -z "$DRYFLAG" ]; then
  TPUT_STEPS=$(echo " ${TPUT_STEPS:-} " | sed 's/ ray / /g'); log "ray not here: its step dropped"
fi
TPUT_STEPS=$(echo ${TPUT_STEPS:-})
if [ -n "${TPUT_STEPS:-}" ]; then  # throughput steps that call D left undone, first
  python3 .gpu/s/tput.py run --res $RES/tput --bench /tmp/bench --model /tmp/qwen3b --steps "$TPUT_STEPS" \
    --budget ${TPUT_BUDGET:-150} $DRYFLAG | grep --line-buffered -v '^|'
  grep -qs '"rc": 0' $RES/tput/*/ttr.json && touch /tmp/mm_warm_3b
fi
log "gap rounds (compile cache warm: $([ -f /tmp/mm_warm_3b ] && echo yes || echo 'no: a cold round first'))"
python3 .gpu/s/gap.py run --res $RES --images /tmp/bench/s64 --model /tmp/qwen3b --budget $(( $(left) - 25 )) $DRYFLAG | grep --line-buffered -v '^|'
{ cat $RES/gap_summary.md; [ -f $RES/tput/tput_summary.md ] && cat $RES/tput/tput_summary.md; } > $OUT/summary.txt
cat $RES/gap_summary.md | head -20
finish
log "done"
