"""The raw-vLLM baseline for Whisper: what a hand-written transcription script does with
vLLM's defaults (no mmrun).

Reads mmrun's manifest (media.py --task whisper), loads each clip as mmrun decodes it (float32
samples at the file's own sample rate, with soundfile), gives it the decoder prompt mmrun's
whisper loader gives (``<|startoftranscript|>``; vLLM builds the encoder's side from the
clip), and runs every prompt in one ``LLM.generate`` (greedy, ``ignore_eos``). The engine
arguments are those of mmrun's whisper row that the model needs (``max_model_len`` 448, one
clip per prompt, seed 0), nothing mmrun chooses for a run's size. The tuned variant is the
same script with OMP_NUM_THREADS=8 in the environment (vLLM's frontend then computes each
clip's log-mel features with 8 torch threads instead of 1).

usage: raw_whisper.py --model DIR --manifest FILE --out TEXTS.json [--max-tokens N] [--args JSON]
Prints RAW_READY when the engine is up and RAW_DONE when the last result is in.
"""

import argparse
import json
import os
import sys
import time

DECODER_PROMPT = "<|startoftranscript|>"


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
    import soundfile
    from vllm import LLM, SamplingParams

    kwargs = {
        "model": args.model,
        "load_format": "dummy",
        "max_model_len": 448,
        "limit_mm_per_prompt": {"audio": 1},
        "seed": 0,
        **json.loads(args.args),
    }
    llm = LLM(**kwargs)
    print(f"RAW_READY {time.time():.3f}", flush=True)

    def load(path: str):  # the clips are mono
        return soundfile.read(path, dtype="float32")

    prompts = [
        {"prompt": DECODER_PROMPT, "multi_modal_data": {"audio": [load(line["audio"])]}}
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
