"""The two documented shapes of what a run produces (docs/usage.md):

- ``mmrun.result/1``: one JSON document for a run named on the command line (``--json``).
- ``mmrun.batch/2``: one JSON line per prompt, written as soon as that prompt is finished
  (``-o FILE.jsonl``, or standard output with ``--json``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
from typing import TYPE_CHECKING, Any

from mmrun.item import Item
from mmrun.logprobs import shaped
from mmrun.outcome import Completion, ItemError, Outcome
from mmrun.version import __version__

if TYPE_CHECKING:
    from mmrun.media import MediaItem
    from mmrun.plan import Plan
    from mmrun.request import Prompt
    from mmrun.runner import RunResult

SCHEMA = "mmrun.result/1"
BATCH_SCHEMA = "mmrun.batch/2"


def media_json(item: MediaItem) -> dict[str, Any]:
    return {
        "source": item.source,
        "path": item.path,
        "sha256": item.sha256,
        "size_bytes": item.size_bytes,
        **item.info,
        **({"not_fetched": item.not_fetched} if item.not_fetched is not None else {}),
    }


def _model_json(plan: Plan) -> dict[str, Any]:
    spec = plan.spec
    return {
        "key": spec.key,
        "repo_id": spec.repo_id,
        "model": plan.model,
        "architecture": spec.architecture,
        # Why this key, where -m did not name it (from --model's config.json), else None.
        "choice": plan.model_choice,
    }


def request_json(plan: Plan, prompt: Prompt | None, lora_path: str | None) -> dict[str, Any]:
    spec = plan.spec
    lora = spec.lora
    return {
        "engine_args": plan.engine_args,
        "sampling": plan.sampling,
        "stop_token_ids": list(prompt.stop_token_ids) if prompt is not None else [],
        "chat_template": spec.chat_template,
        "lora": None
        if lora is None
        else {"name": lora.name, "int_id": lora.int_id, "path": lora_path},
        "num_prompts": plan.items.total,
        "engines": plan.engines.as_json(plan.engine_args),
        # Environment variables mmrun set for the engine (vLLM's model runner, on a GPU).
        **({"engine_env": dict(plan.engine_env)} if plan.engine_env else {}),
        # The items every prompt carries ahead of its own (an image with each clip).
        **({"with_media": plan.companion_sources()} if plan.companions else {}),
        # The modality's own settings (video: frames per clip, frame rate, pixels per frame).
        **(
            {"modality_options": plan.modality.option_values(plan.modality_options)}
            if plan.modality.options
            else {}
        ),
    }


def document(result: RunResult) -> dict[str, Any]:
    """The ``mmrun.result/1`` document (documented in docs/usage.md)."""
    plan, prompt = result.plan, result.prompt
    return {
        "schema": SCHEMA,
        "model": _model_json(plan),
        "modality": plan.modality.name,
        "method": plan.method,
        "dry_run": plan.dry_run,
        "question": result.question,
        "prompt": prompt.text if prompt is not None else None,
        "prompt_token_ids": (
            list(prompt.token_ids) if prompt is not None and prompt.token_ids is not None else None
        ),
        **({"prompt_note": result.prompt_note} if result.prompt_note else {}),
        "request": request_json(plan, prompt, result.lora_path),
        "media": [media_json(item) for item in result.media],
        "media_per_prompt": result.media_per_prompt,
        "outputs": [
            {
                "index": i,
                "text": o.text,
                "prompt_tokens": o.prompt_tokens,
                "completion_tokens": o.completion_tokens,
                "finish_reason": o.finish_reason,
                "parsed": o.parsed,
                "error": _error_json(result.errors.get(i)),
            }
            for i, o in enumerate(result.outputs)
        ],
        "timings": {k: round(v, 4) for k, v in result.timings.items()},
        "versions": {"mmrun": __version__, "vllm": plan.vllm_version},
    }


def _error_json(error: ItemError | None) -> dict[str, Any] | None:
    return None if error is None else {"stage": error.stage, "message": error.message}


def settings_digest(item: Item) -> str | None:
    """A short digest of a prompt's own settings (a manifest line's sampling and constraint),
    recorded on its result line: a resumed run redoes a line whose settings changed."""
    if not item.sampling:
        return None
    text = json.dumps(item.sampling, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _choices(completion: Completion, text_completion: bool) -> dict[str, Any]:
    """A line's ``logprobs`` (where its prompt asked for them: in the shape of vLLM's chat
    completions, or of its text completions for an OpenAI ``/v1/completions`` line) and
    ``choices`` (where it sampled ``n`` > 1 outputs: each one, the first first)."""

    def logprobs(choice: Completion) -> dict[str, Any]:
        if choice.logprobs is None:
            return {}
        return {"logprobs": shaped(choice.logprobs, choice.top_logprobs, text_completion)}

    fields = logprobs(completion)
    if completion.others:
        fields["choices"] = [
            {
                "index": i,
                "text": choice.text,
                "completion_tokens": choice.completion_tokens,
                "finish_reason": choice.finish_reason,
                "parsed": choice.parsed,
                **logprobs(choice),
            }
            for i, choice in enumerate(completion.choices)
        ]
    return fields


def timestamp(seconds: float) -> str:
    """A moment as UTC ISO-8601 with milliseconds: ``2026-12-02T07:14:35.123Z``."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def line(
    outcome: Outcome, dry_run: bool = False, finished_at: float | None = None
) -> dict[str, Any]:
    """One ``mmrun.batch/2`` line (documented in docs/usage.md); ``finished_at``: when the
    prompt's result came back (``time.time()``), recorded for the report's throughput chart."""
    completion, error = outcome.completion, outcome.error
    row: dict[str, Any] = {
        "id": outcome.item.id,
        "index": outcome.item.index,
        "media": list(outcome.item.media_names),
        "question": outcome.question,
        "text": completion.text if completion else None,
        "prompt_tokens": completion.prompt_tokens if completion else None,
        "completion_tokens": completion.generated_tokens if completion else None,
        "finish_reason": completion.finish_reason if completion else None,
        "parsed": completion.parsed if completion else None,
        "meta": outcome.item.meta,
        "settings": settings_digest(outcome.item),
        "error": _error_json(error),
    }
    if completion is not None:
        row |= _choices(completion, text_completion=outcome.item.raw_prompt is not None)
    if finished_at is not None:
        row["finished_at"] = timestamp(finished_at)
    if dry_run and outcome.item.sampling:
        # The line's own settings (a manifest line's sampling, an OpenAI batch line's body),
        # which replace the run's for this prompt.
        row["sampling"] = dict(outcome.item.sampling)
    if dry_run and outcome.prompt_note:
        row["prompt"] = None
        row["prompt_note"] = outcome.prompt_note
    if dry_run and outcome.prompt is not None:
        row["prompt"] = outcome.prompt.text
        if outcome.prompt.token_ids is not None:
            row["prompt_token_ids"] = list(outcome.prompt.token_ids)
    if outcome.replica is not None:
        row["replica"] = outcome.replica
    return row
