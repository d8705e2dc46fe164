"""What becomes of a prompt, and what a run reports while it goes: the values every layer
passes around (readers, the structured-output check, the runner, the backends, the output
file, the CLI). Nothing here imports from above it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mmrun.item import Item
    from mmrun.media import MediaItem, ProgressFn
    from mmrun.request import Prompt

Stage = Literal["media", "request", "engine", "output"]


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's log probability, as vLLM's ``CompletionOutput.logprobs`` has it:
    the token's text, its log probability (None where vLLM gave none for the step), and the
    step's tokens as vLLM lists them (the sampled token first, then the most likely, each with
    its log probability)."""

    token: str
    logprob: float | None
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Completion:
    """One prompt's result, from vLLM's own counts; ``parsed``: the decoded answer of a prompt
    constrained to JSON (mmrun.structured), None otherwise; ``cached_tokens``: the prompt's
    tokens found in the engine's prefix cache, ``created_cache_tokens`` the prompt's tokens
    it wrote to that cache, and ``multimodal_tokens`` the prompt's media placeholder tokens by
    modality (a vLLM server's count), each where vLLM tells (None otherwise).

    ``logprobs``: each generated token's log probability, where the prompt asked for them
    (sampling ``logprobs``: ``top_logprobs`` more tokens a step); ``others``: a prompt
    sampled ``n`` times, its outputs after the first (their own text, counts and log
    probabilities; their prompt counts are the first's)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    parsed: Any = None
    cached_tokens: int | None = None
    created_cache_tokens: int | None = None
    multimodal_tokens: dict[str, int] | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    top_logprobs: int = 0
    others: tuple[Completion, ...] = ()

    @property
    def choices(self) -> tuple[Completion, ...]:
        """Every output of the prompt, the first one first."""
        return (self, *self.others)

    @property
    def generated_tokens(self) -> int:
        """The tokens generated over every output (vLLM's usage ``completion_tokens``)."""
        return sum(choice.completion_tokens for choice in self.choices)


@dataclass(frozen=True)
class ItemError:
    """Why one prompt failed: media (fetch or decode), request (the loader or vLLM refused
    it), engine (vLLM failed while generating it) or output (its answer is not what its
    constraint allows: most often cut short by max_tokens; the text is kept). ``cause``:
    mmrun's own error, where there is one (a run of named prompts raises it as it is)."""

    stage: Stage
    message: str
    cause: BaseException | None = field(default=None, compare=False, repr=False)


@dataclass
class Outcome:
    """What became of one prompt."""

    item: Item
    question: str
    media: Sequence[MediaItem] = ()
    prompt: Prompt | None = None
    # A dry run whose prompt could not be rendered (the model's processor is not at hand): why.
    prompt_note: str | None = None
    completion: Completion | None = None
    error: ItemError | None = None
    replica: int | None = None


Sink = Callable[[Outcome], None]


@dataclass
class Stats:
    """How a batch went: prompts done and failed in this run, and skipped (done before)."""

    done: int = 0
    failed: int = 0
    skipped: int = 0
    failed_before: int = 0
    restarts: int = 0  # engines started again after they died (mmrun.restarts)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def record(self, outcome: Outcome) -> None:
        """Count one finished prompt: done (with its tokens) or failed."""
        if outcome.error is not None:
            self.failed += 1
            return
        self.done += 1
        if outcome.completion is not None:
            self.prompt_tokens += outcome.completion.prompt_tokens
            self.completion_tokens += outcome.completion.generated_tokens


@dataclass
class Hooks:
    """What the caller is told while a run goes on.

    on_request(url): each download; on_progress: download progress; on_engine_start(): just
    before the engines start; on_started(total): an engine is up, ``total`` prompts to go;
    on_notice(text, warning): one line about the engines (a replica ready, a replica lost),
    ``warning`` where the user should see it even in a quiet terminal view.
    """

    on_request: Callable[[str], None] | None = None
    on_progress: ProgressFn | None = None
    on_engine_start: Callable[[], None] | None = None
    on_started: Callable[[int], None] | None = None
    on_notice: Callable[[str, bool], None] | None = None

    def notice(self, text: str, *, warning: bool = False) -> None:
        if self.on_notice is not None:
            self.on_notice(text, warning)
