"""Each prompt's request: its question, the model loader's prompt, its sampling and seed, and
its media in the form the engine takes them. The runner hands it a prompt whose media are
decoded and gets back what to submit; Ray's workers use it the same way."""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmrun.errors import MediaError, TemplateUnavailableError, UsageError
from mmrun.inputs.openai_batch import fill_media
from mmrun.item import Item
from mmrun.media import MediaItem, MediaResolver
from mmrun.outcome import Hooks, ItemError, Outcome
from mmrun.plan import Plan, prompt_seed
from mmrun.prefetch import ItemChecks, Ready
from mmrun.request import LoaderContext, Prompt, TemplateRenderer

RendererFactory = Callable[[str, bool], TemplateRenderer]


@dataclass(frozen=True)
class EngineRequest:
    """What goes to the engine for one prompt: the generate prompt or chat conversation, and
    vLLM's sampling parameters; ``chat``: whether it goes to ``LLM.chat`` (None: as the
    plan's method says)."""

    input: Any
    params: Any
    chat: bool | None = None


def pending_prompt_note(exc: TemplateUnavailableError) -> str:
    return (
        f"not rendered: the model's {exc.source} ({exc.model}) renders the prompt at run time "
        f"and cannot be loaded now ({exc.message.rstrip('.')}). To see it rendered now: "
        f"{exc.hint}"
    )


class PromptSettings:
    """A prompt's own question, sampling, seed and constraint: the run's, or the input line's
    where it has its own."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def question_for(self, item: Item) -> str:
        if item.question is not None:
            return item.question
        if self.plan.question is not None:
            return self.plan.question
        return self.plan.modality.question(
            len(item.sources), tuple(c.modality.name for c in self.plan.companions)
        )

    def sampling_for(self, item: Item) -> dict[str, Any]:
        """The prompt's sampling: the run's, with a manifest line's own settings over it (its
        constraint replaces the run's)."""
        if not item.sampling:
            return self.plan.sampling
        return {**self.plan.sampling, **item.sampling}

    def constraint_for(self, item: Item) -> Mapping[str, Any] | None:
        """The prompt's structured-output constraint (mmrun.structured), if it has one."""
        constraint: Mapping[str, Any] | None = self.sampling_for(item).get("structured_outputs")
        return constraint

    def seed_for(self, item: Item) -> int | None:
        """The prompt's own sampling seed, drawn from the run's seed and the prompt's id; None
        where the run samples greedily, has no seed, or names one (``--sampling-arg seed=N``).

        vLLM's engine seed alone gives the whole batch one random stream, so a sampled text
        would depend on which prompts ran beside it and when they arrived: a rerun, a resumed
        run or ``-dp N`` would not give the same texts.
        """
        seed = self.plan.engine_args.get("seed")
        sampling = self.sampling_for(item)
        if seed is None or "seed" in sampling or not sampling.get("temperature"):
            return None
        return prompt_seed(int(seed), item.id)


class RequestBuilder(PromptSettings):
    """The requests of one plan's prompts. The loader's prompt is built once per question and
    item count (once per prompt for a loader that reads the media)."""

    def __init__(self, plan: Plan, renderer: TemplateRenderer) -> None:
        super().__init__(plan)
        self._renderer = renderer
        self._prompts: collections.OrderedDict[tuple[str, int], Prompt] = collections.OrderedDict()
        self._lock = threading.Lock()  # the engine start's warm-up builds the first one
        self._params: dict[tuple[int, ...], Any] = {}
        # The items every prompt carries ahead of its own (an image with each clip), in the
        # form the engine takes them, made once by resolve_companions(): chat message parts,
        # or vLLM's name for each kind -> its items.
        self._companion_parts: list[dict[str, Any]] = []
        self._companion_data: dict[str, list[Any]] = {}

    def use_sampling(self, sampling: dict[str, Any]) -> None:
        """The run's sampling for the prompts prepared from now on (a library call's own)."""
        self.plan = dataclasses.replace(self.plan, sampling=sampling)
        self._params.clear()

    # --- what the model refuses ---------------------------------------------------------

    def checks(self) -> ItemChecks:
        return ItemChecks(self.count_problem, self.media_problem, self.plan.items.max_count)

    def count_problem(self, item: Item) -> str | None:
        """What is wrong with the number of media items a prompt carries, or None. A prompt
        sent as it is (an OpenAI completion) carries none, and needs none."""
        if item.raw_prompt is not None:
            return None
        spec, count = self.plan.spec, len(item.sources)
        low = max(spec.min_items, self.plan.modality.min_count)
        noun = self.plan.modality.name
        if spec.max_items is not None and count > spec.max_items:
            return f"{spec.key} takes at most {spec.max_items} {noun}(s) per prompt, got {count}"
        if count < low:
            return f"{spec.key} needs at least {low} {noun}(s) per prompt, got {count}"
        return None

    def checks_media(self) -> bool:
        """Whether the modality checks each decoded item against this model."""
        return self.plan.modality.item_check(self.plan.spec) is not None

    def media_problem(self, media: Sequence[MediaItem]) -> str | None:
        """The first decoded item that the modality's check refuses for this model, or None."""
        check = self.plan.modality.item_check(self.plan.spec)
        if check is None:
            return None
        for item in media:
            if item.not_fetched is not None:  # a dry run's placeholder: nothing to check
                continue
            problem = check(item.source, item.info)
            if problem is not None:
                return problem
        return None

    # --- the loader's prompt ------------------------------------------------------------

    def prompt(self, question: str, media: Sequence[Any]) -> Prompt:
        with self._lock:
            spec = self.plan.spec
            if spec.reads_media:
                return spec(self._context(question, len(media), [m.data for m in media]))
            key = (question, len(media))
            prompt = self._prompts.get(key)
            if prompt is None:
                prompt = spec(self._context(question, len(media), ()))
                self._prompts[key] = prompt
                if len(self._prompts) > 256:  # per-line questions: keep the recent ones
                    self._prompts.popitem(last=False)
            return prompt

    def prompt_or_note(
        self, question: str, media: Sequence[Any]
    ) -> tuple[Prompt | None, str | None]:
        """The prompt; for a dry run whose model's processor cannot be loaded now (no network,
        not in the Hugging Face cache), no prompt and a note saying so: a dry run shows
        everything else and needs no network."""
        spec = self.plan.spec
        if spec.reads_media and any(getattr(m, "not_fetched", None) for m in media):
            return None, (
                f"not rendered: {spec.key}'s prompt is built from the media themselves, "
                "and the default media could not be fetched"
            )
        try:
            return self.prompt(question, media), None
        except TemplateUnavailableError as exc:
            if not self.plan.dry_run:
                raise
            return None, pending_prompt_note(exc)

    def warm(self, first: Item | None) -> None:
        """Build the prompt of the run's first item (or of one with the most media, for a
        replica, whose items come later), so that the loader's processor or tokenizer is
        loaded. Not for a loader that reads the media (its prompt needs them decoded)."""
        if self.plan.spec.reads_media:
            return
        if first is None:
            first = Item(id="", index=0, sources=("",) * max(1, self.plan.items.max_count))
        self.prompt(self.question_for(first), first.sources)

    def _context(self, question: str, count: int, media: Sequence[Any]) -> LoaderContext:
        return LoaderContext(
            question=question,
            num_items=count,
            model=self.plan.model,
            templates=self._renderer,
            media=media,
            companions={c.modality.name: len(c.sources) for c in self.plan.companions},
        )

    # --- the engine's request -----------------------------------------------------------

    def resolve_companions(self, hooks: Hooks) -> None:
        """Fetch and decode the run's companion items (a few, shared by every prompt), before
        the engine starts: one that cannot be read fails the run in a second. They are made
        ready for the engine (resized where the row says) here, once, not for every prompt."""
        spec = self.plan.spec
        for companion in self.plan.companions:
            modality = companion.modality
            resolver = MediaResolver(modality, hooks.on_request, hooks.on_progress)
            try:
                media = [f.result() for f in resolver.submit(companion.sources)]
            finally:
                resolver.close()
            if self.plan.method == "chat":
                self._companion_parts += [modality.chat_part(m.data, spec) for m in media]
            else:
                self._companion_data[modality.engine_key] = [
                    modality.to_engine(m.data, spec) for m in media
                ]

    def prepare(self, ready: Ready, engine: bool) -> tuple[Outcome, EngineRequest | None]:
        """A prompt whose media are decoded (or failed): its outcome so far, and the request
        to submit; no request where it failed already, or without an ``engine`` (a dry run)."""
        question = self.question_for(ready.item)
        outcome = Outcome(item=ready.item, question=question, media=ready.media or ())
        if ready.error is not None:
            outcome.error = ready.error
            return outcome, None
        item = ready.item
        try:
            outcome.prompt, outcome.prompt_note = self._prompt(item, question, outcome.media)
        except MediaError as exc:
            outcome.error = ItemError("request", str(exc), exc)
            return outcome, None
        if not engine or outcome.prompt is None:
            return outcome, None
        try:
            request = self._request(item, question, outcome.prompt, outcome.media)
        except UsageError as exc:  # vLLM refused the line's own settings
            if not item.sampling:
                raise
            outcome.error = ItemError("request", str(exc), exc)
            return outcome, None
        # The result line needs the sources, not the pixels: the engine has its own copy now,
        # so the decoded data is not held while the prompt runs.
        outcome.media = [dataclasses.replace(m, data=None) for m in outcome.media]
        return outcome, request

    def _prompt(
        self, item: Item, question: str, media: Sequence[MediaItem]
    ) -> tuple[Prompt | None, str | None]:
        """The prompt (or a dry run's note); an OpenAI completion's text as it is."""
        if item.raw_prompt is not None:
            return Prompt(text=item.raw_prompt), None
        return self.prompt_or_note(question, media)

    def _request(
        self, item: Item, question: str, prompt: Prompt, media: Sequence[MediaItem]
    ) -> EngineRequest:
        params = self._sampling_params(item, prompt.stop_token_ids)
        if item.raw_prompt is not None:  # no loader, no chat template: LLM.generate
            return EngineRequest({"prompt": item.raw_prompt}, params, chat=False)
        return EngineRequest(self.engine_input(question, prompt, media, item.messages), params)

    def engine_input(
        self,
        question: str,
        prompt: Prompt,
        media: Sequence[MediaItem],
        messages: Sequence[Mapping[str, Any]] | None = None,
    ) -> Any:
        """``messages``: the user's own conversation (an OpenAI batch line), whose media parts
        the decoded media replace; None: one user turn with the question and the media."""
        from mmrun import engine

        modality, spec = self.plan.modality, self.plan.spec
        if self.plan.method == "chat":
            parts = [modality.chat_part(m.data, spec) for m in media]
            if messages is not None:
                return fill_media(messages, modality.name, parts)
            ahead = [dict(part) for part in self._companion_parts]  # each prompt's own parts
            return engine.chat_input(question, [*ahead, *parts])
        data = [modality.to_engine(m.data, spec) for m in media]
        return engine.generate_input(prompt, *self.engine_items(data), self._companion_data)

    def engine_items(self, items: Sequence[Any]) -> tuple[str, list[Any]]:
        """A prompt's media as vLLM takes them: its name for them, and the items (each
        wrapped with its kind, where the row sends them under a name of its own)."""
        kind = self.plan.modality.engine_key
        if not self.plan.spec.media_key:
            return kind, list(items)
        return self.plan.spec.media_key, [{"type": kind, kind: item} for item in items]

    def _sampling_params(self, item: Item, stops: tuple[int, ...]) -> Any:
        """vLLM's sampling parameters of a prompt: the run's (made once per stop tokens), or
        the prompt's own where it has its own settings or seed."""
        seed = self.seed_for(item)
        if seed is not None or item.sampling:
            return self.sampling_params(stops, seed, self.sampling_for(item))
        if stops not in self._params:
            self._params[stops] = self.sampling_params(stops)
        return self._params[stops]

    def sampling_params(
        self,
        stop_token_ids: Sequence[int],
        seed: int | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> Any:
        """vLLM's sampling parameters: the run's sampling, or ``sampling`` (a prompt's own)."""
        from mmrun import engine

        sampling = self.plan.sampling if sampling is None else sampling
        extra = {k: v for k, v in sampling.items() if k not in ("temperature", "max_tokens")}
        return engine.sampling_params(
            temperature=sampling["temperature"],
            max_tokens=sampling["max_tokens"],
            stop_token_ids=stop_token_ids,
            seed=seed,
            extra=extra,
        )


class ServerRequestBuilder(RequestBuilder):
    """The requests of a plan whose prompts go to a vLLM server (``--server``): each one a
    chat completion's fields, plain JSON but for decoded pictures, which the sender encodes.

    ``--method chat``: the conversation LLM.chat gets, with the key's chat template. ``--method
    generate``: mmrun's own prompt as the one message's text, rendered by a template that
    writes it as it is, with the special tokens LLM.generate adds; vLLM's server then sees the
    prompt LLM.generate sees, its media placeholders in place (mmrun.engine.server)."""

    def resolve_companions(self, hooks: Hooks) -> None:
        """The companions as chat parts, for either method: the server takes parts only."""
        spec = self.plan.spec
        for companion in self.plan.companions:
            resolver = MediaResolver(companion.modality, hooks.on_request, hooks.on_progress)
            try:
                media = [f.result() for f in resolver.submit(companion.sources)]
            finally:
                resolver.close()
            self._companion_parts += [companion.modality.chat_part(m.data, spec) for m in media]

    def engine_input(
        self,
        question: str,
        prompt: Prompt,
        media: Sequence[MediaItem],
        messages: Sequence[Mapping[str, Any]] | None = None,
    ) -> Any:
        from mmrun import engine
        from mmrun.engine.server import VERBATIM_TEMPLATE

        modality, spec = self.plan.modality, self.plan.spec
        parts = [modality.chat_part(m.data, spec) for m in media]
        ahead = [dict(part) for part in self._companion_parts]
        if self.plan.method == "chat":
            if messages is not None:
                conversation = fill_media(messages, modality.name, parts)
            else:
                conversation = engine.chat_input(question, [*ahead, *parts])
            request: dict[str, Any] = {"messages": conversation}
            if spec.chat_template is not None:
                request["chat_template"] = spec.chat_template
            return request
        problem = self.server_problem(prompt)
        if problem is not None:
            raise UsageError(problem, hint=f"run {spec.key} with --method chat")
        text = [{"type": "text", "text": prompt.text}]
        return {
            "messages": [{"role": "user", "content": [*text, *ahead, *parts]}],
            "chat_template": VERBATIM_TEMPLATE,
            "add_special_tokens": True,
        }

    def server_problem(self, prompt: Prompt) -> str | None:
        """Why a generate prompt of this key cannot be sent to a server, or None."""
        key = self.plan.spec.key
        if prompt.text is None:
            return f"{key}'s prompt is token ids, which vLLM's server takes with no media"
        if prompt.multi_modal_data is not None or self.plan.spec.media_key:
            return (
                f"{key}'s media go to vLLM in a form of its own, which vLLM's server does not take"
            )
        return None

    def sampling_params(
        self,
        stop_token_ids: Sequence[int],
        seed: int | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> Any:
        """The chat completion's sampling fields: vLLM's server takes SamplingParams' fields
        by their names (``structured_outputs`` as its plain fields; ``logprobs: k`` as
        ``logprobs: true, top_logprobs: k``)."""
        fields = dict(self.plan.sampling if sampling is None else sampling)
        if fields.get("logprobs") is not None:  # the chat completion's own fields for them
            fields["top_logprobs"] = fields.pop("logprobs")
            fields["logprobs"] = True
        if stop_token_ids:
            fields["stop_token_ids"] = list(stop_token_ids)
        if seed is not None:
            fields["seed"] = seed
        return fields
