"""The raw-vLLM baseline: what a hand-written script with vLLM's default settings does, on the
same work as mmrun's benchmark runs (no mmrun code).

The Qwen2.5-VL-3B-shaped checkpoint with dummy weights; each prompt is the exact text mmrun's
qwen2_5_vl loader renders for 4 images (checked on the CPU: bench/gpu/README.md), with 4
images read from disk; greedy, 64 tokens, ``ignore_eos``. Per set: its images are loaded, its
first ``--warmup`` prompts run once untimed (as ``mmrun --warmup`` does), then all its prompts
in one ``generate`` call. The texts go to ``--out`` for comparison with mmrun's.

Engine arguments: the script's (below) updated with ``--args`` JSON. ``--metrics`` turns on
vLLM's statistics and prints its request metrics after each set; ``--profile DIR`` runs the
first set under vLLM's torch profiler (its table lands in DIR/profiler_out_0.txt).

usage: raw_bench.py --model DIR --set NAME:DIR [--set ...] [--args JSON] [--out FILE]
Prints RAW_ARGS, RAW_ENGINE, RESULT_BATCH {json} per set, RESULT_DONE.
"""

import argparse
import json
import os
import sys
import time

T0 = time.time()
HEAD = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
VISION = "<|vision_start|><|image_pad|><|vision_end|>"
QUESTION = "What is the content of each image?"
TAIL = "<|im_end|>\n<|im_start|>assistant\n"


def prompt_text(n_images: int) -> str:
    return HEAD + VISION * n_images + QUESTION + TAIL


def load_images(folder: str) -> list:
    from PIL import Image

    images = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".png"):
            with Image.open(os.path.join(folder, name)) as im:
                im.load()
                images.append(im if im.mode == "RGB" else im.convert("RGB"))
    return images


def metrics_summary(llm) -> dict:
    wanted = (
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_inference_time_seconds",
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:iteration_tokens_total",
        "vllm:mm_cache_queries",
        "vllm:mm_cache_hits",
        "vllm:num_preemptions",
    )
    found = {}
    for m in llm.get_metrics():
        if m.name in wanted:
            if hasattr(m, "sum"):
                found[m.name] = {"count": m.count, "sum": round(m.sum, 4)}
            elif hasattr(m, "value"):
                found[m.name] = m.value
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--set", action="append", default=[], help="NAME:FOLDER of PNGs")
    ap.add_argument("--per", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--args", default="{}")
    ap.add_argument("--out", default="")
    ap.add_argument("--metrics", action="store_true")
    ap.add_argument("--profile", default="")
    args = ap.parse_args()
    t_imp0 = time.time()
    from vllm import LLM, SamplingParams

    t_imp = time.time()
    kwargs = {
        "model": args.model,
        "load_format": "dummy",
        "dtype": "bfloat16",
        "max_model_len": 8192,
        "limit_mm_per_prompt": {"image": args.per, "video": 0},
        "seed": 0,
    }
    kwargs.update(json.loads(args.args))
    if args.metrics:
        kwargs["disable_log_stats"] = False
    if args.profile:
        kwargs["profiler_config"] = {
            "profiler": "torch",
            "torch_profiler_dir": args.profile,
            "torch_profiler_with_stack": False,
        }
    print("RAW_ARGS " + json.dumps(kwargs), flush=True)
    llm = LLM(**kwargs)
    t_eng = time.time()
    print(
        f"RAW_ENGINE import_s={t_imp - t_imp0:.2f} engine_s={t_eng - t_imp:.2f} "
        f"since_start_s={t_eng - T0:.2f}",
        flush=True,
    )
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
    text = prompt_text(args.per)
    texts: dict = {}
    for i, spec in enumerate(args.set):
        name, _, folder = spec.partition(":")
        t_load = time.time()
        images = load_images(folder)
        n = len(images) // args.per
        prompts = [
            {
                "prompt": text,
                "multi_modal_data": {"image": images[j * args.per : (j + 1) * args.per]},
            }
            for j in range(n)
        ]
        load_s = time.time() - t_load
        t_warm = time.time()
        if args.warmup:
            llm.generate(prompts[: args.warmup], params, use_tqdm=False)
        warm_s = time.time() - t_warm
        if args.profile and i == 0:
            llm.start_profile()
        start = time.time()
        outs = llm.generate(prompts, params, use_tqdm=False)
        end = time.time()
        if args.profile and i == 0:
            t_stop = time.time()
            llm.stop_profile()
            print(f"RAW_PROFILE stop_s={time.time() - t_stop:.1f}", flush=True)
        wall = end - start
        pt = sum(len(o.prompt_token_ids) for o in outs)
        ot = sum(len(o.outputs[0].token_ids) for o in outs)
        texts[name] = [o.outputs[0].text for o in outs]
        result = {
            "set": name,
            "n_prompts": n,
            "images": n * args.per,
            "prompt_tokens": pt,
            "output_tokens": ot,
            "batch_wall_s": round(wall, 3),
            "prompts_per_s": round(n / wall, 2),
            "output_tok_per_s": round(ot / wall, 1),
            "total_tok_per_s": round((pt + ot) / wall, 1),
            "load_s": round(load_s, 2),
            "warmup_s": round(warm_s, 2),
            "start_wall": round(start, 3),
            "end_wall": round(end, 3),
            "since_start_s": round(end - T0, 2),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "torch_threads": __import__("torch").get_num_threads(),
        }
        print("RESULT_BATCH " + json.dumps(result), flush=True)
        if args.metrics:
            print("RAW_METRICS " + json.dumps({"set": name, **metrics_summary(llm)}), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(texts, f)
    print(f"RESULT_DONE total_s={time.time() - T0:.1f}", flush=True)
    sys.stdout.flush()
    os._exit(0)  # as mmrun ends: no interpreter teardown


if __name__ == "__main__":
    sys.exit(main())
