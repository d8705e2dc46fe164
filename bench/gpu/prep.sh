#!/bin/bash
# Builds what the GPU machine needs (it has torch 2.11 for CUDA 13 and Python 3.12, and no
# network) into REPO/.gpu/, a folder ignored through REPO/.git/info/exclude:
#   .gpu/a1, .gpu/a2  what is installed, in two halves (a device call carries at most 64 MiB,
#                     the checkout included): vLLM 0.26.0's custom-op library (xz, split in
#                     two), with a1 the dependencies the machine lacks (vLLM's and mmrun's),
#                     with a2 the rest of vLLM (less FlashAttention 2 and the MoE kernels,
#                     which a dense bf16 model on Hopper never loads)
#   .gpu/r            `vllm run-batch`'s server dependencies (xz)
#   .gpu/s            these scripts, the model folders (Qwen2.5-VL-3B and Whisper
#                     large-v3-turbo shapes, full-vocab tokenizers; xz) and a
#                     copy of MMRUN_SRC's mmrun package (default: this checkout's), and
#                     with BASE_SRC=DIR, DIR's mmrun too (throughput.py's mmrun-base)
# usage: prep.sh REPO [--scripts-only]          downloads are kept in $WORK (default ~/.cache/gpuprep)
set -euo pipefail
REPO=$(cd "${1:?usage: prep.sh REPO [--scripts-only]}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
MMRUN_SRC=${MMRUN_SRC:-$(cd "$HERE/../.." && pwd)}
W=${WORK:-$HOME/.cache/gpuprep}; mkdir -p "$W/dl" "$W/whl" "$W/rb"
G=$REPO/.gpu
EXCLUDE=$(cd "$REPO" && git rev-parse --path-format=absolute --git-path info/exclude)  # a worktree's too
mkdir -p "$(dirname "$EXCLUDE")"
grep -qx '/.gpu/' "$EXCLUDE" 2>/dev/null || echo '/.gpu/' >> "$EXCLUDE"
PD="env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp"
for n in 28 27 26 24 17 31 34 35; do PD="$PD --platform manylinux_2_${n}_x86_64"; done
PD="$PD --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any"

if [ "${2:-}" != --scripts-only ]; then
  VW=$W/dl/vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl
  [ -f "$VW" ] || $PD -d "$W/dl" vllm==0.26.0
  # vLLM's dependencies the machine lacks, then mmrun's (soundfile, platformdirs, num2words)
  for spec in pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
      typing-extensions==4.16.0 msgspec==0.23.0 pyzmq==27.3.0 openai==2.54.0 jiter==0.19.0 distro==1.9.0 \
      sniffio==1.3.1 pybase64==1.5.1 cachetools==8.0.2 cbor2==6.3.0 blake3==1.0.11 partial-json-parser==0.2.1.1.post7 \
      mistral_common==1.13.1 pycountry==26.2.16 pydantic-extra-types==2.11.1 jsonschema==4.26.0 \
      jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 openai-harmony==0.0.8 \
      llguidance==1.7.6 xgrammar==0.2.8 apache-tvm-ffi==0.1.15.post2 fastapi==0.136.3 starlette==1.10.0 \
      lm-format-enforcer==0.11.3 interegular==0.3.3 compressed-tensors==0.17.0 loguru==0.7.3 \
      soundfile==0.13.1 cffi==2.0.0 pycparser==2.23 platformdirs==4.5.0 num2words==0.5.14; do
    ls "$W/whl" | grep -qi "^$(echo "${spec%%==*}" | tr - _)-${spec##*==}-" || $PD -d "$W/whl" "$spec"
  done
  # `vllm run-batch`'s server dependencies (einops, tqdm, urllib3 and uvloop are the machine's)
  for name in aiohappyeyeballs aiohttp aiosignal annotated_doc anthropic attrs docstring_parser \
      frozenlist h11 httpcore2 httptools httpx2 ijson jmespath lark model_hosting_container_standards \
      multidict opentelemetry_api prometheus_client prometheus_fastapi_instrumentator propcache \
      python_json_logger python_multipart supervisor truststore uvicorn watchfiles websockets yarl; do
    ls "$W/rb" | grep -qi "^${name}-" || $PD -d "$W/rb" "$name"
  done
  rm -rf "$G/a1" "$G/a2" "$G/r" && mkdir -p "$G/a1" "$G/a2" "$G/r"
  if [ ! -f "$W/C_stable.so.xz" ]; then
    rm -rf "$W/vx" && mkdir -p "$W/vx" && (cd "$W/vx" && unzip -q -o "$VW")
    xz -T0 -9 -c "$W/vx/vllm/_C_stable_libtorch.abi3.so" > "$W/C_stable.so.xz"
    sha256sum "$W/vx/vllm/_C_stable_libtorch.abi3.so" | cut -d' ' -f1 > "$W/C_stable.sha256"
    (cd "$W/vx" && tar --exclude='vllm/_C_stable_libtorch.abi3.so' --exclude='vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so' \
        --exclude='vllm/_moe_C_stable_libtorch.abi3.so' --exclude='vllm/vllm-rs' --exclude='vllm/third_party/fmha_sm100' \
        --exclude='vllm/third_party/deep_gemm/include' --exclude='vllm/third_party/deep_gemm/_C.cpython-31[0134]-x86_64-linux-gnu.so' \
        -cf - vllm vllm-0.26.0.dist-info) | xz -T0 -9 > "$W/vllm_rest.tar.xz"
  fi
  split -n 2 -d "$W/C_stable.so.xz" "$W/part"
  mv "$W/part00" "$G/a1/" && mv "$W/part01" "$G/a2/" && cp "$W/C_stable.sha256" "$G/a2/"
  cp "$W/vllm_rest.tar.xz" "$G/a2/"
  for set in whl rb; do  # installed here for Python 3.12, packed as one xz tar each
    rm -rf "$W/site-$set"
    env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null python3 -m pip install -q --no-index --no-deps --no-compile \
      --target "$W/site-$set" --python-version 3.12 --implementation cp --only-binary=:all: \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux_2_24_x86_64 --platform manylinux_2_31_x86_64 --platform any "$W/$set"/*.whl 2>&1 | grep -v "root' user" || true
    rm -rf "$W/site-$set/bin"
    (cd "$W/site-$set" && tar cf - .) | xz -T0 -9 > "$G/$( [ $set = whl ] && echo a1 || echo r )/$set.tar.xz"
  done
fi
rm -rf "$G/s" && mkdir -p "$G/s/py"
cp "$HERE"/*.py "$HERE"/device.sh "$G/s/"
cp -r "$MMRUN_SRC/mmrun" "$G/s/py/" && find "$G/s/py" -name __pycache__ -prune -exec rm -rf {} +
if [ -n "${BASE_SRC:-}" ]; then  # another mmrun, for throughput.py's mmrun-base variant
  mkdir -p "$G/s/py-base" && cp -r "$BASE_SRC/mmrun" "$G/s/py-base/"
  find "$G/s/py-base" -name __pycache__ -prune -exec rm -rf {} +
fi
for shape in qwen2_5_vl_3b_shape:qwen3b whisper_large_v3_turbo_shape:whisper; do
  python3 "$HERE/full_vocab.py" "$HERE/${shape%%:*}" "$W/${shape##*:}" > /dev/null
  (cd "$W/${shape##*:}" && tar cf - .) | xz -9 > "$G/s/${shape##*:}.tar.xz"
done
tracked=$(cd "$REPO" && git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
for call in "a1 s" "a2 s" "r s"; do  # (--scripts-only keeps the other folders, if any)
  size=$tracked; for d in $call; do
    if [ -d "$G/$d" ]; then size=$((size + $(du -sb "$G/$d" | cut -f1))); fi
  done
  echo "carry .gpu/{${call// /,}} + the checkout: $((size / 1048576)) MiB of 64"
done
