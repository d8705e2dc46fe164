# Sourced by proofs.sh and bench.sh on the device: environment, install, and a timed step runner.
# Results go to /tmp/res (many files); the caller packs them into $OUT (8 files at most come back).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."   # the repository root (scripts travel in .gpu/s)
START=$(date +%s); BUDGET=${BUDGET:-560}
OUT=${OUT:-/tmp/out}; RES=/tmp/res; mkdir -p "$OUT" $RES
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TOKENIZERS_PARALLELISM=false
bash .gpu/s/setup.sh > $RES/setup.log 2>&1 || { tail -5 $RES/setup.log; exit 3; }
export PYTHONPATH=/tmp/site:$PWD
# vLLM 0.26's llava/pixtral code imports a class that transformers 5.17 (the device's) renamed;
# a carried older transformers (.gpu/x) is put in front for the models that need it.
if ls .gpu/x/transformers-*.whl >/dev/null 2>&1 && [ ! -d /tmp/tf ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tf .gpu/x/transformers-*.whl
fi
OLD_TF=/tmp/tf:$PYTHONPATH
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cleanup_gpu() {
  for p in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  sleep 1
}
# step NAME MAXSECS CMD...: stdout -> $RES/NAME.json, stderr -> $RES/NAME.log
step() {
  local name=$1 max=$2; shift 2
  local l; l=$(left); local t=$(( l - 20 < max ? l - 20 : max ))
  if [ $t -lt 30 ]; then echo "SKIP $name (only ${l}s left)"; return 99; fi
  local ts; ts=$(date +%s)
  timeout -k 10 $t "$@" > $RES/$name.json 2> $RES/$name.log
  local rc=$?
  echo "$name rc=$rc wall=$(( $(date +%s) - ts ))s"
  [ $rc -ne 0 ] && tail -6 $RES/$name.log | cut -c1-300
  cleanup_gpu
  return $rc
}
# engine_args KEY: the tiny checkpoint's extra engine arguments as --engine-arg flags
engine_args() {
  python3 -c "import json,sys; a=json.load(open('.gpu/t/engine_args.json'))[sys.argv[1]]; print(' '.join('--engine-arg=%s=%s' % (k, json.dumps(v)) for k, v in a.items()))" "$1"
}
pack() {
  python3 .gpu/s/summarize.py $RES > $OUT/summary.txt; cat $OUT/summary.txt
  tar czf "$OUT/$1.tgz" -C $RES .
}
