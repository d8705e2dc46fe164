"""A stand-in for vLLM, as far as mmrun uses it: ``LLM`` (enqueue, enqueue_chat, the engine's
step loop, generate, chat), ``SamplingParams`` and the model registry file that
``mmrun.support`` reads. Fast unit tests of the layers above the engine use it; the real
engine runs in tests/e2e.

In a test process, put this module in ``sys.modules["vllm"]`` (the ``fake_vllm`` fixture);
for a ``python -m mmrun`` subprocess, put its folder first on PYTHONPATH (``fake_vllm_env``).
Behaviour is set with class attributes in-process, or these variables in a subprocess:

- FAKE_VLLM_FAIL_START: raise this message (a ValueError) when the engine starts.
- FAKE_VLLM_FAIL_STEP: raise this message (a RuntimeError) when the engine runs.
- FAKE_VLLM_NOISE=1: print on file descriptors 1 and 2 while starting, as vLLM does.
- FAKE_VLLM_STEP_S: seconds each engine step takes (answers are instant otherwise).
- FAKE_VLLM_START_GATE=FOLDER:N: each engine, once started, waits until N engines have
  started (each leaves a file in FOLDER): the replicas of a parallel run become ready
  together, however unevenly a loaded machine starts their processes.
- FAKE_VLLM_DIE_ON_CPU=N: an engine whose process may run only on CPU core N dies (as an
  engine whose core process was killed) at its third step: a replica of a parallel run.
- A prompt (or chat question) containing REJECT is refused when submitted, as vLLM refuses
  a prompt longer than the model takes.
- A prompt containing POISON kills its engine (EngineDeadError) at every step it is taken
  into, as a request that crashes the engine core process would.
- ``LLM.die_at``: the steps (counted over every engine of the process, from 1) at which the
  engine dies once, as one whose core process was killed from outside.
- A prompt (or chat question) containing BLANK is answered with whitespace alone, one
  containing EMPTY with nothing, as a model that stops at once.
- SamplingParams ``n`` gives n outputs (the i-th: the answer with " #i", 2 + i tokens);
  ``logprobs`` k gives each token's log probabilities (see ``_logprobs``).
"""

from __future__ import annotations

import json
import os
import time
import types
from typing import Any, ClassVar

__version__ = "0.0.0+fake"


class SamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.n = kwargs.get("n", 1)
        self.logprobs = kwargs.get("logprobs")

    def __repr__(self) -> str:
        return f"SamplingParams({self.kwargs})"


class Logprob:
    """As vllm.logprobs.Logprob."""

    def __init__(self, logprob: float, rank: int, decoded_token: str | None) -> None:
        self.logprob = logprob
        self.rank = rank
        self.decoded_token = decoded_token


def _logprobs(token_ids: list[int], top: int | None) -> list[dict[int, Logprob]] | None:
    """As vLLM's: each step the sampled token first (token t: "t<t>", log probability
    -0.25 t), then ``top`` others (token 100 + r: "alt<r>", -1 - r)."""
    if top is None:
        return None
    return [
        {
            token: Logprob(-0.25 * token, 1, f"t{token}"),
            **{100 + r: Logprob(-1.0 - r, r + 1, f"alt{r}") for r in range(top)},
        }
        for token in token_ids
    ]


class _Completion:
    def __init__(
        self, text: str, token_ids: list[int], index: int = 0, top: int | None = None
    ) -> None:
        self.index = index
        self.text = text
        self.token_ids = token_ids
        self.logprobs = _logprobs(token_ids, top)
        self.finish_reason = "length"


class _Output:
    def __init__(self, request_id: str, prompt_tokens: int, text: str, params: Any = None) -> None:
        self.request_id = request_id
        self.prompt_token_ids = list(range(prompt_tokens))
        n, top = getattr(params, "n", 1), getattr(params, "logprobs", None)
        # With n > 1, the i-th output (from 1) is the first's text with " #i" and i more tokens.
        self.outputs = [_Completion(text, [1, 2], 0, top)] + [
            _Completion(f"{text} #{i}", [1, 2, *range(3, 3 + i)], i, top) for i in range(1, n)
        ]
        self.finished = True
        self.poison = False
        self.num_cached_tokens = 0  # as vLLM 0.32: the prompt tokens its prefix cache held
        self.num_cache_creation_tokens = 8  # and those it wrote to that cache


def _describe(request: Any) -> tuple[str, int]:
    """(text that decides the answer, number of media items) of a prompt or conversation."""
    if isinstance(request, list):  # a chat conversation: its last user turn
        parts = next(m["content"] for m in reversed(request) if m["role"] == "user")
        text = next(p["text"] for p in parts if p["type"] == "text")
        return text, len(parts) - 1
    data = request.get("multi_modal_data") or {}
    count = sum(len(v) for v in data.values())
    return str(request.get("prompt", request.get("prompt_token_ids"))), count


def _constrained(params: Any) -> str | None:
    """An answer within a request's structured-output constraint, as vLLM's would be: the
    first choice; for a JSON Schema, an object of its required fields, each the string "x"."""
    constraint = getattr(params, "kwargs", {}).get("structured_outputs")
    if constraint is None:
        return None
    if constraint.choice:
        return str(constraint.choice[0])
    if constraint.json is not None:
        return json.dumps({name: "x" for name in constraint.json.get("required", [])})
    if constraint.json_object:
        return "{}"
    return None


class EngineDeadError(Exception):
    """As vllm.v1.engine.exceptions.EngineDeadError: the engine core process is gone."""


class _Engine:
    def __init__(self, llm: LLM) -> None:
        self._llm = llm
        self.engine_core = types.SimpleNamespace(shutdown=llm._shutdown)
        self._steps = 0

    def has_unfinished_requests(self) -> bool:
        return bool(self._llm.queue)

    def step(self) -> list[_Output]:
        failure = LLM.fail_step or os.environ.get("FAKE_VLLM_FAIL_STEP")
        if failure:
            raise failure if isinstance(failure, BaseException) else RuntimeError(failure)
        self._steps += 1
        doomed = os.environ.get("FAKE_VLLM_DIE_ON_CPU")
        if doomed is not None and os.sched_getaffinity(0) == {int(doomed)} and self._steps >= 3:
            raise EngineDeadError(
                "EngineCore encountered an issue. See stack trace for the root cause."
            )
        time.sleep(float(os.environ.get("FAKE_VLLM_STEP_S", "0")))
        LLM.steps += 1
        taken = self._llm.queue[:2]  # two at a time
        if LLM.steps in LLM.die_at or any(out.poison for out in taken):
            raise EngineDeadError(
                "EngineCore encountered an issue. See stack trace for the root cause."
            )
        self._llm.queue = self._llm.queue[2:]
        return taken


class LLM:
    fail_start: BaseException | None = None
    fail_step: BaseException | None = None
    shutdowns = 0
    steps = 0
    die_at: ClassVar[set[int]] = set()
    submitted: ClassVar[list[Any]] = []
    # The sampling parameters of each submitted request, in the same order.
    sampled: ClassVar[list[Any]] = []

    def __init__(self, **engine_args: Any) -> None:
        if os.environ.get("FAKE_VLLM_NOISE"):
            os.write(1, b"INFO engine noise on stdout\n")
            os.write(2, b"INFO engine noise on stderr\n")
            print("a print() inside the engine", flush=True)
        failure = LLM.fail_start or os.environ.get("FAKE_VLLM_FAIL_START")
        if failure:
            raise failure if isinstance(failure, BaseException) else ValueError(failure)
        gate = os.environ.get("FAKE_VLLM_START_GATE")
        if gate:
            folder, count = gate.rsplit(":", 1)
            open(os.path.join(folder, f"started-{os.getpid()}"), "w").close()
            while len(os.listdir(folder)) < int(count):
                time.sleep(0.05)
        self.engine_args = engine_args
        self.queue: list[_Output] = []
        self._ids = 0
        self.llm_engine = _Engine(self)

    def _shutdown(self) -> None:
        LLM.shutdowns += 1

    def _add(self, request: Any, params: Any = None) -> str:
        text, count = _describe(request)
        if "REJECT" in text:
            raise ValueError(
                "The decoder prompt (length 9999) is longer than the maximum model length"
            )
        self._ids += 1
        LLM.submitted.append(request)
        LLM.sampled.append(params)
        request_id = str(self._ids)
        answer = _constrained(params) or f"  answer to {text[-24:]!r}\n"
        if "BLANK" in text or "EMPTY" in text:
            answer = " \n" if "BLANK" in text else ""
        output = _Output(request_id, 10 + count, answer, params)
        output.poison = "POISON" in text
        self.queue.append(output)
        # As vLLM 0.32: enqueue answers with the internal id, the outputs carry the counter's.
        return f"{request_id}-1f3a9c0e"

    def enqueue(self, prompts: list[Any], params: Any = None, **kwargs: Any) -> list[str]:
        return [self._add(p, params) for p in prompts]

    def enqueue_chat(self, messages: list[Any], params: Any = None, **kwargs: Any) -> list[str]:
        return [self._add(m, params) for m in messages]

    def generate(self, prompts: list[Any], *args: Any, **kwargs: Any) -> list[_Output]:
        self.enqueue(prompts)
        return self.llm_engine.step()

    def chat(self, messages: list[Any], *args: Any, **kwargs: Any) -> list[_Output]:
        self.enqueue_chat(messages)
        return self.llm_engine.step()
