"""``python3 -m mmrun`` with measurement switches, for the start-up gap runs (issue 16 item 1).

Each switch tries one suspected cause of mmrun's slower start without editing mmrun: the
same CLI runs, with parts of mmrun patched at run time. MMSW (comma-separated) picks them:

- ``preimport``: import vLLM (and ``vllm.LLM``) before mmrun's CLI is imported, so that no
  media thread or mmrun import runs beside vLLM's import.
- ``workers1``: decode the media with one worker thread instead of 12 during the start.
- ``render_thread``: load the model's processor/tokenizer (what the prompt renders with) in a
  thread once ``import vllm`` is done, during ``vllm.LLM()``, instead of after it.
- ``generate``: the engine's old path: one ``LLM.generate`` call for all submitted prompts,
  instead of ``LLM.enqueue`` + ``llm_engine.step()``.
- ``nothreads``: no frontend torch threads (mmrun.engine.use_frontend_threads does nothing).
- ``pollslice``: once results flow, mmrun's loop (``Runner.drive``) asks for them between
  two submissions whenever the engine has any (after nearly every engine step), so it submits
  about one request per step; with this switch it asks at most every ``MMSW_POLL_SLICE``
  seconds (0.5) while it still has requests to submit, and then takes every queued output
  without waiting (the hypothesis for mmrun's 80% GPU busy against raw vLLM's 94%).

- ``replicawin``: a replica of ``-dp N`` keeps ``MMSW_REPLICA_WINDOW`` (1.25) x
  ``max_num_seqs`` prompts in its engine instead of 2 x: the first replica ready then takes
  less of the data set at once, so the replicas end closer together.

- ``gcfreeze``: ``gc.collect()`` then ``gc.freeze()`` right before ``vllm.LLM()``: the
  objects of mmrun's process move out of the collector's reach, so that the engine core vLLM
  forks from it does not walk them again in each full collection (a suspect for its slower
  load of the compile cache). mmrun does this itself since bf9ca07 (``heap_frozen``).
- ``nofreeze``: vLLM starts without mmrun's ``heap_frozen`` (no collection, no
  ``gc.freeze()`` around ``vllm.LLM()``): the engine core inherits the collector's state as
  the raw script's does.
- ``nowarm``: no warm-up thread (the first prompt's processor load) during the start.

Prints ``MMSW <switches> <seconds>`` on stderr for what it did before mmrun started.
usage: MMSW=preimport,workers1 python3 mmsw.py image -m qwen2_5_vl ...
"""

from __future__ import annotations

import os
import sys
import threading
import time

T0 = time.perf_counter()
SWITCHES = {s.strip() for s in os.environ.get("MMSW", "").split(",") if s.strip()}
KNOWN = {
    "preimport",
    "workers1",
    "render_thread",
    "generate",
    "nothreads",
    "pollslice",
    "replicawin",
    "gcfreeze",
    "nowarm",
    "nofreeze",
}
if SWITCHES - KNOWN:
    sys.exit(f"mmsw: unknown switch(es) {sorted(SWITCHES - KNOWN)}; known: {sorted(KNOWN)}")

if "preimport" in SWITCHES:
    import vllm  # noqa: F401
    from vllm import LLM  # noqa: F401

print(f"MMSW {','.join(sorted(SWITCHES)) or '-'} {time.perf_counter() - T0:.2f}", file=sys.stderr)

if "workers1" in SWITCHES:
    import mmrun.media

    mmrun.media.DOWNLOAD_WORKERS = 1

if "nothreads" in SWITCHES:
    import mmrun.engine

    mmrun.engine.use_frontend_threads = lambda engines_on_host=1: None

if "pollslice" in SWITCHES:
    import mmrun.engine

    _slice = float(os.environ.get("MMSW_POLL_SLICE", "0.5"))
    _has_output, _poll = mmrun.engine.Engine.has_output, mmrun.engine.Engine.poll
    _last = [time.perf_counter()]

    def _has_output_sliced(self):  # type: ignore[no-untyped-def]
        return _has_output(self) and time.perf_counter() - _last[0] >= _slice

    def _poll_drained(self):  # type: ignore[no-untyped-def]
        finished = _poll(self)
        while _has_output(self):
            finished += _poll(self)
        _last[0] = time.perf_counter()
        return finished

    mmrun.engine.Engine.has_output = _has_output_sliced  # type: ignore[method-assign]
    mmrun.engine.Engine.poll = _poll_drained  # type: ignore[method-assign]

if "replicawin" in SWITCHES:
    import mmrun.runner

    _factor = float(os.environ.get("MMSW_REPLICA_WINDOW", "1.25"))
    _window = mmrun.runner.Runner.window

    def _replica_window(self, replica=False):  # type: ignore[no-untyped-def]
        if not replica:
            return _window(self, replica)
        return int(_factor * int(self.plan.engine_args.get("max_num_seqs") or 256))

    mmrun.runner.Runner.window = _replica_window  # type: ignore[method-assign]

if "gcfreeze" in SWITCHES:
    import gc

    import mmrun.engine

    _construct_plain = mmrun.engine._construct

    def _construct_frozen(vllm, engine_args):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        gc.collect()
        gc.freeze()
        print(
            f"MMSW gcfreeze {gc.get_freeze_count()} objects in {time.perf_counter() - t:.2f} s",
            file=sys.stderr,
        )
        return _construct_plain(vllm, engine_args)

    mmrun.engine._construct = _construct_frozen

if "nofreeze" in SWITCHES:
    import contextlib

    import mmrun.engine

    mmrun.engine.heap_frozen = contextlib.nullcontext

if "nowarm" in SWITCHES:
    import mmrun.engine

    mmrun.engine._warm = lambda work, constructed, failed: None

if "generate" in SWITCHES:
    import mmrun.engine

    _init = mmrun.engine.Engine.__init__

    def _init_generate(self, llm):  # type: ignore[no-untyped-def]
        _init(self, llm)
        self._streaming = False

    mmrun.engine.Engine.__init__ = _init_generate  # type: ignore[method-assign]

if "render_thread" in SWITCHES:
    import mmrun.engine
    import mmrun.runner

    _state: dict = {}
    _start = mmrun.runner.Runner.start
    _construct = mmrun.engine._construct

    def _start_with_render(self, resolver, pipeline, abort_on_media):  # type: ignore[no-untyped-def]
        _state["renderer"] = self.renderer
        try:
            return _start(self, resolver, pipeline, abort_on_media)
        finally:
            thread = _state.pop("thread", None)
            if thread is not None:
                thread.join()
                print(f"MMSW render_thread loaded in {_state.get('load_s')} s", file=sys.stderr)

    def _construct_with_render(vllm, engine_args):  # type: ignore[no-untyped-def]
        renderer = _state.get("renderer")
        if renderer is not None:

            def load() -> None:
                t = time.perf_counter()
                try:
                    renderer.processor  # noqa: B018
                except Exception as exc:  # a model rendered by its tokenizer alone
                    print(f"MMSW render_thread: processor: {exc}", file=sys.stderr)
                try:
                    renderer.tokenizer  # noqa: B018
                except Exception as exc:
                    print(f"MMSW render_thread: tokenizer: {exc}", file=sys.stderr)
                _state["load_s"] = round(time.perf_counter() - t, 2)

            thread = threading.Thread(target=load, name="mmsw-render", daemon=True)
            _state["thread"] = thread
            thread.start()
        return _construct(vllm, engine_args)

    mmrun.runner.Runner.start = _start_with_render  # type: ignore[method-assign]
    mmrun.engine._construct = _construct_with_render

if __name__ == "__main__":  # not in a spawned child (vLLM's engine core re-imports __main__)
    from mmrun.cli.main import main

    main()
