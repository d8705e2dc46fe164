#!/bin/bash
# On the GPU machine, from the checkout's root (what prep.sh built travels in .gpu/).
#   bash .gpu/s/device.sh install    carry .gpu/a1 .gpu/s, then again with .gpu/a2 .gpu/s:
#                                    installs into $SCRATCH/site (kept while the machine is warm)
#   bash .gpu/s/device.sh bench ...  carry .gpu/s (and .gpu/r for run-batch, once): writes the media (SIZES, default 512),
#                                    runs throughput.py with the arguments given
#   bash .gpu/s/device.sh server ... carry .gpu/s (and .gpu/r, once): writes the media (SIZES, default 512),
#                                    runs server.py with the arguments given (in-process against --server)
#   bash .gpu/s/device.sh startup    carry .gpu/s: start-up timelines, the raw script's and mmrun's side by side
#                                    (STAGES, WARM below), within BUDGET_S seconds (default 540); ENGINE_ARGS=JSON:
#                                    engine arguments for every run (a CPU smoke run's); SETTLE=1: each stage's
#                                    variants first run once to their engine ready, untimed (throughput.py --settle)
#   TASK=whisper: the Whisper-shaped model and one clip per prompt (default: qwen2_5_vl, the
#   3B-shaped Qwen2.5-VL and 4 images per prompt). MODEL_CONFIG=JSON: values merged into the
#   model's config.json (smaller layers for a smoke run on a CPU build of vLLM, whose own
#   variables, VLLM_TARGET_DEVICE=cpu and VLLM_CPU_KVCACHE_SPACE, pass through). SCRATCH: the
#   folder of everything written (default /tmp).
# Results: $OUT/summary.{json,md} and $OUT/logs.tgz.
set -u
cd "$(dirname "$0")/../.."
T=${SCRATCH:-/tmp}; TASK=${TASK:-qwen2_5_vl}
S=$T/site; OUT=${OUT:-$T/out}; RES=$T/res/${NAME:-run}; mkdir -p "$OUT" $T/apart $T/rbsite
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# startup: the compile caches of every configuration filled at once (WARM, VARIANT:N), then
# STAGES in order, each "N:VARIANT,VARIANT,..." one throughput.py call with --probe, as long as
# the budget lets a run end in time (throughput.py skips the rest); then startup.py's tables.
# The default order (README.md, "Start-up timelines"): 512 x 4 mmrun and the tuned script,
# 1 prompt the other way round, mmrun's switches one at a time at 512 x 4, then the pair repeated.
WARM_DEFAULT='raw:1,mmrun:1,mmrun+max_num_seqs=256:1,mmrun+max_num_seqs=256+ir_op_priority={}:1'
STAGES_DEFAULT='512:mmrun,tuned 1:tuned,mmrun 512:mmrun+env.MMRUN_PREFETCH_MB=1,mmrun+ir_op_priority={} 512:tuned,mmrun'
startup() {
  local sizes stage n res done_res=() end=$(( ${BUDGET_S:-540} - 20 )) warm=${WARM-$WARM_DEFAULT}
  # the media of every stage's size and every warm-up's (VARIANT:N)
  sizes=$( (for stage in ${STAGES:-$STAGES_DEFAULT}; do echo "${stage%%:*}"; done
            for w in ${warm//,/ }; do echo "${w##*:}"; done) | sort -un | tr '\n' ' ')
  python3 .gpu/s/media.py $T/bench $sizes --task $TASK
  local i=0
  for stage in ${STAGES:-$STAGES_DEFAULT}; do
    i=$((i + 1)); n=${stage%%:*}; res=$T/res/startup-$i-$n; rm -rf "$res"
    echo "== stage $i: $n prompts: ${stage#*:} ($((end - SECONDS))s left)"
    python3 .gpu/s/throughput.py --bench $T/bench --model $M --res "$res" --task $TASK --probe \
      --prompts "$n" --variants "${stage#*:}" ${warm:+--warm "$warm"} --budget $((end - SECONDS)) \
      ${ENGINE_ARGS:+--engine-args "$ENGINE_ARGS"} ${SETTLE:+--settle} \
      | grep -v '^|'
    warm=''; [ -f "$res/summary.json" ] && done_res+=("$res") && cp "$res/summary.json" "$OUT/summary-$i-$n.json"
  done
  [ ${#done_res[@]} -gt 0 ] || { echo "startup: no run ended"; return 1; }
  echo "== stages done after ${SECONDS}s"
  python3 .gpu/s/startup.py "${done_res[@]}" --json "$OUT/timeline.json" --md "$OUT/timeline.md"
  tar czf "$OUT/logs.tgz" -C $T/res --exclude='*.jsonl' --exclude='texts.json' \
    $(for r in "${done_res[@]}"; do basename "$r"; done)
}

case "${1:-}" in
install)
  for part in a1 a2; do [ -d .gpu/$part ] && cp .gpu/$part/* $T/apart/; done
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  mkdir -p $S
  if [ -f .gpu/a1/whl.tar.xz ]; then xz -dc .gpu/a1/whl.tar.xz | tar xf - -C $S; fi
  if [ -f .gpu/a2/vllm_rest.tar.xz ]; then
    xz -dc .gpu/a2/vllm_rest.tar.xz | tar xf - -C $S
  fi
  if [ ! -f $T/apart/part00 ] || [ ! -f $T/apart/part01 ]; then echo "install: half done; call again with the other"; exit 0; fi
  cat $T/apart/part00 $T/apart/part01 | xz -dc > $S/vllm/_C_stable_libtorch.abi3.so
  [ "$(sha256sum $S/vllm/_C_stable_libtorch.abi3.so | cut -d' ' -f1)" = "$(cat $T/apart/C_stable.sha256)" ] \
    || { echo "install: sha256 MISMATCH"; exit 1; }
  python3 -m compileall -q -j 0 $S > /dev/null 2>&1; touch $S/.done; echo "install: ok" ;;
bench|startup|server)
  cmd=$1; shift
  [ -f $S/.done ] || { echo "COLD: run install first (twice)"; exit 3; }
  if [ -f .gpu/r/rb.tar.xz ] && [ ! -f $T/rbsite/.done ]; then
    xz -dc .gpu/r/rb.tar.xz | tar xf - -C $T/rbsite && touch $T/rbsite/.done
  fi
  case $TASK in whisper) M=$T/whisper ;; qwen2_5_vl) M=$T/qwen3b ;; *) echo "TASK: qwen2_5_vl or whisper"; exit 2 ;; esac
  mkdir -p $M && xz -dc .gpu/s/$(basename $M).tar.xz | tar xf - -C $M
  if [ -n "${MODEL_CONFIG:-}" ]; then
    python3 .gpu/s/full_vocab.py $M $M-changed --config "$MODEL_CONFIG" || exit 1; M=$M-changed
  fi
  # PYTHONSAFEPATH: `python3 -m mmrun` imports the mmrun of .gpu/s/py, not the checkout's
  export PYTHONPATH=$PWD/.gpu/s/py:$S RUNBATCH_SITE=$T/rbsite PYTHONSAFEPATH=1 BENCH_MODEL=$M
  [ -d .gpu/s/py-base ] && export MMRUN_BASE_PATH=$PWD/.gpu/s/py-base
  if [ $cmd = startup ]; then startup; exit $?; fi
  if [ $cmd = server ]; then  # `vllm serve` needs run-batch's server dependencies
    # and 8 prompts of other pictures: server.py's warm-up call to each server (--warm 8)
    python3 .gpu/s/media.py $T/bench $(printf '%s\n' ${SIZES:-512} 8 | sort -un) --task $TASK
    PYTHONPATH=$PYTHONPATH:$RUNBATCH_SITE:$PWD/.gpu/s python3 .gpu/s/server.py --bench $T/bench --model $M --res $RES \
      --budget $(( ${BUDGET_S:-570} - SECONDS - 10 )) "$@" | grep -v '^|'
    cp $RES/summary.json $RES/summary.md $RES/serve-*cmd.txt "$OUT/" 2>/dev/null; cat $RES/summary.md 2>/dev/null
    tar czf "$OUT/logs.tgz" -C $RES --exclude='*.jsonl' . ; exit 0
  fi
  python3 .gpu/s/media.py $T/bench ${SIZES:-512} --task $TASK
  # the whole command ends within BUDGET_S seconds (default 570)
  python3 .gpu/s/throughput.py --bench $T/bench --model $M --res $RES --task $TASK \
    --budget $(( ${BUDGET_S:-570} - SECONDS - 10 )) "$@" | grep -v '^|'
  cp $RES/summary.json $RES/summary.md "$OUT/" 2>/dev/null
  cat $RES/summary.md 2>/dev/null
  tar czf "$OUT/logs.tgz" -C $RES --exclude='*.jsonl' --exclude='texts.json' . ;;
*) echo "usage: device.sh install | bench THROUGHPUT_ARGS | server SERVER_ARGS | startup"; exit 2 ;;
esac
