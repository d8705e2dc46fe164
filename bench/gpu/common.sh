# Sourced by the device calls (callB-D.sh): environment, COLD check, install, helpers.
# Results go to /tmp/res/$CALL; $OUT gets summary.txt and $CALL.tgz (8 files at most come back).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."   # the repository root (the scripts travel in .gpu/s)
START=$(date +%s); BUDGET=${BUDGET:-540}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
RUN_NAME=${CALL:-call}; RES=/tmp/res/$RUN_NAME; rm -rf "$RES"; mkdir -p "$RES"
log() { echo "[+$(( $(date +%s) - START ))s $(date +%H:%M:%S)] $*"; }
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
# vLLM 0.26 without flashinfer (not carried): its sampler must not be asked for. No network.
# NVLink multicast stays off (KINDS.md).
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# DRY=1: a rehearsal on the CPU machine (selfcheck): no install, the drivers only write commands
DRYFLAG=""; [ -n "${DRY:-}" ] && DRYFLAG="--dry"
# the benchmark's image sets (bench_media.py NAME:IMAGES:SEED): 64, 256 and 1024 prompts of 4
SETS="s64:256:1 s256:1024:2 s1024:4096:3"; [ -n "$DRYFLAG" ] && SETS="s64:8:1 s256:8:2 s1024:8:3"
if [ -z "$DRYFLAG" ] && [ ! -f /tmp/site/vllm/_C_stable_libtorch.abi3.so ]; then
  echo "COLD: /tmp/site is gone (the machine was given back): run call A, then this call again"
  echo "COLD" > "$OUT/summary.txt"; exit 3
fi
if [ -z "$DRYFLAG" ]; then
  log "setup"; bash .gpu/s/setup.sh 2>&1 | tail -6
  [ -f /tmp/site/.done ] || { echo "setup failed (no /tmp/site/.done)"; exit 3; }
fi
export PYTHONPATH=/tmp/site:$PWD
# Ray (--backend ray), carried in parts by several calls (.gpu/r1, .gpu/r2): kept in /tmp/raypart,
# unpacked into /tmp/raysite (its own folder: only the ray step puts it on PYTHONPATH) once all came
mkdir -p /tmp/raypart; cp .gpu/r*/ray.* /tmp/raypart/ 2>/dev/null || true
if [ -z "$DRYFLAG" ] && [ ! -f /tmp/raysite/.done ] && [ -f /tmp/raypart/ray.sha256 ]; then
  if [ "$(cat /tmp/raypart/ray.part* | sha256sum | cut -d' ' -f1)" = "$(cat /tmp/raypart/ray.sha256)" ]; then
    mkdir -p /tmp/raysite && cat /tmp/raypart/ray.part* | xz -dc | tar xf - -C /tmp/raysite && touch /tmp/raysite/.done
    log "ray unpacked into /tmp/raysite: $(ls /tmp/raysite)"
  else
    log "ray: parts so far $(ls /tmp/raypart | tr '\n' ' ')"
  fi
fi
# the Qwen2.5-VL-3B-shaped checkpoint folder (config, full-vocab tokenizer; weights: dummy)
[ -f /tmp/qwen3b/config.json ] || { mkdir -p /tmp/qwen3b && xz -dc .gpu/s/qwen3b.tar.xz | tar xf - -C /tmp/qwen3b; }
finish() {  # pack the results (profiler traces and media caches stay behind)
  tar czf "$OUT/$RUN_NAME.tgz" --exclude='*.pt.trace.json*' --exclude='*trace*.json.gz' --exclude='./cache' -C "$RES" .
  log "packed $(du -h "$OUT/$RUN_NAME.tgz" | cut -f1) into \$OUT/$RUN_NAME.tgz"
}
