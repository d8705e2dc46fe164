"""Where the GPU's time goes in vLLM's engine core, step by step (diagnosis for issue 16).

Put this folder first on PYTHONPATH and set MMPHASES_DIR: in the process that runs vLLM's GPU
model runner (the engine core), every real step gets CUDA events recorded on the stream the
runner enqueues on, at:

    a   execute_model entered      e0/e1  around the vision/audio encoder (when it runs)
    b   execute_model returned     c/d    around sample_tokens

and, once the step's last event has completed (checked without waiting at the next step), one
JSON line is appended to MMPHASES_DIR/<pid>.jsonl with the step's wall time, request and token
counts, encoder items and the events' times in milliseconds on the GPU's clock (from the first
event of the process). The time between two events is GPU time along the stream, idle gaps
inside it included (e.g. an eager encoder whose kernels are launched slower than they run).
Dummy runs, warm-up runs during CUDA graph capture and anything while a stream captures are
left out. No effect without MMPHASES_DIR; bench/gpu/phases.py summarises the files.

vLLM 0.26 runs Qwen2.5-VL with its newer model runner (vllm/v1/worker/gpu/model_runner.py,
the encoder in gpu/mm/encoder_runner.py); the older one (vllm/v1/worker/gpu_model_runner.py)
is patched the same way when that is the one loaded.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

_DIR = os.environ.get("MMPHASES_DIR")

_RUNNERS = {
    "vllm.v1.worker.gpu.model_runner": ("GPUModelRunner", None),
    "vllm.v1.worker.gpu_model_runner": ("GPUModelRunner", "_execute_mm_encoder"),
}
_ENCODERS = {"vllm.v1.worker.gpu.mm.encoder_runner": ("EncoderRunner", "execute_mm_encoder")}


class _Recorder:
    def __init__(self) -> None:
        self.off = False  # set for good after the probe's own first failure
        self.base = None
        self.step: dict | None = None
        self.pending: list[dict] = []
        self.out = None
        # the engine thread adds steps; a background thread also writes finished ones, so
        # that the last steps before the process ends are not lost
        self.lock = threading.Lock()

    def event(self):  # type: ignore[no-untyped-def]
        import torch

        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        if self.base is None:
            self.base = ev
        return ev

    def capturing(self) -> bool:
        """True when the probe must stay out: off, or a CUDA graph is being captured."""
        if self.off:
            return True
        try:
            import torch

            return bool(torch.cuda.is_current_stream_capturing())
        except Exception:
            self.off = True
            return True

    def guard(self, fn, *args):  # type: ignore[no-untyped-def]
        """fn(*args), or None (and the probe off) when the probe itself fails."""
        if self.off:
            return None
        try:
            return fn(*args)
        except Exception as exc:
            self.off = True
            sys.stderr.write(f"mmphases: probe off: {exc!r}\n")
            return None

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        done = []
        for rec in self.pending:
            last = rec.get("d") or rec.get("b")
            if last is None or not last.query():
                break
            done.append(rec)
        if not done:
            return
        if self.out is None:
            os.makedirs(_DIR, exist_ok=True)  # type: ignore[arg-type]
            path = os.path.join(_DIR, f"{os.getpid()}.jsonl")  # type: ignore[arg-type]
            self.out = open(path, "a")  # noqa: SIM115 (kept open for the process)
        for rec in done:
            line = {k: v for k, v in rec.items() if not hasattr(v, "query")}
            for k in ("a", "e0", "e1", "b", "c", "d"):
                if rec.get(k) is not None:
                    line[k] = round(self.base.elapsed_time(rec[k]), 3)
            self.out.write(json.dumps(line) + "\n")
        self.out.flush()
        del self.pending[: len(done)]


_REC = _Recorder()


def _wrap_execute(orig):  # type: ignore[no-untyped-def]
    def execute_model(self, scheduler_output, *args, **kwargs):  # type: ignore[no-untyped-def]
        if kwargs.get("dummy_run") or _REC.capturing():
            return orig(self, scheduler_output, *args, **kwargs)
        _REC.guard(_REC.flush)
        try:
            reqs = len(scheduler_output.num_scheduled_tokens)
            toks = int(scheduler_output.total_num_scheduled_tokens)
            enc = sum(len(v) for v in (scheduler_output.scheduled_encoder_inputs or {}).values())
        except Exception:
            reqs = toks = enc = -1
        rec = {"t": time.time(), "reqs": reqs, "toks": toks, "enc_items": enc}
        rec["a"] = _REC.guard(_REC.event)
        _REC.step = rec if rec["a"] is not None else None
        try:
            return orig(self, scheduler_output, *args, **kwargs)
        finally:
            if _REC.step is rec:
                rec["b"] = _REC.guard(_REC.event)
                if rec["b"] is not None:
                    with _REC.lock:
                        _REC.pending.append(rec)

    return execute_model


def _wrap_sample(orig):  # type: ignore[no-untyped-def]
    def sample_tokens(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        rec = _REC.step
        if rec is None or _REC.capturing():
            return orig(self, *args, **kwargs)
        _REC.step = None
        rec["c"] = _REC.guard(_REC.event)
        try:
            return orig(self, *args, **kwargs)
        finally:
            rec["d"] = _REC.guard(_REC.event)

    return sample_tokens


def _wrap_encoder(orig):  # type: ignore[no-untyped-def]
    def encoder(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        rec = _REC.step
        if rec is None or _REC.capturing():
            return orig(self, *args, **kwargs)
        e0 = _REC.guard(_REC.event)
        try:
            return orig(self, *args, **kwargs)
        finally:
            # several encoder calls in one step: the first start to the last end
            e1 = _REC.guard(_REC.event)
            if e0 is not None and e1 is not None:
                rec.setdefault("e0", e0)
                rec["e1"] = e1
                rec["enc_calls"] = rec.get("enc_calls", 0) + 1

    return encoder


def _patch(mod_name: str) -> None:
    mod = sys.modules[mod_name]
    if mod_name in _RUNNERS:
        cls_name, enc_name = _RUNNERS[mod_name]
        cls = getattr(mod, cls_name, None)
        # once: a forked child inherits a class its parent patched
        if cls is None or cls.__dict__.get("_mmphases"):
            return
        cls._mmphases = True
        cls.execute_model = _wrap_execute(cls.execute_model)
        cls.sample_tokens = _wrap_sample(cls.sample_tokens)
        if enc_name:
            setattr(cls, enc_name, _wrap_encoder(getattr(cls, enc_name)))
    else:
        cls_name, meth = _ENCODERS[mod_name]
        cls = getattr(mod, cls_name, None)
        if cls is not None and not cls.__dict__.get("_mmphases"):
            cls._mmphases = True
            setattr(cls, meth, _wrap_encoder(getattr(cls, meth)))


def _flush_forever() -> None:
    while not _REC.off:
        time.sleep(0.2)
        _REC.guard(_REC.flush)


def _watch() -> None:
    """Patch each module once it has been imported (vLLM imports them long before a step)."""
    todo = set(_RUNNERS) | set(_ENCODERS)
    deadline = time.time() + 900
    while todo and time.time() < deadline:
        for name in list(todo):
            mod = sys.modules.get(name)
            # a module is complete once its class exists (imports run top to bottom)
            wanted = (_RUNNERS.get(name) or _ENCODERS[name])[0]
            if mod is not None and hasattr(mod, wanted):
                _patch(name)
                todo.discard(name)
                if name in _RUNNERS:
                    _start_flusher()
        time.sleep(0.02)


_flusher: list[threading.Thread] = []


def _start_flusher() -> None:
    if not _flusher:
        _flusher.append(threading.Thread(target=_flush_forever, name="mmphases-flush", daemon=True))
        _flusher[0].start()


def _start() -> None:
    threading.Thread(target=_watch, name="mmphases", daemon=True).start()


def _after_fork() -> None:
    """vLLM forks its engine core from the frontend: a forked child has none of the parent's
    threads (the watcher, the flusher) and must not write the parent's steps as its own."""
    global _REC
    _REC = _Recorder()
    _flusher.clear()
    _start()
    if any(sys.modules.get(name) is not None for name in _RUNNERS):
        _start_flusher()  # the runner was imported (and patched) before the fork


if _DIR:
    _start()
    os.register_at_fork(after_in_child=_after_fork)
