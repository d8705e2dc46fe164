"""The raw-vLLM baseline: what a hand-written script does with vLLM's defaults (no mmrun).

Reads mmrun's manifest (media.py), renders the prompt mmrun's qwen2_5_vl loader renders for
4 images, loads the images, and runs every prompt in one ``LLM.generate`` (greedy, 64 tokens
unless --max-tokens says otherwise, ``ignore_eos``). The tuned variant is the same script with OMP_NUM_THREADS=8 in the
environment (vLLM's frontend then preprocesses images with 8 torch threads instead of 1).

usage: raw_vllm.py --model DIR --manifest FILE --out TEXTS.json [--max-tokens N] [--args JSON]
Prints RAW_READY when the engine is up and RAW_DONE when the last result is in.
"""

import argparse
import json
import os
import sys
import time

HEAD = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
VISION = "<|vision_start|><|image_pad|><|vision_end|>"
QUESTION = "What is the content of each image?"
TAIL = "<|im_end|>\n<|im_start|>assistant\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--args", default="{}", help="engine arguments (JSON) over the defaults")
    args = ap.parse_args()
    with open(args.manifest) as f:
        lines = [json.loads(line) for line in f]
    from PIL import Image
    from vllm import LLM, SamplingParams

    kwargs = {
        "model": args.model,
        "load_format": "dummy",
        "dtype": "bfloat16",
        "max_model_len": 8192,
        "limit_mm_per_prompt": {"image": 4, "video": 0},
        "seed": 0,
        **json.loads(args.args),
    }
    llm = LLM(**kwargs)
    print(f"RAW_READY {time.time():.3f}", flush=True)

    def load(path: str):
        with Image.open(path) as im:
            return im.convert("RGB")

    prompts = [
        {
            "prompt": HEAD + VISION * len(line["image"]) + QUESTION + TAIL,
            "multi_modal_data": {"image": [load(p) for p in line["image"]]},
        }
        for line in lines
    ]
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
    outputs = llm.generate(prompts, params, use_tqdm=False)
    print(f"RAW_DONE {time.time():.3f}", flush=True)
    texts = {line["id"]: out.outputs[0].text for line, out in zip(lines, outputs, strict=True)}
    with open(args.out, "w") as f:
        json.dump(texts, f)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
