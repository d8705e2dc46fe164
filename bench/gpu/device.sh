#!/bin/bash
# On the GPU machine, from the checkout's root (what prep.sh built travels in .gpu/).
#   bash .gpu/s/device.sh install    carry .gpu/a1 .gpu/s, then again with .gpu/a2 .gpu/s:
#                                    installs into /tmp/site (kept while the machine is warm)
#   bash .gpu/s/device.sh bench ...  carry .gpu/s (and .gpu/r for run-batch, once): writes the images (SIZES, default 512),
#                                    runs throughput.py with the arguments given
# Results: $OUT/summary.{json,md} and $OUT/logs.tgz.
set -u
cd "$(dirname "$0")/../.."
S=/tmp/site; OUT=${OUT:-/tmp/out}; RES=/tmp/res/${NAME:-run}; mkdir -p "$OUT" /tmp/apart /tmp/rbsite
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
case "${1:-}" in
install)
  for part in a1 a2; do [ -d .gpu/$part ] && cp .gpu/$part/* /tmp/apart/; done
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  mkdir -p $S
  if [ -f .gpu/a1/whl.tar.xz ]; then xz -dc .gpu/a1/whl.tar.xz | tar xf - -C $S; fi
  if [ -f .gpu/a2/vllm_rest.tar.xz ]; then
    xz -dc .gpu/a2/vllm_rest.tar.xz | tar xf - -C $S
  fi
  if [ ! -f /tmp/apart/part00 ] || [ ! -f /tmp/apart/part01 ]; then echo "install: half done; call again with the other"; exit 0; fi
  cat /tmp/apart/part00 /tmp/apart/part01 | xz -dc > $S/vllm/_C_stable_libtorch.abi3.so
  [ "$(sha256sum $S/vllm/_C_stable_libtorch.abi3.so | cut -d' ' -f1)" = "$(cat /tmp/apart/C_stable.sha256)" ] \
    || { echo "install: sha256 MISMATCH"; exit 1; }
  python3 -m compileall -q -j 0 $S > /dev/null 2>&1; touch $S/.done; echo "install: ok" ;;
bench)
  shift
  [ -f $S/.done ] || { echo "COLD: run install first (twice)"; exit 3; }
  if [ -f .gpu/r/rb.tar.xz ] && [ ! -f /tmp/rbsite/.done ]; then
    xz -dc .gpu/r/rb.tar.xz | tar xf - -C /tmp/rbsite && touch /tmp/rbsite/.done
  fi
  mkdir -p /tmp/qwen3b && xz -dc .gpu/s/qwen3b.tar.xz | tar xf - -C /tmp/qwen3b
  # PYTHONSAFEPATH: `python3 -m mmrun` imports the mmrun of .gpu/s/py, not the checkout's
  export PYTHONPATH=$PWD/.gpu/s/py:$S RUNBATCH_SITE=/tmp/rbsite PYTHONSAFEPATH=1
  [ -d .gpu/s/py-base ] && export MMRUN_BASE_PATH=$PWD/.gpu/s/py-base
  python3 .gpu/s/media.py /tmp/bench ${SIZES:-512}
  # the whole command ends within BUDGET_S seconds (default 570)
  python3 .gpu/s/throughput.py --bench /tmp/bench --model /tmp/qwen3b --res $RES \
    --budget $(( ${BUDGET_S:-570} - SECONDS - 10 )) "$@" | grep -v '^|'
  cp $RES/summary.json $RES/summary.md "$OUT/" 2>/dev/null
  cat $RES/summary.md 2>/dev/null
  tar czf "$OUT/logs.tgz" -C $RES --exclude='*.jsonl' --exclude='texts.json' . ;;
*) echo "usage: device.sh install | bench THROUGHPUT_ARGS"; exit 2 ;;
esac
