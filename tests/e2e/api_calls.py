"""The library's e2e calls, each run in a process of its own (``python -m tests.e2e.api_calls
CALL ARGS_JSON``), which prints its figures as one JSON document on its last line: a Model
starts vLLM in the process that opens it, and the threads and settings it leaves there must
not reach the tests that run after it."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import mmrun

KEY = "qwen2_5_vl"


def three_calls(args: dict[str, Any]) -> dict[str, Any]:
    """One Model, three runs over the same photos: each call's lines and its seconds to the
    first result."""
    first_result: list[float] = []
    calls: list[list[dict[str, Any]]] = []
    t0 = time.perf_counter()
    with mmrun.Model(
        KEY,
        model=args["model"],
        engine_args=args["engine_args"],
        tensor_parallel_size=1,
        max_tokens=6,
    ) as model:
        for call in range(3):
            start = t0 if call == 0 else time.perf_counter()
            results: list[dict[str, Any]] = []
            for result in model.run(args["photos"]):
                if not results:
                    first_result.append(time.perf_counter() - start)
                assert result.ok, result.error
                results.append(result.to_dict())
            calls.append(results)
        engine_start = model.timings.get("engine_start_s", 0.0)
    return {"calls": calls, "first_result": first_result, "engine_start": engine_start}


def two_models(args: dict[str, Any]) -> dict[str, Any]:
    """Two Models opened one after the other: memory while open and after each close, and
    whether each one's engine processes are gone."""
    import psutil
    from PIL import Image

    image = Image.new("RGB", (56, 56), (10, 200, 30))
    me = psutil.Process()
    mib = 1024 * 1024
    figures = []
    for _ in range(2):
        with mmrun.Model(
            KEY, model=args["model"], engine_args=args["engine_args"], tensor_parallel_size=1
        ) as model:
            answered = model.ask("What is it?", image, max_tokens=4).ok
            # Python's multiprocessing resource tracker stays for this process's lifetime
            # (the next model uses it too): not an engine.
            engines = [
                p
                for p in me.children(recursive=True)
                if "resource_tracker" not in " ".join(p.cmdline())
            ]
            held = me.memory_info().rss + sum(p.memory_info().rss for p in engines)
        gone, alive = psutil.wait_procs(engines, timeout=10)
        figures.append(
            {
                "answered": answered,
                "engines": len(engines),
                "stopped": len(gone),
                "left": [p.cmdline() for p in alive],
                "held_mib": held // mib,
                "after_mib": me.memory_info().rss // mib,
            }
        )
    return {"models": figures}


def one_row(args: dict[str, Any]) -> dict[str, Any]:
    """One row (``key`` on ``modality``'s media) by each of its ``methods``, a Model per
    method, over ``paths`` in one ``run`` call, the items at the places ``objects`` lists given
    as the media themselves (read here from their files): each method's lines and its seconds
    (engine start included)."""
    items: list[Any] = list(args["paths"])
    for place in args["objects"]:
        items[place] = {args["modality"]: media_object(args["modality"], args["paths"][place])}
    lines: dict[str, list[dict[str, Any]]] = {}
    seconds: dict[str, float] = {}
    for method in args["methods"]:
        t0 = time.perf_counter()
        with mmrun.Model(
            args["key"],
            modality=args["modality"],
            model=args["model"],
            engine_args=args["engine_args"],
            tensor_parallel_size=1,
            method=method,
            max_tokens=args["max_tokens"],
            temperature=0.0,
            sampling_args=args.get("sampling_args") or {},
            modality_options=args.get("modality_options") or {},
        ) as model:
            lines[method] = [result.to_dict() for result in model.run(items)]
        seconds[method] = round(time.perf_counter() - t0, 2)
    return {"lines": lines, "seconds": seconds}


def media_object(modality: str, path: str) -> Any:
    """The file's media as the Python object a program would hold: a PIL image, an audio
    clip's ``(samples, rate)``, a clip's ``(frames, fps)`` (every frame, RGB)."""
    if modality == "image":
        from PIL import Image

        with Image.open(path) as image:
            return image.copy()
    if modality == "audio":
        import soundfile

        samples, rate = soundfile.read(path, dtype="float32")
        return samples, rate
    import cv2
    import numpy as np

    capture = cv2.VideoCapture(path)
    fps = float(capture.get(cv2.CAP_PROP_FPS))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    capture.release()
    return np.stack(frames), fps


if __name__ == "__main__":
    call = {"three_calls": three_calls, "two_models": two_models, "one_row": one_row}[sys.argv[1]]
    print(json.dumps(call(json.loads(sys.argv[2]))))
