"""Figure 5: what mmrun computes per model that a second run could read from disk.

argv[1]: the model folder; argv[2]: the number of images; argv[3]: the mode.
- "alone": mmrun's order, in a fresh process: import transformers, load the processor,
  render the chat template (then load again and render again: no import left to pay), read
  vLLM's supported architectures (``mmrun.support.vllm_info``); then what ``vllm.LLM(...)``
  does in the main process in any case: import vLLM, load the processor through vLLM's own
  helper (vLLM processes the inputs with it).
- "after-vllm": vLLM's part first, then mmrun's load and render: what the rendering adds to a
  run whose imports vLLM has already paid, i.e. what a cached prompt would save.
"""

import time

START = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402


def clock(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> None:
    model, count, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    result = {}

    def vllm_part() -> None:
        _, result["import_vllm_s"] = clock(lambda: __import__("vllm"))
        from vllm.transformers_utils.processor import get_processor

        _, result["vllm_loads_processor_s"] = clock(lambda: get_processor(model))

    begin = time.perf_counter()
    if mode == "after-vllm":
        vllm_part()
    _, result["import_transformers_s"] = clock(lambda: __import__("transformers"))
    from mmrun.prompts import media_first_messages
    from mmrun.support import vllm_info
    from mmrun.templates import HFTemplateRenderer

    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        *media_first_messages("image", count, "What is the content of each image?"),
    ]
    renderer = HFTemplateRenderer(model)
    _, result["load_processor_s"] = clock(lambda: renderer.processor)
    prompt, result["render_s"] = clock(lambda: renderer.render(messages, source="processor"))
    if mode == "alone":
        _, result["load_processor_again_s"] = clock(lambda: HFTemplateRenderer(model).processor)
        _, result["render_again_s"] = clock(lambda: renderer.render(messages, source="processor"))
        vllm_info.cache_clear()
        _, result["vllm_info_s"] = clock(vllm_info)
        vllm_part()
    result["total_s"] = time.perf_counter() - begin
    result["prompt_chars"] = len(prompt)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
