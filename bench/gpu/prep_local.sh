#!/bin/bash
# Local (no device time) preparation of the two carry payloads for vLLM 0.26.0 on the lent H200.
# Adapted for mmrun from the team's ../shared/gpu/prep_local.sh (the recipe in ../shared/notes/gpu.md).
# usage: prep_local.sh REPO_ROOT [TINY_CHECKPOINT_DIR]
#   REPO_ROOT: the checkout the device tool sends (this script adds /.gpu/ to its .git/info/exclude)
#   TINY_CHECKPOINT_DIR: optional small checkpoint to carry too (e.g. one built by the project's own tiny builder)
# Produces (plus .gpu/t: mmrun's tiny checkpoints and mmrun's extra wheels in .gpu/b/whl): .gpu/a (~58.6 MB: _C_stable_libtorch .so xz [+ tiny checkpoint]), .gpu/b (~49.7 MB: trimmed vllm tar.xz + 31 dep wheels),
#           .gpu/s (these scripts + the Qwen2.5-VL-3B-shaped config). Each must stay under 64 MiB.
set -euo pipefail
REPO=${1:?repo root}; HERE=$(cd "$(dirname "$0")" && pwd)
W=${WORK:-$(mktemp -d)}; mkdir -p $W/dl $W/whl $W/vx
grep -qx '/.gpu/' $REPO/.git/info/exclude 2>/dev/null || echo '/.gpu/' >> $REPO/.git/info/exclude
PD="env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp"
for n in 28 27 26 24 17 31 34 35; do PD="$PD --platform manylinux_2_${n}_x86_64"; done
PD="$PD --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any"
[ -f $W/dl/vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl ] || $PD -d $W/dl vllm==0.26.0
for spec in pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 \
  msgspec==0.23.0 pyzmq==27.3.0 openai==2.54.0 jiter==0.19.0 distro==1.9.0 sniffio==1.3.1 pybase64==1.5.1 cachetools==8.0.2 \
  cbor2==6.3.0 blake3==1.0.11 partial-json-parser==0.2.1.1.post7 mistral_common==1.13.1 pycountry==26.2.16 \
  pydantic-extra-types==2.11.1 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 \
  openai-harmony==0.0.8 llguidance==1.7.6 xgrammar==0.2.8 apache-tvm-ffi==0.1.15.post2 fastapi==0.136.3 starlette==1.10.0 \
  lm-format-enforcer==0.11.3 interegular==0.3.3; do
  $PD -q -d $W/whl "$spec"
done
cd $W/vx && unzip -q -o $W/dl/vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl
mkdir -p $REPO/.gpu/a $REPO/.gpu/b/whl $REPO/.gpu/s
# payload A: the 79 MB custom-op library (xz -9 -> 55.9 MB)
xz -T0 -9 -c vllm/_C_stable_libtorch.abi3.so > $REPO/.gpu/a/C_stable.so.xz
sha256sum vllm/_C_stable_libtorch.abi3.so | awk '{print $1}' > $REPO/.gpu/a/C_stable.sha256
# payload B: rest of vllm minus FA2 (305 MB raw), MoE kernels, Rust frontend binary, deep_gemm .so for other Pythons (xz -9 -> 16.6 MB)
tar --exclude='vllm/_C_stable_libtorch.abi3.so' --exclude='vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so' \
    --exclude='vllm/_moe_C_stable_libtorch.abi3.so' --exclude='vllm/vllm-rs' \
    --exclude='vllm/third_party/deep_gemm/_C.cpython-310-x86_64-linux-gnu.so' --exclude='vllm/third_party/deep_gemm/_C.cpython-311-x86_64-linux-gnu.so' \
    --exclude='vllm/third_party/deep_gemm/_C.cpython-313-x86_64-linux-gnu.so' --exclude='vllm/third_party/deep_gemm/_C.cpython-314-x86_64-linux-gnu.so' \
    -cf - vllm vllm-0.26.0.dist-info | xz -T0 -9 > $REPO/.gpu/b/vllm_rest.tar.xz
cp $W/whl/*.whl $REPO/.gpu/b/whl/
# optional tiny checkpoint, and the scripts
TINY=${2:-}
if [ -n "$TINY" ]; then rm -rf $REPO/.gpu/a/qwen25vl; cp -r "$TINY" $REPO/.gpu/a/qwen25vl; fi
cp -r $HERE/{setup.sh,callA.sh,proofs.sh,bench.sh,tp2.sh,llava.sh,common.sh,summarize.py,bench3b.py,make_media.py} $REPO/.gpu/s/
cp -r $HERE/qwen2_5_vl_3b_shape $REPO/.gpu/s/qwen3b
# mmrun's own dependencies that the device image lacks (mmrun itself travels as tracked files)
for spec in soundfile==0.13.1 cffi==2.0.0 pycparser==2.23 platformdirs==4.5.0; do
  $PD -q -d $REPO/.gpu/b/whl "$spec"
done
# tiny random-weight checkpoints, built here by mmrun's own builders (see mmrun/tiny)
rm -rf $REPO/.gpu/t && mkdir -p $REPO/.gpu/t
$REPO/.venv/bin/python - "$REPO/.gpu/t" <<'PY'
import json, sys
from pathlib import Path
from mmrun.tiny import builders
out = Path(sys.argv[1])
args = {}
for modality, key in (("image", "qwen2_5_vl"), ("image", "llava"), ("audio", "whisper"), ("audio", "qwen2_audio")):
    ckpt = builders()[(modality, key)](out / key)
    args[key] = dict(ckpt.engine_args)
(out / "engine_args.json").write_text(json.dumps(args, indent=1))
PY
du -sb $REPO/.gpu/a $REPO/.gpu/b $REPO/.gpu/s $REPO/.gpu/t   # each must stay < 67108864 bytes (64 MiB)
