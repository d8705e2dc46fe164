#!/bin/bash
# Call B (after A): install vLLM, then every tiny-checkpoint row through mmrun's CLI on CUDA,
# eager, generate and chat, PROOFS_PAR runs at a time on GPU 0 (issue 16 item 4). Meanwhile, on
# GPU 1: the Qwen2.5-VL-3B-shaped model's first compiled start (its torch.compile cache serves
# calls C and D) and the benchmark's images.
# Carry: .gpu/s .gpu/t .gpu/m once an earlier call of this machine installed vLLM (.gpu/b; it
# stays in /tmp/site while the machine is warm): with .gpu/b the four are over the 64 MiB of a
# call. On a machine without vLLM: .gpu/b .gpu/s .gpu/t (the MoE rows, llama4, step3 and
# glm4_5v*, then fail: no MoE kernels), or first `bash .gpu/s/setup.sh` carrying .gpu/b .gpu/s.
# setup.sh (through common.sh) unpacks .gpu/m into /tmp/site/vllm/ and checks its sha256.
CALL=proofs; source "$(dirname "$0")/common.sh"
[ -n "$DRYFLAG" ] || [ -f /tmp/site/vllm/_moe_C_stable_libtorch.abi3.so ] || log "no MoE kernels (.gpu/m not carried): the MoE rows (llama4, step3, glm4_5v, glm4_5v_fp8) will fail"
log "tiny checkpoints"
if [ ! -f /tmp/tiny/.done ]; then mkdir -p /tmp/tiny && xz -dc .gpu/t/tiny.tar.xz | tar xf - -C /tmp/tiny && touch /tmp/tiny/.done; fi
log "background: benchmark images, then the 3B model's first compiled start on GPU 1"
( python3 .gpu/s/bench_media.py /tmp/bench ${SETS%% *} > $RES/media.log 2>&1
  [ -z "$DRYFLAG" ] && [ ! -f /tmp/mm_warm_3b ] && python3 .gpu/s/ttr.py --dir $RES/warm3b --timeout 330 --result '^RESULT_DONE' --env CUDA_VISIBLE_DEVICES=1 -- \
    python3 .gpu/s/raw_bench.py --model /tmp/qwen3b --set w:/tmp/bench/s64 --warmup 0 \
    && grep -q '"rc": 0' $RES/warm3b/ttr.json && touch /tmp/mm_warm_3b
  python3 .gpu/s/bench_media.py /tmp/bench $SETS >> $RES/media.log 2>&1 ) &
BG=$!
log "proofs"
python3 .gpu/s/proofs.py run --index .gpu/t/index.json --tiny /tmp/tiny --media .gpu/t/media --res $RES \
  --gpus ${PROOFS_GPUS:-0} --par ${PROOFS_PAR:-16} --budget $(( $(left) - 60 )) $DRYFLAG
log "table"
python3 .gpu/s/proofs.py table --index .gpu/t/index.json --tiny /tmp/tiny --res $RES > /dev/null 2>$RES/table.err
log "waiting for the background (3B warm-up, images), at most until the budget's end"
while kill -0 $BG 2>/dev/null && [ "$(left)" -gt 20 ]; do sleep 2; done
kill -0 $BG 2>/dev/null && { log "background still running: stopped"; pkill -P $BG; kill $BG; }
python3 - <<PY
import json; r = json.load(open("$RES/warm3b/ttr.json")) if __import__("os").path.exists("$RES/warm3b/ttr.json") else {}
print("3B warm-up: rc", r.get("rc"), "result at", r.get("result_s"), "s; marker", __import__("os").path.exists("/tmp/mm_warm_3b"))
PY
grep -h "RESULT_BATCH\|RAW_ENGINE" $RES/warm3b/log.txt | cut -c1-300
tail -3 $RES/media.log
{ cat $RES/proofs_table.md; echo; echo "3B warm-up rc: $(grep -o '"rc": [0-9]*' $RES/warm3b/ttr.json)"; } > $OUT/summary.txt
head -5 $RES/proofs_table.md
finish
log "done"
