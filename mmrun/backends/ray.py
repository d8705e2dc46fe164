"""``--backend ray``: the same batch on a Ray cluster, through Ray Data's vLLM processor.

The driver (this process) owns the prompts, the output and the progress, as with one engine.
The prompts go to the cluster as a Ray Dataset of ids; a preprocess stage on the workers
fetches and decodes each prompt's media there (URLs are fetched where the work runs) and
builds the prompt with the model's loader; Ray Data's vLLM engine stage (``--replicas`` engine
actors) generates; each finished row streams back to the driver and becomes mmrun's output
line. A prompt whose media fail, or that vLLM refuses, comes back as an error row and becomes
mmrun's error line; the others are unaffected.

The cluster is the one ``RAY_ADDRESS`` names, else a local one started for the run. Every
worker needs mmrun and the same vLLM installed (``pip install 'mmrun[ray]'``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from mmrun.builder import PromptSettings, RequestBuilder
from mmrun.errors import EngineError, MissingDependencyError
from mmrun.item import Item
from mmrun.outcome import Completion, Hooks, ItemError, Outcome, Sink, Stats
from mmrun.plan import Plan, Recipe
from mmrun.structured import checked

# Rows of the Dataset the engine stage receives at a time, at least; it grows with the engine's
# max_num_seqs (engine_batch_size) so that an actor keeps as many prompts in its engine as a
# replica of `-dp` does (2 x max_num_seqs): Ray Data gives an actor MAX_CONCURRENT_BATCHES
# batches at once, and with 16 rows each an engine of max_num_seqs 256 ran half full.
BATCH_SIZE = 16
MAX_CONCURRENT_BATCHES = 8  # Ray Data's default, named here because the batch size depends on it
# Passed to the workers when set on the driver: they configure vLLM and the Hub alike.
_FORWARDED_ENV = ("VLLM_", "HF_", "MMRUN_", "TRANSFORMERS_", "TOKENIZERS_", "CUDA_VISIBLE")


# --- on the workers ------------------------------------------------------------------------

_STATE: dict[str, Any] = {}


def _worker_state(recipe: Recipe) -> tuple[RequestBuilder, Any]:
    """This worker's request builder and media resolver, made once."""
    if "builder" not in _STATE:
        from mmrun.media import MediaResolver
        from mmrun.plugins import get_registry
        from mmrun.support import vllm_info
        from mmrun.templates import HFTemplateRenderer

        plan = recipe.plan(get_registry(), vllm_info())
        renderer = HFTemplateRenderer(plan.model, plan.spec.trust_remote_code)
        _STATE.update(builder=RequestBuilder(plan, renderer), resolver=MediaResolver(plan.modality))
    return _STATE["builder"], _STATE["resolver"]


def preprocess(recipe: Recipe, row: dict[str, Any]) -> dict[str, Any]:
    """One prompt, on a worker: its media fetched and decoded, its prompt built; or, where
    that fails, a stand-in request of one token whose row carries the error."""
    from mmrun.errors import MmrunError
    from mmrun.media import parse_source

    builder, resolver = _worker_state(recipe)
    plan = builder.plan
    item = Item(
        row["id"],
        row["index"],
        tuple(json.loads(row["sources"])),
        row["question"],
        sampling=json.loads(row["sampling"]),
    )
    question = builder.question_for(item)
    error: tuple[str, str] | None = None
    problem = row["problem"] or builder.count_problem(item)  # the reader's, as on one host
    if problem is not None:
        error = ("request", problem)
    else:
        try:
            media = [resolver.resolve(parse_source(s, plan.modality)) for s in item.sources]
            problem = builder.media_problem(media)
            if problem is not None:
                error = ("media", problem)
        except MmrunError as exc:
            error = ("media", str(exc))
    if error is not None:
        return {
            "mmrun_id": item.id,
            "mmrun_question": question,
            "mmrun_error": json.dumps(error),
            "prompt": "x",
            "sampling_params": {"max_tokens": 1, "temperature": 0.0},
        }
    try:
        prompt = builder.prompt(question, media)
    except MmrunError as exc:
        return {
            "mmrun_id": item.id,
            "mmrun_question": question,
            "mmrun_error": json.dumps(("request", str(exc))),
            "prompt": "x",
            "sampling_params": {"max_tokens": 1, "temperature": 0.0},
        }
    sampling = dict(builder.sampling_for(item))  # Ray Data builds StructuredOutputsParams itself
    seed = builder.seed_for(item)
    if seed is not None:
        sampling["seed"] = seed
    if prompt.stop_token_ids:
        sampling["stop_token_ids"] = list(prompt.stop_token_ids)
    data = (
        list(prompt.multi_modal_data)
        if prompt.multi_modal_data is not None
        else [plan.modality.to_engine(m.data, plan.spec) for m in media]
    )
    request: dict[str, Any] = {
        "mmrun_id": item.id,
        "mmrun_question": question,
        "mmrun_error": "",
        "sampling_params": sampling,
    }
    if prompt.text is not None:
        request["prompt"] = prompt.text
    else:
        request["tokenized_prompt"] = list(prompt.token_ids or ())
    if data:
        key, items = builder.engine_items(data)
        request["multimodal_data"] = {key: items}
    return request


def postprocess(row: dict[str, Any]) -> dict[str, Any]:
    """What the driver needs of a finished row (the decoded media stay on the worker)."""
    return {
        "mmrun_id": row["mmrun_id"],
        "mmrun_question": row["mmrun_question"],
        "mmrun_error": row.get("mmrun_error") or "",
        "inference_error": row.get("__inference_error__") or "",
        "generated_text": row.get("generated_text") or "",
        "num_input_tokens": int(row.get("num_input_tokens") or 0),
        "num_generated_tokens": int(row.get("num_generated_tokens") or 0),
    }


# --- on the driver -------------------------------------------------------------------------


def _quiet_ray_data(verbose: bool) -> None:
    """Ray Data's progress bars and its execution notes, on stderr only with -v."""
    import ray.data

    context = ray.data.DataContext.get_current()
    for name in ("enable_progress_bars", "print_on_execution_start"):
        if hasattr(context, name):
            setattr(context, name, verbose)
    if not verbose:
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        logging.getLogger("ray").setLevel(logging.ERROR)


class RayBackend:
    """The batch on Ray; each finished row to the sink as it comes back. Ray's and its
    workers' logs and Ray Data's progress bars reach stderr only with ``verbose`` (-v):
    without, a run printed some 290 lines of them."""

    name = "ray"

    def __init__(self, plan: Plan, *, verbose: bool = False) -> None:
        self.plan = plan
        self.verbose = verbose

    def run(self, items: Iterator[Item], emit: Sink, hooks: Hooks) -> Stats:
        processor = self._processor()  # first: without Ray Data, nothing else matters
        import ray

        plan = self.plan
        stats = Stats()
        t0 = time.perf_counter()
        todo = {item.id: item for item in items}
        settings = PromptSettings(plan)  # the workers build the prompts
        if hooks.on_engine_start is not None:
            hooks.on_engine_start()
        started = False
        try:
            for row in processor(ray.data.from_items(_rows(todo.values()))).iter_rows():
                if not started and hooks.on_started is not None:
                    started = True
                    hooks.on_started(plan.items.total)
                outcome = _outcome(settings, todo[row["mmrun_id"]], row)
                stats.record(outcome)
                emit(outcome)
                if plan.fail_fast and stats.failed:
                    break
        except Exception as exc:  # a Ray job that failed as a whole: its root cause, one line
            raise EngineError(
                f"the Ray job failed: {_root_cause(exc)}",
                hint="run the same command again to resume; -v shows Ray's and vLLM's logs",
            ) from exc
        stats.timings = {"total_s": time.perf_counter() - t0}
        return stats

    def close(self) -> None:
        """Ray's engine actors end with the job."""

    def _processor(self) -> Any:
        """Ray Data's vLLM processor for this plan, on the cluster ``RAY_ADDRESS`` names (else
        a local one): mmrun's preprocess and postprocess around vLLM's engine stage."""
        try:
            import ray
            from ray.data.llm import build_processor, vLLMEngineProcessorConfig
        except ImportError as exc:
            raise MissingDependencyError(
                f"--backend ray needs Ray Data ({exc})", hint="pip install 'mmrun[ray]'"
            ) from exc
        plan, verbose = self.plan, self.verbose
        recipe = plan.recipe()
        runtime_env = {"env_vars": workers_environment(plan.engine_env, os.environ)}
        if not ray.is_initialized():
            ray.init(
                address=os.environ.get("RAY_ADDRESS") or None,
                runtime_env=runtime_env,
                log_to_driver=verbose,
                logging_level=logging.INFO if verbose else logging.ERROR,
            )
        _quiet_ray_data(verbose)
        config = vLLMEngineProcessorConfig(
            model_source=plan.model,
            engine_kwargs={k: v for k, v in plan.engine_args.items() if k != "model"},
            concurrency=engine_pool(plan.engines.ray_replicas),
            batch_size=engine_batch_size(plan.engine_args),
            max_concurrent_batches=MAX_CONCURRENT_BATCHES,
            runtime_env=runtime_env,
            chat_template_stage=False,
            tokenize_stage=False,
            detokenize_stage=False,
            prepare_multimodal_stage=False,
            should_continue_on_error=True,
            # Ray's Prometheus export of vLLM's metrics needs ray[serve], which mmrun[ray] lacks.
            log_engine_metrics=False,
            placement_group_config=engine_placement(
                plan.engine_args,
                plan.vllm_version is not None and _on_cpu(),
                ray.cluster_resources(),  # type: ignore[no-untyped-call]
            ),
        )
        return build_processor(
            config, preprocess=lambda row: preprocess(recipe, row), postprocess=postprocess
        )


def _rows(items: Iterable[Item]) -> list[dict[str, Any]]:
    """The Dataset's rows: what a worker needs to rebuild each prompt."""
    return [
        {
            "id": item.id,
            "index": item.index,
            "sources": json.dumps(list(item.sources)),
            "question": item.question,
            # JSON text: Ray Data's blocks want one type per column, a line's own settings vary
            "sampling": json.dumps(item.sampling),
            "problem": item.problem or "",
        }
        for item in items
    ]


def _root_cause(exc: BaseException) -> str:
    """The last "SomeError: why" line of a Ray error (Ray nests the worker's traceback)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) and " " not in head:
            return line[:300]
    return (lines[-1] if lines else type(exc).__name__)[:300]


def workers_environment(
    chosen: Iterable[tuple[str, str]], environ: Mapping[str, str]
) -> dict[str, str]:
    """The environment Ray's workers get: this process's variables for vLLM, Hugging Face,
    mmrun and the devices, and what the plan chose for the engine where the user set nothing."""
    own = {k: v for k, v in environ.items() if k.startswith(_FORWARDED_ENV)}
    return {**dict(chosen), **own}


def engine_pool(replicas: int | None) -> tuple[int, int]:
    """Ray Data's (min, max) engine actors: K of them from the start. A plain K means "1 to
    K, autoscaled", and Ray Data added the second engine only when the first had nearly
    finished (2 x H200, 1,024 prompts: ready 65 s after the first, 4 s before the end)."""
    k = max(1, replicas or 1)
    return (k, k)


def engine_batch_size(engine_args: dict[str, Any]) -> int:
    """Rows per engine-stage batch: MAX_CONCURRENT_BATCHES of them fill 2 x max_num_seqs."""
    seqs = int(engine_args.get("max_num_seqs") or 0)
    return max(BATCH_SIZE, -(-2 * seqs // MAX_CONCURRENT_BATCHES))


def engine_placement(
    engine_args: dict[str, Any], cpu: bool, cluster: dict[str, float]
) -> dict[str, Any] | None:
    """The resources of one engine actor. The CPU build: one CPU, no GPU. A GPU engine on one
    GPU: the GPU and the CPUs its frontend uses to prepare requests (vLLM runs each request's
    image and audio processing with OMP_NUM_THREADS torch threads, and Ray sets that variable
    to the CPUs an actor holds, 1 by default: the bottleneck measured on the H200, see
    engine.use_frontend_threads). Half of the cluster's CPUs per GPU, at most
    FRONTEND_THREADS_MAX; the other half stays for the preprocess workers. Several GPUs per
    engine (-tp): Ray Data's own placement."""
    from mmrun.engine import frontend_threads

    if cpu:
        return {"bundles": [{"CPU": 1}]}
    gpus = float(cluster.get("GPU") or 0)
    tp = int(engine_args.get("tensor_parallel_size") or 1)
    pp = int(engine_args.get("pipeline_parallel_size") or 1)
    if gpus < 1 or tp * pp != 1:
        return None
    threads = frontend_threads(int(float(cluster.get("CPU") or 0) / gpus), 2)
    return {"bundles": [{"GPU": 1, "CPU": threads}]}


def _on_cpu() -> bool:
    from mmrun.support import vllm_device

    return vllm_device() == "cpu"


def _outcome(settings: PromptSettings, item: Item, row: dict[str, Any]) -> Outcome:
    outcome = Outcome(item=item, question=row["mmrun_question"])
    if row["mmrun_error"]:
        stage, message = json.loads(row["mmrun_error"])
        outcome.error = ItemError(stage, message)
    elif row["inference_error"]:
        outcome.error = ItemError("request", row["inference_error"])
    else:
        generated = row["num_generated_tokens"]
        # Ray's rows carry no finish reason: a completion as long as max_tokens stopped there.
        limit = settings.sampling_for(item).get("max_tokens", -1)
        reason = "length" if generated >= limit else "stop"
        completion = Completion(
            text=row["generated_text"],
            prompt_tokens=row["num_input_tokens"],
            completion_tokens=generated,
            finish_reason=reason,
        )
        outcome.completion, outcome.error = checked(completion, settings.constraint_for(item))
    return outcome
