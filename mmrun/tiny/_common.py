"""Helpers shared by the tiny builders (``mmrun.tiny`` for selftest, ``tests/tiny`` for the rest).

Everything here is offline and model-agnostic:

- :func:`train_bpe` trains a small byte-level BPE tokenizer (``tokenizers`` library) whose
  first ids are the given special tokens, in the given order;
- :func:`wrap_tokenizer` turns it into a transformers fast tokenizer carrying the chat
  template and named special tokens (``bos_token``, ``image_token``, ...);
- :func:`build_tokenizer` does both and saves the result into a checkpoint folder;
- :func:`token_ids` maps token strings to ids (raising if one is missing), for the config;
- :func:`padded_vocab_size` gives a model vocab size that covers the tokenizer;
- :data:`TINY_TEXT` holds small language-model sizes that the CPU attention backend accepts;
- :func:`save_random_weights` initialises a transformers model class from a config and saves
  safetensors (optionally renaming tensors to the published checkpoints' names);
- :func:`folder_bytes` measures a built checkpoint.

Heavy libraries (torch, transformers, tokenizers) are imported inside the functions: this
module is imported when builders are listed, which must stay cheap.

Stable API: the builders under tests/tiny import from here; change signatures only by adding
keyword arguments with defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint

# What every tiny image checkpoint needs on the CPU engine: a short context and few sequences
# keep the KV cache and the profiling run small.
CPU_ARGS: Mapping[str, Any] = {"max_model_len": 2048, "max_num_seqs": 2}

# Config-only checkpoints: vLLM initialises random weights itself (load_format "dummy"), which
# builds in seconds and keeps each checkpoint a few kB. Trap: transformers 5.19 saves some
# composite models under keys vLLM does not map (Qwen2-Audio's text model as
# ``language_model.model.model.*``: "There is no module or parameter named 'model' in
# Qwen2Model"), and some architectures have no transformers model class at all.
# Not included, but worth passing on a 2-core CPU: enforce_eager=True (torch.compile adds
# ~40 s to every engine start).
DUMMY_WEIGHTS: Mapping[str, Any] = {"load_format": "dummy", "max_num_seqs": 2}


def transformers_module() -> Any:
    """The transformers module, untyped: its processor classes have no annotations."""
    import transformers

    return transformers


def finish(
    dest: Path,
    model_class: Any,
    config: Any,
    processor: Any,
    *,
    rename: Callable[[str], str] | None = None,
    **engine_args: Any,
) -> TinyCheckpoint:
    """Save random bf16 weights and the processor, return the checkpoint with its CPU args."""
    # bfloat16: what vLLM's CPU backend runs by default; float32 weights get cast on load
    # (with one warning per tensor) and the checkpoint is twice as big.
    save_random_weights(model_class, config, dest, dtype="bfloat16", rename=rename)
    processor.save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**CPU_ARGS, **engine_args})


def save_config(config: Any, dest: Path, architecture: str) -> None:
    """Save a config alone (for ``load_format="dummy"``), naming its architecture."""
    # Trap: a config saved without a model has no "architectures"; vLLM then cannot pick the
    # model class ("LLM.generate() is only supported for generative models").
    config.architectures = [architecture]
    dest.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(str(dest))


# Small language-model sizes, as keyword arguments of most decoder configs (Llama, Qwen2,
# Mistral, Gemma, ...). Trap: vLLM's CPU attention kernels reject small head sizes such as 16
# ("Unsupported CPU attention configuration"); head_dim 64 works, so heads * 64 must equal
# hidden_size unless the config has its own ``head_dim`` field (then pass it explicitly).
TINY_TEXT: Mapping[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "max_position_embeddings": 4096,
}

# Text the BPE tokenizer is trained on: plain English plus the question of vLLM's examples, so
# that the examples' prompts tokenise into a handful of merged tokens rather than raw bytes.
DEFAULT_CORPUS: tuple[str, ...] = (
    "What is the content of each image?",
    "Describe the image. What is in this picture? The image shows a duck, a lion and a bird.",
    "You are a helpful assistant. The user asks a question and the assistant answers it.",
    "Image-1: Image-2: Picture 1: Picture 2: image_1: image_2: user assistant system",
    "the quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX 0123456789 ,.;:!?()[]{}<>",
    "Audio 1: Audio 2: What is recited in the audio? What sport and what nursery rhyme?",
    "Mary had a little lamb, its fleece was white as snow. And the winning call goes to ...",
)


def train_bpe(
    special_tokens: Sequence[str],
    *,
    vocab_size: int = 512,
    corpus: Iterable[str] | None = None,
    added_tokens: Sequence[str] = (),
    prepend: str | None = None,
) -> Any:
    """Train a small byte-level BPE ``tokenizers.Tokenizer``.

    special_tokens: get ids ``0 .. len(special_tokens) - 1`` in this order and are never
        split; they are registered as *special* added tokens (skipped when decoding with
        ``skip_special_tokens``). Duplicates are dropped (first occurrence wins).
    vocab_size: total size including the 256 byte symbols and the special tokens; it is
        raised to fit them if too small.
    corpus: training text (default :data:`DEFAULT_CORPUS`).
    added_tokens: extra tokens that are never split but are *not* special (decoded as text),
        appended after the trained vocabulary, in this order.
    prepend: a special token that encoding puts before every text (``add_special_tokens``),
        as Llama/Mistral/Gemma tokenizers do with their BOS; it must be in special_tokens.

    Byte-level means every string round-trips, whatever its characters.
    """
    from tokenizers import (  # type: ignore[import-untyped,unused-ignore]
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        trainers,
    )

    specials = list(dict.fromkeys(special_tokens))
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=max(vocab_size, len(alphabet) + len(specials) + 1),
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in specials],
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(corpus if corpus is not None else DEFAULT_CORPUS), trainer)
    plain = [t for t in dict.fromkeys(added_tokens) if t not in specials]
    if plain:
        tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in plain])
    if prepend is not None:
        from tokenizers import processors

        prepend_id = tokenizer.token_to_id(prepend)
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{prepend} $A",
            pair=f"{prepend} $A {prepend} $B",
            special_tokens=[(prepend, prepend_id)],
        )
    return tokenizer


def wrap_tokenizer(
    tokenizer: Any,
    *,
    chat_template: str | None = None,
    tokenizer_class: Any = None,
    **named_tokens: Any,
) -> Any:
    """Wrap a ``tokenizers.Tokenizer`` as a transformers fast tokenizer.

    tokenizer_class: the transformers class to build (default ``PreTrainedTokenizerFast``, i.e.
        the generic ``TokenizersBackend`` that ``AutoTokenizer`` reloads from tokenizer.json
        without touching its pre-tokenizer). Model-specific classes may rebuild the
        normaliser/pre-tokeniser from a vocab and lose ours; prefer the generic class unless a
        processor checks the tokenizer type.
    named_tokens: ``bos_token``, ``eos_token``, ``pad_token``, ``unk_token`` and any
        model-specific ``<name>_token`` (``image_token``, ``boi_token``, ...: transformers 5
        turns each ``*_token`` keyword into a tokenizer attribute, which processors such as
        Gemma3's read), plus other tokenizer init kwargs (``padding_side``, ...).
    """
    if tokenizer_class is None:
        from transformers import PreTrainedTokenizerFast

        tokenizer_class = PreTrainedTokenizerFast
    return tokenizer_class(tokenizer_object=tokenizer, chat_template=chat_template, **named_tokens)


def build_tokenizer(
    dest: Path,
    special_tokens: Sequence[str],
    *,
    chat_template: str | None = None,
    vocab_size: int = 512,
    added_tokens: Sequence[str] = (),
    corpus: Iterable[str] | None = None,
    tokenizer_class: Any = None,
    prepend: str | None = None,
    **named_tokens: Any,
) -> Any:
    """Train (:func:`train_bpe`), wrap (:func:`wrap_tokenizer`) and save a tokenizer to dest.

    Every ``named_tokens`` keyword ending in ``_token`` with a string value is added to the
    special tokens automatically, so ``bos_token="<s>"`` alone is enough. ``prepend``: see
    :func:`train_bpe` (e.g. ``prepend="<s>"`` for a Llama-style BOS).
    Returns the transformers tokenizer (reload it with ``AutoTokenizer.from_pretrained(dest)``).
    """
    named = [v for k, v in named_tokens.items() if k.endswith("_token") and isinstance(v, str)]
    raw = train_bpe(
        [*special_tokens, *named],
        vocab_size=vocab_size,
        corpus=corpus,
        added_tokens=added_tokens,
        prepend=prepend,
    )
    hf = wrap_tokenizer(
        raw, chat_template=chat_template, tokenizer_class=tokenizer_class, **named_tokens
    )
    dest.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(dest))
    return hf


def token_ids(tokenizer: Any, tokens: Iterable[str]) -> dict[str, int]:
    """Map each token string to its id in ``tokenizer`` (transformers or ``tokenizers``).

    Raises ``KeyError`` if a token is not a single vocabulary entry, so a config never gets an
    id that the tokenizer does not produce.
    """
    vocab = tokenizer.get_vocab()
    found: dict[str, int] = {}
    for token in tokens:
        if token not in vocab:
            raise KeyError(f"token {token!r} is not in the tiny tokenizer")
        found[token] = int(vocab[token])
    return found


def padded_vocab_size(tokenizer: Any, multiple: int = 64) -> int:
    """A model vocab size >= the tokenizer's length (added tokens included), rounded up."""
    n = len(tokenizer)
    return ((n + multiple - 1) // multiple) * multiple


def save_random_weights(
    model_class: Any,
    config: Any,
    dest: Path,
    *,
    dtype: str = "float32",
    seed: int = 0,
    rename: Callable[[str], str] | None = None,
) -> None:
    """Initialise ``model_class`` (a transformers ``PreTrainedModel``) from ``config`` with
    random weights and save ``model.safetensors`` (plus config.json) into dest.

    Deterministic for a given seed. dtype: a torch dtype name ("float32", "bfloat16").
    rename: maps each saved tensor name to the name the real checkpoint uses. Trap:
    transformers 5 saves some nested towers under names that differ from the published
    checkpoints (e.g. LLaVA's CLIP tower as ``vision_tower.embeddings.*`` where the Hub files,
    and vLLM's loader, have ``vision_tower.vision_model.embeddings.*``).
    """
    import torch

    torch.manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    model = model_class._from_config(config, dtype=torch_dtype)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(dest), safe_serialization=True)
    if rename is not None:
        from safetensors.torch import load_file, save_file

        weights = dest / "model.safetensors"
        tensors = load_file(str(weights))
        save_file(
            {rename(k): v for k, v in tensors.items()}, str(weights), metadata={"format": "pt"}
        )


def folder_bytes(path: Path) -> int:
    """Total size of the files under path, in bytes (to keep checkpoints tiny in tests)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
