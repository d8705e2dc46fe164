#!/bin/bash
# Device: throughput side by side, Qwen2.5-VL-3B shape with dummy weights, bf16, compiled:
# (a) mmrun, 64 prompts x 4 distinct 448x448 images read from disk, one batched call;
# (b) the raw-vLLM script bench3b.py on the same work; (c) bench3b's one-call-per-prompt loop.
# usage: bench.sh [TP]
source "$(dirname "$0")/common.sh"
TP=${1:-1}
python3 .gpu/s/make_media.py /tmp/bench 256
IMAGES=(); for f in /tmp/bench/b*.png; do IMAGES+=(-i "$f"); done
step "mmrun-batch-tp$TP" 330 python3 -m mmrun image -m qwen2_5_vl --model .gpu/s/qwen3b "${IMAGES[@]}" \
  --per-prompt 4 --warmup 2 --max-tokens 64 --temperature 0 --seed 0 -tp "$TP" \
  --sampling-arg ignore_eos=true --sampling-arg detokenize=false \
  --engine-arg load_format=dummy --engine-arg dtype=bfloat16 --engine-arg max_model_len=8192 \
  --engine-arg max_num_seqs=256 --json
[ "$TP" = 1 ] && step raw-bench3b 330 python3 .gpu/s/bench3b.py .gpu/s/qwen3b compiled
pack "bench-tp$TP"
