# Sourced by the device calls (callB-D.sh): environment, COLD check, install, helpers.
# Results go to /tmp/res/$CALL; $OUT gets summary.txt and $CALL.tgz (8 files at most come back).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."   # the repository root (the scripts travel in .gpu/s)
START=$(date +%s); BUDGET=${BUDGET:-540}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CALL=${CALL:-call}; RES=/tmp/res/$CALL; rm -rf "$RES"; mkdir -p "$RES"
log() { echo "[+$(( $(date +%s) - START ))s $(date +%H:%M:%S)] $*"; }
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
# vLLM 0.26 without flashinfer (not carried): its sampler must not be asked for. No network.
# NVLink multicast stays off (KINDS.md).
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ ! -f /tmp/site/vllm/_C_stable_libtorch.abi3.so ]; then
  echo "COLD: /tmp/site is gone (the machine was given back): run call A, then this call again"
  echo "COLD" > "$OUT/summary.txt"; exit 3
fi
log "setup"; bash .gpu/s/setup.sh 2>&1 | tail -4 || { echo "setup failed"; exit 3; }
[ -f /tmp/site/.done ] || { echo "setup failed (no /tmp/site/.done)"; exit 3; }
export PYTHONPATH=/tmp/site:$PWD
finish() {  # pack the results (profiler traces and media caches stay behind)
  tar czf "$OUT/$CALL.tgz" --exclude='*.pt.trace.json*' --exclude='*trace*.json.gz' --exclude='./cache' -C "$RES" .
  log "packed $(du -h "$OUT/$CALL.tgz" | cut -f1) into \$OUT/$CALL.tgz"
}
