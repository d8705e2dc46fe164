"""Figure 4, in one process with one ``vllm.LLM``: 32 prompts of 2 distinct images each in
ONE ``generate`` call vs 32 ``generate`` calls of one prompt. argv[1]: a JSON config with
"engine_args", "prompt", "sampling", "warmup", "separate", "batched", "batched_again" (lists of file pairs, all distinct
images). Order: warm-up, one call (the first large batch), 32 calls, one call again.
"""

import time

START = time.perf_counter()

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from PIL import Image  # noqa: E402  (the seed imports at the top)
from vllm import LLM, SamplingParams  # noqa: E402  (the seed imports at the top)


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())

    def prompts(pairs: list[list[str]]) -> list[dict]:
        return [
            {
                "prompt": config["prompt"],
                "multi_modal_data": {"image": [Image.open(p).convert("RGB") for p in pair]},
            }
            for pair in pairs
        ]

    warmup, separate, batched, again = (
        prompts(config[k]) for k in ("warmup", "separate", "batched", "batched_again")
    )
    llm = LLM(**config["engine_args"])
    params = SamplingParams(**config["sampling"])

    def counts(outputs: list) -> dict:
        return {
            "prompts": len(outputs),
            "prompt_tokens": sum(len(o.prompt_token_ids or []) for o in outputs),
            "completion_tokens": sum(len(o.outputs[0].token_ids) for o in outputs),
        }

    t = time.perf_counter()
    llm.generate(warmup, sampling_params=params, use_tqdm=False)
    warmup_s = time.perf_counter() - t

    t = time.perf_counter()
    first = llm.generate(batched, sampling_params=params, use_tqdm=False)
    first_s = time.perf_counter() - t

    # Rounds, each on images not seen before (vLLM caches processed media): 32 calls, then
    # one call; the medians are the figures (one round alone is noisy on a shared machine).
    rounds = [(separate, again)] + [(prompts(s), prompts(b)) for s, b in config["rounds"]]
    separate_all, batched_all = [], []
    for separate_set, batched_set in rounds:
        t = time.perf_counter()
        outs = []
        for prompt in separate_set:
            outs += llm.generate([prompt], sampling_params=params, use_tqdm=False)
        separate_all.append(time.perf_counter() - t)
        separate_counts = counts(outs)
        t = time.perf_counter()
        batched_outs = llm.generate(batched_set, sampling_params=params, use_tqdm=False)
        batched_all.append(time.perf_counter() - t)
    separate_s = statistics.median(separate_all)
    batched_s = statistics.median(batched_all)
    outs = batched_outs
    print(
        json.dumps(
            {
                "warmup_s": warmup_s,
                "separate": {"s": separate_s, "all_s": separate_all, **separate_counts},
                "batched_first": {"s": first_s, **counts(first)},
                "batched": {"s": batched_s, "all_s": batched_all, **counts(outs)},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
