"""Run the mmrun CLI unchanged, noting each ``vllm.LLM.generate``/``chat`` call it makes.

argv[1]: a file to write the calls to (JSON: one entry per call, the number of prompts);
argv[2:]: mmrun's arguments. The patch is installed on the LLM class right after mmrun has
started the engine, so nothing is imported earlier than in a plain run.
"""

import json
import sys


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    from mmrun import engine

    calls: list[dict] = []
    start = engine.start

    def counting_start(engine_args, **kwargs):  # type: ignore[no-untyped-def]
        llm = start(engine_args, **kwargs)
        cls = type(llm)
        for name in ("generate", "chat"):
            original = getattr(cls, name)

            def wrapper(self, prompts, *a, _original=original, _name=name, **k):  # type: ignore[no-untyped-def]
                calls.append(
                    {"method": _name, "prompts": len(prompts) if isinstance(prompts, list) else 1}
                )
                with open(out, "w") as f:  # now: mmrun ends its process without unwinding
                    json.dump(calls, f)
                return _original(self, prompts, *a, **k)

            setattr(cls, name, wrapper)
        return llm

    engine.start = counting_start
    from mmrun.cli.main import main as mmrun_main

    sys.argv = ["mmrun", *args]
    with open(out, "w") as f:  # no call yet
        json.dump(calls, f)
    mmrun_main()


if __name__ == "__main__":
    main()
