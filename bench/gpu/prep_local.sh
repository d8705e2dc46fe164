#!/bin/bash
# Local preparation (no device time) of everything the GPU runs carry: vLLM 0.26.0 for CUDA 13
# (the PyPI release that pins the device's torch 2.11.0), the wheels the device lacks, these
# scripts, and mmrun's tiny checkpoints. Recipe: ../shared/notes/gpu.md; runbook: RUNBOOK.md.
#
# usage: bench/gpu/prep_local.sh REPO [--tiny-only]
#   REPO: the checkout the device tool sends (/work/main); the payloads go to REPO/.gpu/
#         (ignored through REPO/.git/info/exclude). Run it from any checkout of this script;
#         the tiny checkpoints are built from REPO's own tests/tiny with REPO's .venv.
#   --tiny-only: rebuild only .gpu/t (after new tiny builders landed) and .gpu/s.
# Downloads are kept in $WORK (default /work/gpuprep) and reused.
#
# Produces: .gpu/a  (~59 MB) vLLM's _C_stable_libtorch .so, xz       -> call A
#           .gpu/b  (~48 MB) the rest of vLLM (xz) + dependency wheels  -> every call after A
#           .gpu/s  (~1 MB)  these scripts + the Qwen2.5-VL-3B-shaped config (full-vocab tokenizer)
#           .gpu/t  (~6-12 MB) tiny checkpoints (xz tar), index.json, the test media -> proofs call
# and checks every call of RUNBOOK.md against the 64 MiB a call may carry.
set -euo pipefail
REPO=$(cd "${1:?usage: prep_local.sh REPO [--tiny-only]}" && pwd)
MODE=${2:-all}
HERE=$(cd "$(dirname "$0")" && pwd)
W=${WORK:-/work/gpuprep}; mkdir -p "$W/dl" "$W/whl" "$W/extra"
grep -qx '/.gpu/' "$REPO/.git/info/exclude" 2>/dev/null || echo '/.gpu/' >> "$REPO/.git/info/exclude"
PD="env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp"
for n in 28 27 26 24 17 31 34 35; do PD="$PD --platform manylinux_2_${n}_x86_64"; done
PD="$PD --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any"
ts() { date +%H:%M:%S; }

if [ "$MODE" != --tiny-only ]; then
  echo "$(ts) downloads (kept in $W)"
  VW=$W/dl/vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl
  [ -f "$VW" ] || $PD -q -d "$W/dl" vllm==0.26.0
  # vLLM 0.26's dependencies that the device image lacks (the list that ran on 2026-11-29)
  for spec in pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 \
    msgspec==0.23.0 pyzmq==27.3.0 openai==2.54.0 jiter==0.19.0 distro==1.9.0 sniffio==1.3.1 pybase64==1.5.1 cachetools==8.0.2 \
    cbor2==6.3.0 blake3==1.0.11 partial-json-parser==0.2.1.1.post7 mistral_common==1.13.1 pycountry==26.2.16 \
    pydantic-extra-types==2.11.1 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 \
    openai-harmony==0.0.8 llguidance==1.7.6 xgrammar==0.2.8 apache-tvm-ffi==0.1.15.post2 fastapi==0.136.3 starlette==1.10.0 \
    lm-format-enforcer==0.11.3 interegular==0.3.3; do
    ls "$W/whl" | grep -qi "^$(echo "${spec%%==*}" | tr - _)-${spec##*==}-" || $PD -q -d "$W/whl" "$spec"
  done
  # mmrun's own dependencies that the device lacks (KINDS.md's list: no soundfile, cffi,
  # pycparser, platformdirs, num2words); typer, rich, httpx, filelock, pillow, numpy,
  # huggingface_hub, transformers are there. num2words: the smolvlm processor (its docopt
  # dependency is for its command-line script only, and has no wheel).
  for spec in soundfile==0.13.1 cffi==2.0.0 pycparser==2.23 platformdirs==4.5.0 num2words==0.5.14; do
    ls "$W/extra" | grep -qi "^$(echo "${spec%%==*}" | tr - _)-${spec##*==}-" || $PD -q -d "$W/extra" "$spec"
  done

  echo "$(ts) payloads a and b"
  rm -rf "$W/vx" && mkdir -p "$W/vx" && (cd "$W/vx" && unzip -q -o "$VW")
  rm -rf "$REPO/.gpu/a" "$REPO/.gpu/b" && mkdir -p "$REPO/.gpu/a" "$REPO/.gpu/b/whl"
  # a: the 79 MB custom-op library alone (xz -9: ~56 MB)
  xz -T0 -9 -c "$W/vx/vllm/_C_stable_libtorch.abi3.so" > "$REPO/.gpu/a/C_stable.so.xz"
  sha256sum "$W/vx/vllm/_C_stable_libtorch.abi3.so" | awk '{print $1}' > "$REPO/.gpu/a/C_stable.sha256"
  # b: the rest of vLLM, less what a dense bf16 model on Hopper never loads: FlashAttention 2
  # (305 MB; FA3 is kept), the MoE kernels, the Rust frontend, DeepGEMM's JIT headers and its
  # builds for other Pythons, the Blackwell-only fmha_sm100 (imported lazily by minimax_m3 only)
  (cd "$W/vx" && tar --exclude='vllm/_C_stable_libtorch.abi3.so' --exclude='vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so' \
      --exclude='vllm/_moe_C_stable_libtorch.abi3.so' --exclude='vllm/vllm-rs' \
      --exclude='vllm/third_party/fmha_sm100' --exclude='vllm/third_party/deep_gemm/include' \
      --exclude='vllm/third_party/deep_gemm/_C.cpython-310-x86_64-linux-gnu.so' --exclude='vllm/third_party/deep_gemm/_C.cpython-311-x86_64-linux-gnu.so' \
      --exclude='vllm/third_party/deep_gemm/_C.cpython-313-x86_64-linux-gnu.so' --exclude='vllm/third_party/deep_gemm/_C.cpython-314-x86_64-linux-gnu.so' \
      -cf - vllm vllm-0.26.0.dist-info) | xz -T0 -9 > "$REPO/.gpu/b/vllm_rest.tar.xz"
  cp "$W/whl"/*.whl "$W/extra"/*.whl "$REPO/.gpu/b/whl/"
  # the architectures vLLM 0.26 registers (read by build_tiny.py, which marks the rows it lacks)
  cp "$W/vx/vllm/model_executor/models/registry.py" "$W/vllm026_registry.py"
fi

echo "$(ts) scripts (.gpu/s)"
rm -rf "$REPO/.gpu/s" && mkdir -p "$REPO/.gpu/s"
cp "$HERE"/*.sh "$HERE"/*.py "$REPO/.gpu/s/"
rm -f "$REPO/.gpu/s/prep_local.sh"
python3 "$HERE/full_vocab.py" "$HERE/qwen2_5_vl_3b_shape" "$REPO/.gpu/s/qwen3b"

echo "$(ts) tiny checkpoints (.gpu/t), built by $REPO/.venv from $REPO/tests/tiny"
rm -rf "$REPO/.gpu/t" "$W/tiny" && mkdir -p "$REPO/.gpu/t" "$W/tiny"
(cd "$REPO" && .venv/bin/python "$HERE/build_tiny.py" --repo "$REPO" --registry "$W/vllm026_registry.py" \
   --out "$W/tiny" --index "$REPO/.gpu/t/index.json" --media "$REPO/.gpu/t/media")
(cd "$W/tiny" && tar cf - .) | xz -T0 -9 > "$REPO/.gpu/t/tiny.tar.xz"

echo "$(ts) sizes"
python3 "$HERE/carry_sizes.py" "$REPO"
