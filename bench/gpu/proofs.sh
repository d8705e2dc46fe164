#!/bin/bash
# Device: the tiny checkpoints through the real mmrun CLI on CUDA vLLM.
# usage: proofs.sh eager|compiled [TP]   (results: $OUT/proofs-MODE.tgz and $OUT/summary.txt)
source "$(dirname "$0")/common.sh"
MODE=${1:-eager}; TP=${2:-1}
python3 .gpu/s/make_media.py /tmp/media
EXTRA=(--json --num-prompts 3 --max-tokens 16 --seed 0 -tp "$TP" --engine-arg gpu_memory_utilization=0.3)
[ "$MODE" = eager ] && EXTRA+=(--engine-arg enforce_eager=true)
for key in qwen2_5_vl llava; do
  path=$PYTHONPATH; [ $key = llava ] && [ -d /tmp/tf ] && path=$OLD_TF
  for method in generate chat; do
    step "$key-$method-$MODE-tp$TP" 200 env PYTHONPATH=$path python3 -m mmrun image -m $key --model .gpu/t/$key \
      -i /tmp/media/img0.png -i /tmp/media/img1.png --method $method "${EXTRA[@]}" $(engine_args $key)
  done
done
step "whisper-generate-$MODE-tp$TP" 200 python3 -m mmrun audio -m whisper --model .gpu/t/whisper \
  -a /tmp/media/tone0.wav "${EXTRA[@]}" $(engine_args whisper)
step "qwen2_audio-generate-$MODE-tp$TP" 200 python3 -m mmrun audio -m qwen2_audio --model .gpu/t/qwen2_audio \
  -a /tmp/media/tone0.wav -a /tmp/media/tone1.wav "${EXTRA[@]}" $(engine_args qwen2_audio)
pack "proofs-$MODE-tp$TP"
