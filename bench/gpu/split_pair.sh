#!/bin/bash
# Diagnostic for issue 15: two independent one-engine mmrun processes (the 1024 x 4 manifest split
# in halves, one per GPU, started together) and two raw vLLM scripts at once (256 x 4, one per GPU):
# is -dp 2's low scaling mmrun's parallel path, or the host with two engines?
set -u
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=/tmp/site:$PWD
[ -f /tmp/site/.done ] || { echo COLD; exit 3; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
R=/tmp/res/split; rm -rf $R; mkdir -p $R
head -512 /tmp/bench/ms1024.jsonl > $R/h0.jsonl; tail -512 /tmp/bench/ms1024.jsonl > $R/h1.jsonl
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 > $R/smi.csv &
SMI=$!
MM="image -m qwen2_5_vl --model /tmp/qwen3b --overwrite -v --temperature 0 --max-tokens 64 --sampling-arg ignore_eos=true --engine-arg load_format=dummy --engine-arg dtype=bfloat16 --engine-arg max_model_len=8192 --engine-arg max_num_seqs=256"
date +%T; echo "two mmrun -dp 1, 512 x 4 each"
python3 .gpu/s/ttr.py --dir $R/m0 --watch $R/m0.jsonl --timeout 200 --env CUDA_VISIBLE_DEVICES=0 -- python3 -m mmrun $MM --input $R/h0.jsonl -o $R/m0.jsonl & P0=$!
python3 .gpu/s/ttr.py --dir $R/m1 --watch $R/m1.jsonl --timeout 200 --env CUDA_VISIBLE_DEVICES=1 -- python3 -m mmrun $MM --input $R/h1.jsonl -o $R/m1.jsonl & P1=$!
wait $P0 $P1
date +%T; echo "two raw, 256 x 4 each"
python3 .gpu/s/ttr.py --dir $R/r0 --result '^RESULT_DONE' --timeout 150 --env CUDA_VISIBLE_DEVICES=0 -- python3 .gpu/s/raw_bench.py --model /tmp/qwen3b --set s256:/tmp/bench/s256 & P0=$!
python3 .gpu/s/ttr.py --dir $R/r1 --result '^RESULT_DONE' --timeout 150 --env CUDA_VISIBLE_DEVICES=1 -- python3 .gpu/s/raw_bench.py --model /tmp/qwen3b --set s256:/tmp/bench/s256 & P1=$!
wait $P0 $P1
kill $SMI
date +%T
python3 - <<'PY' | tee $OUT/summary.txt
import sys; sys.path.insert(0, ".gpu/s")
from pathlib import Path
from common import read_run
R = Path("/tmp/res/split")
for name in ("m0", "m1", "r0", "r1"):
    rec = read_run(R / name)
    ready = rec.get("marks", {}).get("init_engine"); last = rec.get("last_line_s"); first = rec.get("first_line_s")
    n = sum(1 for _ in open(R / f"{name}.jsonl")) if (R / f"{name}.jsonl").exists() else 0
    rate = round(n / (last - ready), 2) if ready and last else None
    print(name, "rc", rec.get("rc"), "exit_s", rec.get("exit_s"), "ready", ready, "first", first, "last", last, "lines", n, "p/s from ready", rate, "raw", rec.get("raw"), rec.get("errors"))
PY
tar czf $OUT/split.tgz -C $R .
