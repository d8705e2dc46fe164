#!/bin/bash
source "$(dirname "$0")/common.sh"
[ -d /tmp/tf/tokenizers ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tf --upgrade .gpu/x/tokenizers-*.whl
python3 .gpu/s/make_media.py /tmp/media
for MODE in eager compiled; do
  EXTRA=(--json --num-prompts 3 --max-tokens 16 --seed 0 --engine-arg gpu_memory_utilization=0.3)
  [ "$MODE" = eager ] && EXTRA+=(--engine-arg enforce_eager=true)
  for method in generate chat; do
    step "llava-$method-$MODE-tp1" 150 env PYTHONPATH=$OLD_TF python3 -m mmrun image -m llava --model .gpu/t/llava \
      -i /tmp/media/img0.png -i /tmp/media/img1.png --method $method "${EXTRA[@]}" $(engine_args llava)
  done
done
pack llava
