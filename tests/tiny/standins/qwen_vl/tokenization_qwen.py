# Remote code for a checkpoint, run by whatever transformers loads it (4.57 under vLLM 0.23):
# module-level heavy imports as remote code has them, typed against no one transformers version.
# ruff: noqa: RUF012
# mypy: ignore-errors
"""STAND-IN for Qwen-VL-Chat's remote ``QWenTokenizer``: a tiktoken byte-level encoding (here:
the 256 bytes, no merges) plus named special tokens, with the attributes vLLM 0.23 reads
(``image_start_tag``, ``image_end_tag``, ``image_pad_tag``, ``special_tokens``, ``tokenizer``,
``decoder``, ``errors``; vllm/tokenizers/qwen_vl.py and transformers_utils/processors/qwen_vl.py).
The vocabulary file lists one base64 token and its rank per line, as tiktoken files do."""

import base64
import os
from typing import Any

import tiktoken
from transformers import PreTrainedTokenizer

VOCAB_FILE = "qwen.tiktoken"
# Any text splits into words, numbers, spaces and punctuation first (a simple tiktoken pattern).
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<ref>",
    "</ref>",
    "<box>",
    "</box>",
    "<quad>",
    "</quad>",
    "<img>",
    "</img>",
    "<imgpad>",
)


def load_ranks(path: str) -> dict[bytes, int]:
    with open(path, "rb") as f:
        return {
            base64.b64decode(token): int(rank)
            for token, rank in (line.split() for line in f.read().splitlines() if line)
        }


class QWenTokenizer(PreTrainedTokenizer):
    vocab_files_names = {"vocab_file": VOCAB_FILE}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(
        self,
        vocab_file: str,
        errors: str = "replace",
        image_start_tag: str = "<img>",
        image_end_tag: str = "</img>",
        image_pad_tag: str = "<imgpad>",
        **kwargs: Any,
    ) -> None:
        self.errors = errors
        self.mergeable_ranks = load_ranks(vocab_file)
        self.special_tokens = {
            token: len(self.mergeable_ranks) + i for i, token in enumerate(SPECIAL_TOKENS)
        }
        self.image_start_tag = image_start_tag
        self.image_end_tag = image_end_tag
        self.image_pad_tag = image_pad_tag
        self.tokenizer = tiktoken.Encoding(
            "qwen_standin",
            pat_str=PATTERN,
            mergeable_ranks=self.mergeable_ranks,
            special_tokens=self.special_tokens,
        )
        self.decoder: dict[int, bytes | str] = {v: k for k, v in self.mergeable_ranks.items()}
        self.decoder.update({v: k for k, v in self.special_tokens.items()})
        self.eod_id = self.special_tokens["<|endoftext|>"]
        super().__init__(errors=errors, **kwargs)

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.n_vocab)

    def __len__(self) -> int:
        return int(self.tokenizer.n_vocab)

    def get_vocab(self) -> dict[bytes | str, int]:
        return {**self.mergeable_ranks, **self.special_tokens}

    def _add_tokens(self, new_tokens: Any, special_tokens: bool = False) -> int:
        # Like the original: only the built-in special tokens exist; nothing can be added.
        for token in new_tokens:
            if str(token) not in self.special_tokens:
                raise ValueError(f"adding tokens is not supported ({token!r})")
        return 0

    def tokenize(  # type: ignore[override]
        self,
        text: str,
        allowed_special: Any = "all",
        disallowed_special: Any = (),
        **kwargs: Any,
    ) -> list[bytes | str]:
        return [
            self.decoder[t]
            for t in self.tokenizer.encode(
                text, allowed_special=allowed_special, disallowed_special=disallowed_special
            )
        ]

    def convert_tokens_to_string(self, tokens: list[bytes | str]) -> str:
        out = b""
        for token in tokens:
            out += token.encode("utf-8") if isinstance(token, str) else token
        return out.decode("utf-8", errors=self.errors)

    def _convert_token_to_id(self, token: bytes | str) -> int:
        if isinstance(token, str) and token in self.special_tokens:
            return self.special_tokens[token]
        if isinstance(token, bytes) and token in self.mergeable_ranks:
            return self.mergeable_ranks[token]
        raise ValueError(f"unknown token {token!r}")

    def _convert_id_to_token(self, index: int) -> bytes | str:
        return self.decoder[index]

    def _decode(  # type: ignore[override]
        self,
        token_ids: int | list[int],
        skip_special_tokens: bool = False,
        errors: str | None = None,
        **kwargs: Any,
    ) -> str:
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        if skip_special_tokens:
            ids = [i for i in ids if i < len(self.mergeable_ranks)]
        return str(self.tokenizer.decode(ids, errors=errors or self.errors))

    def save_vocabulary(
        self, save_directory: str, filename_prefix: str | None = None
    ) -> tuple[str]:
        path = os.path.join(save_directory, (filename_prefix or "") + VOCAB_FILE)
        with open(path, "wb") as f:
            for token, rank in sorted(self.mergeable_ranks.items(), key=lambda kv: kv[1]):
                f.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
        return (path,)
