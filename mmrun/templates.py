"""Rendering a model's own chat template, in one place.

The processor or tokenizer is loaded lazily, once per run, from the model id or local path,
with ``trust_remote_code`` only when the user allowed it for a model whose spec needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from mmrun.errors import DownloadError, MediaError, TemplateUnavailableError
from mmrun.hub_access import check_reachable, offline, offline_hint
from mmrun.request import Message, TemplateSource


class HFTemplateRenderer:
    """A TemplateRenderer backed by transformers' AutoProcessor / AutoTokenizer."""

    def __init__(self, model: str, trust_remote_code: bool = False) -> None:
        self.model = model
        self.trust_remote_code = trust_remote_code
        # A dry run goes on without a processor it cannot load, and asks again per prompt.
        self._unavailable: dict[str, TemplateUnavailableError] = {}

    def _load(self, source: TemplateSource) -> Any:
        if source in self._unavailable:
            raise self._unavailable[source]
        try:
            return self._fetch(source)
        except TemplateUnavailableError as exc:
            self._unavailable[source] = exc
            raise

    def _fetch(self, source: TemplateSource) -> Any:
        try:
            check_reachable(self.model, f"the {source}")
        except DownloadError as exc:
            raise TemplateUnavailableError(
                exc.message, exc.hint, model=self.model, source=source
            ) from exc
        import transformers

        auto = transformers.AutoProcessor if source == "processor" else transformers.AutoTokenizer
        try:
            # local_files_only: huggingface_hub reads HF_HUB_OFFLINE only once, when it is
            # first imported; mmrun reads it now, as its Hub probe does.
            return auto.from_pretrained(
                self.model, trust_remote_code=self.trust_remote_code, local_files_only=offline()
            )
        except (OSError, ValueError) as exc:  # missing files, or a folder with no such class
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            hint = "check the model id or path"
            if not Path(self.model).expanduser().exists():
                hint += "; " + offline_hint(self.model)
            raise TemplateUnavailableError(
                f"cannot load the {source} of {self.model}: {first}",
                hint=hint,
                model=self.model,
                source=source,
            ) from exc

    @cached_property
    def processor(self) -> Any:
        return self._load("processor")

    @cached_property
    def tokenizer(self) -> Any:
        return self._load("tokenizer")

    def render(
        self,
        messages: Sequence[Message],
        *,
        source: TemplateSource,
        chat_template: str | None = None,
    ) -> str:
        owner = self.processor if source == "processor" else self.tokenizer
        try:
            prompt = owner.apply_chat_template(
                list(messages),
                tokenize=False,
                add_generation_prompt=True,
                chat_template=chat_template,
            )
        except ValueError as exc:
            raise MediaError(
                f"{self.model} has no usable chat template: {exc}",
                hint="pass a model with a chat template, or use a loader with a written prompt",
            ) from exc
        return str(prompt)

    def token_id(self, token: str) -> int:
        return int(self.tokenizer.convert_tokens_to_ids(token))

    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)
