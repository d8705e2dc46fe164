"""Build a tiny checkpoint with this Python's transformers: for the rows that only an older
vLLM runs (``Proof.env``), tests/e2e/test_older_vllm_e2e.py runs this in that vLLM's
environment (a tokenizer saved by transformers 5 names its class ``TokenizersBackend``, which
transformers 4.57 cannot load).

``python -m tests.tiny build MODALITY KEY DEST``: build the row's checkpoint into DEST; prints
its path, engine and sampling arguments as JSON.
``python -m tests.tiny count DEST TEXT``: how many tokens TEXT is to the checkpoint's
tokenizer, special tokens included, without BOS/EOS added.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.tiny import proofs


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if args[:1] == ["build"] and len(args) == 4:
        modality, key, dest = args[1:4]
        checkpoint = proofs()[(modality, key)].builder(Path(dest))
        doc = {
            "path": str(checkpoint.path),
            "engine_args": dict(checkpoint.engine_args),
            "sampling_args": dict(checkpoint.sampling_args),
        }
        print(json.dumps(doc))
        return 0
    if args[:1] == ["count"] and len(args) == 3:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args[1], trust_remote_code=True)
        print(len(tokenizer(args[2], add_special_tokens=False).input_ids))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
