"""Figure 3's baseline: the image seed's order of work, on the tiny checkpoint.

Import vLLM (module top, as the seed), render the prompt with the processor, fetch the
images one after the other, then start ``vllm.LLM``, then generate. argv[1]: a JSON config.
"""

import time

START = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from transformers import AutoProcessor  # noqa: E402  (the seed imports at the top)
from vllm import LLM, SamplingParams  # noqa: E402  (the seed imports at the top)

sys.path.insert(0, str(Path(__file__).parent))
from _shared import fetch, summary  # noqa: E402


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    marks = {"imported": time.perf_counter()}
    processor = AutoProcessor.from_pretrained(config["engine_args"]["model"])
    prompt = processor.apply_chat_template(
        config["messages"], tokenize=False, add_generation_prompt=True
    )
    marks["rendered"] = time.perf_counter()
    images = [fetch(url, config["resize"]) for url in config["urls"]]
    marks["fetched"] = time.perf_counter()
    llm = LLM(**config["engine_args"])
    marks["engine_started"] = time.perf_counter()
    params = SamplingParams(**config["sampling"])
    outputs = llm.generate(
        {"prompt": config["prompt"], "multi_modal_data": {"image": images}},
        sampling_params=params,
        use_tqdm=False,
    )
    marks["generated"] = time.perf_counter()
    result = summary(outputs, START, marks)
    result["prompt_matches_mmrun"] = prompt == config["prompt"]
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
