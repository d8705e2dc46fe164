"""Figure 3's cached-media baseline: the least a script can do for the same generate call.

Import vLLM, read and decode the images from local files, start ``vllm.LLM``, generate with
the already rendered prompt. argv[1]: a JSON config.
"""

import time

START = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from vllm import LLM, SamplingParams  # noqa: E402  (the seed imports at the top)

sys.path.insert(0, str(Path(__file__).parent))
from _shared import decode, summary  # noqa: E402


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    marks = {"imported": time.perf_counter()}
    images = [decode(Path(p).read_bytes(), config["resize"]) for p in config["files"]]
    marks["read"] = time.perf_counter()
    llm = LLM(**config["engine_args"])
    marks["engine_started"] = time.perf_counter()
    outputs = llm.generate(
        {"prompt": config["prompt"], "multi_modal_data": {"image": images}},
        sampling_params=SamplingParams(**config["sampling"]),
        use_tqdm=False,
    )
    marks["generated"] = time.perf_counter()
    print(json.dumps(summary(outputs, START, marks)), flush=True)


if __name__ == "__main__":
    main()
