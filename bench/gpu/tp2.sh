#!/bin/bash
# Device (nvidia-h200-x2): prove the -tp flag path: tiny Qwen2.5-VL with -tp 2, then the 3B-shaped batch.
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
python3 .gpu/s/make_media.py /tmp/media
step qwen2_5_vl-generate-eager-tp2 200 python3 -m mmrun image -m qwen2_5_vl --model .gpu/t/qwen2_5_vl \
  -i /tmp/media/img0.png -i /tmp/media/img1.png --json --num-prompts 3 --max-tokens 16 --seed 0 -tp 2 \
  --engine-arg gpu_memory_utilization=0.3 --engine-arg enforce_eager=true $(engine_args qwen2_5_vl)
BUDGET=$(left) bash .gpu/s/bench.sh 2 > /dev/null 2>&1 || true
pack tp2
